// Attention over a packed quantised KV cache (src/model/kv_packed.rs's layout, written by
// kv_pack.wgsl): K and V stay in the scheme's own bits (fp16, int8 with an f32 scale, int4 / int2
// with an f16 scale and min per group of channels), and each value is dequantised here, in the
// loops that read it. So the bytes a decode step reads are the scheme's bytes, not an f32 copy.
//
// One workgroup per (query head, query), WG = 64 invocations. The query is staged in workgroup
// memory. The visible keys (key_lo..key_hi of the query's position under the mask) go by in tiles
// of WG: each invocation scores one key of the tile (decoding its K vector), then every invocation
// takes the tile's scores from workgroup memory into the same online softmax (running max m and
// sum l) and adds p * V to the channels it owns (lid, lid + WG, ...), decoding those channels of
// each key's V. A row that sees no key gets O = 0. f32 throughout; the CPU twin
// (src/cpu/packed_attention.rs) decodes the same words and sums in f64.

// Keep in sync with `PackedAttentionParams` in src/gpu/packed_attention.rs.
struct Params {
    n_q: u32,
    n_kv: u32,
    h_q: u32,
    // Query heads per KV head (G).
    group: u32,
    // Rows per KV head in the packed caches (>= n_kv).
    kv_stride: u32,
    d: u32,
    // MASK_* of attention_masks.wgsl; mask_size is the window or the chunk.
    mask_kind: u32,
    mask_size: u32,
    scale: f32,
    // The position of query 0 (n_kv - n_q: the queries are the last positions).
    q_offset: u32,
    // KIND_* below, and kv_pack.wgsl's layout: bits per code, channels per scale word, words of
    // codes, words per vector.
    kind: u32,
    bits: u32,
    scale_group: u32,
    code_words: u32,
    words: u32,
    _pad: u32,
}

const KIND_F16: u32 = 0u;
const KIND_INT8: u32 = 1u;

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, d]
@group(0) @binding(1) var<storage, read> q: array<f32>;
// [h_kv, kv_stride, words]: the packed caches.
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
// [h_q, n_q, d]
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

// #include grid.wgsl

// #include attention_masks.wgsl

// The widest head (KERNEL_MAX_HEAD_DIM in src/model/limits.rs), and the channels each of the 64
// invocations may own (written out: a browser's compiler may not take an override as an array size).
const MAX_D: u32 = 1024u;
const MAX_OWNED: u32 = 16u;

var<workgroup> query: array<f32, 1024>;
// One slot per invocation: WG is 64 (src/gpu/packed_attention.rs).
var<workgroup> scores: array<f32, 64>;

// #include f16_bits.wgsl

// Channel c's value from the word holding its code and its group's scale word.
fn dequantise(code_word: u32, scale_word: u32, c: u32) -> f32 {
    let shift = (c * params.bits) % 32u;
    if params.kind == KIND_F16 {
        return f16_value(code_word >> shift);
    }
    if params.kind == KIND_INT8 {
        return f32(extractBits(bitcast<i32>(code_word), shift, 8u)) * bitcast<f32>(scale_word);
    }
    let code = f32(extractBits(code_word, shift, params.bits));
    return code * f16_value(scale_word & 0xffffu) + f16_value(scale_word >> 16u);
}

// Where channel c's scale word is, from its vector's first word (fp16 has none: its first word).
fn scale_index(base: u32, c: u32) -> u32 {
    return select(base + params.code_words + c / params.scale_group, base, params.kind == KIND_F16);
}

// Channel c of the K vector at word base.
fn key_at(base: u32, c: u32) -> f32 {
    return dequantise(k[base + c * params.bits / 32u], k[scale_index(base, c)], c);
}

// Channel c of the V vector at word base.
fn value_at(base: u32, c: u32) -> f32 {
    return dequantise(v[base + c * params.bits / 32u], v[scale_index(base, c)], c);
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let row = workgroup_index(at);
    if row >= params.h_q * params.n_q {
        return;
    }
    let d = min(params.d, MAX_D);
    let pos = params.q_offset + row % params.n_q;
    let kv_row0 = (row / params.n_q / params.group) * params.kv_stride;
    let lo = key_lo(pos);
    let hi = key_hi(pos);
    for (var c = lid; c < d; c += WG) {
        query[c] = q[row * params.d + c];
    }
    workgroupBarrier();

    var m = NO_SCORE;
    var l = 0.0;
    var acc: array<f32, MAX_OWNED>;
    for (var j0 = lo; j0 < hi; j0 += WG) {
        let n = min(WG, hi - j0);
        var s = NO_SCORE;
        if lid < n {
            let base = (kv_row0 + j0 + lid) * params.words;
            var qk = 0.0;
            for (var c = 0u; c < d; c++) {
                qk += query[c] * key_at(base, c);
            }
            s = qk * params.scale;
        }
        scores[lid] = s;
        workgroupBarrier();

        var tile_max = NO_SCORE;
        for (var e = 0u; e < n; e++) {
            tile_max = max(tile_max, scores[e]);
        }
        let m_new = max(m, tile_max);
        let correction = exp(m - m_new);
        l *= correction;
        for (var a = 0u; a < MAX_OWNED; a++) {
            acc[a] *= correction;
        }
        for (var e = 0u; e < n; e++) {
            let p = exp(scores[e] - m_new);
            l += p;
            let base = (kv_row0 + j0 + e) * params.words;
            for (var a = 0u; a < MAX_OWNED && a * WG + lid < d; a++) {
                acc[a] += p * value_at(base, a * WG + lid);
            }
        }
        m = m_new;
        // Every invocation has read the scores before the next tile writes them.
        workgroupBarrier();
    }

    for (var a = 0u; a < MAX_OWNED && a * WG + lid < d; a++) {
        o[row * params.d + a * WG + lid] = select(acc[a] / l, 0.0, l == 0.0);
    }
}
