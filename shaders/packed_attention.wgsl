// Attention over a packed quantised KV cache (src/model/kv_packed.rs's layout, written by
// kv_pack.wgsl): K and V stay in the scheme's own bits (fp16, int8 with an f32 scale, int4 / int2
// with an f16 scale and min per group of channels, fp8 with the f32 scale of its tensor or KV head
// from the cache's tail), and each value is dequantised here, in the
// loops that read it. So the bytes a decode step reads are the scheme's bytes, not an f32 copy.
// KIVI's cache (KIVI_CACHE = 1; a pass's or a decode cache's) keeps K in blocks of K_BLOCK tokens (each
// token's codes, then one scale word a channel for the block) and V per token as the grouped packing;
// the keys from k_packed (K) or v_packed (V) on are f32 rows in a ring after the packed ones (key t in
// row t % ring).
//
// Work split (flash-decoding). A workgroup owns ROWS rows of one KV head (a row is one (query, query
// head) pair, as in flash_attention.wgsl: a GQA group's query heads share each K and V value it
// decodes) and one of `splits` slices of their keys. It walks its slice in chunks of CHUNK keys:
// each invocation decodes whole K vectors of the chunk (two keys, each scale once per group) and
// scores them against the ROWS queries staged in workgroup memory; the chunk's max per row comes
// from a reduction over the invocations, each key's weight p is computed once, and then each
// invocation adds p * V to a few channels of one code word (one scale serves them) for every
// KEY_SETS-th key; the key sets' sums are added once, at the end. With one slice the workgroup writes O; with several it writes its slice's O and log-sum-exp,
// and `combine` weighs the slices into O. A row that sees no key gets O = 0. f32 throughout; the
// CPU twin (src/cpu/packed_attention.rs) decodes the same words and sums in f64.

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
    h_kv: u32,
    // Tiles of ROWS rows per KV head, and slices of each tile's keys.
    tiles: u32,
    splits: u32,
    // Words per packed vector: codes, then scales.
    words: u32,
    // fp8: where each cache's tail of scales starts (in words), and 1 where it holds one a KV head.
    scale_tail: u32,
    scale_per_head: u32,
    // KIVI: keys below these are packed, the rest f32 rows in a ring of k_ring / v_ring rows a head
    // from k_f32_at / v_f32_at (words); a head's room for key blocks and packed values.
    k_packed: u32,
    v_packed: u32,
    k_f32_at: u32,
    v_f32_at: u32,
    k_ring: u32,
    v_ring: u32,
    k_blocks: u32,
    v_rows: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// [h_q, n_q, d]
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
// With several slices: each slice's O [splits, h_q * n_q, d], then its log-sum-exp [splits, h_q * n_q].
@group(0) @binding(2) var<storage, read_write> partial: array<f32>;
// [h_q, n_q, d]
@group(0) @binding(3) var<storage, read> q: array<f32>;
// [h_kv, kv_stride, words]: the packed caches (KIVI's: K's blocks or V's rows, then f32 rows).
@group(0) @binding(4) var<storage, read> k: array<u32>;
@group(0) @binding(5) var<storage, read> v: array<u32>;

// #include grid.wgsl

// #include attention_masks.wgsl

// #include f16_bits.wgsl

// Compile-time constants, rewritten per pipeline by src/gpu/packed_attention.rs (the values here
// keep the file valid as written): the packing (KIND_* below), bits per code, channels per scale
// word (d for int8), the head width, the rows a workgroup owns (ROWS * D <= 1024), and the output
// channels each invocation owns while it adds p * V (a few codes of one word; CH * ROWS <= 32).
const KIND: u32 = 2u;
const BITS: u32 = 4u;
const SCALE_GROUP: u32 = 32u;
// fp8's fraction bits and exponent bias (E4M3: 3 and 7; E5M2: 2 and 15).
const FP8_MANTISSA: u32 = 3u;
const FP8_BIAS: u32 = 7u;
const D: u32 = 32u;
const ROWS: u32 = 4u;
const CH: u32 = 8u;
// 1 for KIVI's cache of a pass (0: K is packed as V is), and its tokens a key block.
const KIVI_CACHE: u32 = 0u;
const K_BLOCK: u32 = 1u;
const KIVI: bool = KIVI_CACHE == 1u;

const KIND_F16: u32 = 0u;
const KIND_INT8: u32 = 1u;
const KIND_FP8: u32 = 3u;

// Codes a word holds (rewritten too, so loops over it are written out), and words of codes a
// vector starts with.
const PER_WORD: u32 = 8u;
const CODE_WORDS: u32 = (D * BITS + 31u) / 32u;
// Whether every word's codes are channels of one group (the scale is then read once a word).
const WHOLE_WORDS: bool = D % PER_WORD == 0u && SCALE_GROUP % PER_WORD == 0u;
// Keys a chunk holds: two an invocation (WG is 64, src/gpu/packed_attention.rs).
const CHUNK: u32 = 128u;
// While adding p * V, invocations 0..LANES_PER_KEY * KEY_SETS share a key's channels, CH each, and
// the chunk's keys go to KEY_SETS sets of them (the sets' sums are added at the end).
const LANES_PER_KEY: u32 = (D + CH - 1u) / CH;
const KEY_SETS: u32 = 64u / LANES_PER_KEY;

// The rows' queries, pre-scaled [ROWS, D], at 0; the chunk's scores, then weights [ROWS, CHUNK], at
// QUERY_FLOATS. At the end of the slice, each key set's sums [KEY_SETS, ROWS, D] (at most 64 * 32).
const QUERY_FLOATS: u32 = 1024u;
var<workgroup> staged: array<f32, 2048>;
// One slot per row and invocation, for reductions: [ROWS, 64] (ROWS <= 8).
var<workgroup> reduced: array<f32, 512>;

// Word i of the K cache (tensor 0) or the V cache (tensor 1).
fn word_of(tensor: u32, i: u32) -> u32 {
    if tensor == 0u {
        return k[i];
    }
    return v[i];
}

// The scale and zero point of channel c of the vector at word base (fp16: 1 and 0; fp8: its KV
// head's scale from the cache's tail, and 0).
fn scale_of(tensor: u32, base: u32, c: u32) -> vec2<f32> {
    if KIND == KIND_F16 {
        return vec2<f32>(1.0, 0.0);
    }
    if KIND == KIND_FP8 {
        let slot = select(0u, base / (params.kv_stride * params.words), params.scale_per_head != 0u);
        return vec2<f32>(bitcast<f32>(word_of(tensor, params.scale_tail + slot)), 0.0);
    }
    let w = word_of(tensor, base + CODE_WORDS + c / SCALE_GROUP);
    if KIND == KIND_INT8 {
        return vec2<f32>(bitcast<f32>(w), 0.0);
    }
    return vec2<f32>(f16_value(w & 0xffffu), f16_value(w >> 16u));
}

// The value of fp8 bits b (the low 8 bits), without a branch (as f16_value).
fn fp8_value(b: u32) -> f32 {
    let e = (b & 0x7fu) >> FP8_MANTISSA;
    let m = b & ((1u << FP8_MANTISSA) - 1u);
    let subnormal = f32(m) * pow2(1 - i32(FP8_BIAS) - i32(FP8_MANTISSA));
    let normal = bitcast<f32>(((e + 127u - FP8_BIAS) << 23u) | (m << (23u - FP8_MANTISSA)));
    let a = select(subnormal, normal, e != 0u);
    return select(a, -a, (b & 0x80u) != 0u);
}

// Code j of `word`, as a number before its scale.
fn code_value(word: u32, j: u32) -> f32 {
    let shift = j * BITS;
    if KIND == KIND_F16 {
        return f16_value(word >> shift);
    }
    if KIND == KIND_FP8 {
        return fp8_value(extractBits(word, shift, 8u));
    }
    if KIND == KIND_INT8 {
        return f32(extractBits(bitcast<i32>(word), shift, 8u));
    }
    return f32(extractBits(word, shift, BITS));
}

// The rows' scores (pre-scaled queries) against the K vector at word base, each group's scale
// decoded once and each code word read once.
fn scores_of(base: u32) -> array<f32, ROWS> {
    var dot: array<f32, ROWS>;
    var sz = vec2<f32>(0.0);
    for (var w = 0u; w < CODE_WORDS; w++) {
        let word = k[base + w];
        if WHOLE_WORDS && (w * PER_WORD) % SCALE_GROUP == 0u {
            sz = scale_of(0u, base, w * PER_WORD);
        }
        for (var j = 0u; j < PER_WORD; j++) {
            let c = w * PER_WORD + j;
            if WHOLE_WORDS || c < D {
                if !WHOLE_WORDS && c % SCALE_GROUP == 0u {
                    sz = scale_of(0u, base, c);
                }
                let x = code_value(word, j) * sz.x + sz.y;
                for (var r = 0u; r < ROWS; r++) {
                    dot[r] = fma(staged[r * D + c], x, dot[r]);
                }
            }
        }
    }
    return dot;
}

// The rows' scores against the f32 K row at word `at` (KIVI's unquantised keys).
fn f32_scores(at: u32) -> array<f32, ROWS> {
    var dot: array<f32, ROWS>;
    for (var c = 0u; c < D; c += 1u) {
        let x = bitcast<f32>(k[at + c]);
        for (var r = 0u; r < ROWS; r++) {
            dot[r] = fma(staged[r * D + c], x, dot[r]);
        }
    }
    return dot;
}

// The rows' scores against KIVI's packed key `key` of `kv_head`: its codes in its block, each
// channel's scale word after the block's codes.
fn block_scores(kv_head: u32, key: u32) -> array<f32, ROWS> {
    var dot: array<f32, ROWS>;
    let base = (kv_head * params.k_blocks + key / K_BLOCK) * (K_BLOCK * CODE_WORDS + D);
    let codes = base + key % K_BLOCK * CODE_WORDS;
    let scales = base + K_BLOCK * CODE_WORDS;
    for (var w = 0u; w < CODE_WORDS; w += 1u) {
        let word = k[codes + w];
        for (var j = 0u; j < PER_WORD; j++) {
            let c = w * PER_WORD + j;
            if c < D {
                let sz = k[scales + c];
                let x = f32(extractBits(word, j * BITS, BITS)) * f16_value(sz & 0xffffu) + f16_value(sz >> 16u);
                for (var r = 0u; r < ROWS; r++) {
                    dot[r] = fma(staged[r * D + c], x, dot[r]);
                }
            }
        }
    }
    return dot;
}

// The rows' scores against key `key` of `kv_head`, however the cache holds it.
fn key_scores(kv_head: u32, key: u32) -> array<f32, ROWS> {
    if KIVI {
        if key >= params.k_packed {
            return f32_scores(params.k_f32_at + (kv_head * params.k_ring + key % max(params.k_ring, 1u)) * D);
        }
        return block_scores(kv_head, key);
    }
    return scores_of((kv_head * params.kv_stride + key) * params.words);
}

// The largest (op 0) or the sum (op 1) of each row's x over the workgroup: every invocation calls it alike.
fn across_lanes(x: array<f32, ROWS>, op: u32, lid: u32) -> array<f32, ROWS> {
    for (var r = 0u; r < ROWS; r++) {
        reduced[r * 64u + lid] = x[r];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if lid < s {
            for (var r = 0u; r < ROWS; r++) {
                let mine = reduced[r * 64u + lid];
                let other = reduced[r * 64u + lid + s];
                reduced[r * 64u + lid] = select(max(mine, other), mine + other, op == 1u);
            }
        }
        workgroupBarrier();
    }
    var out: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        out[r] = reduced[r * 64u];
    }
    workgroupBarrier();
    return out;
}

// The output row (h * n_q + i) of row `row` of KV head `kv_head` (rows past the end repeat the last).
fn out_row_of(kv_head: u32, row: u32) -> u32 {
    let r = min(row, params.n_q * params.group - 1u);
    return (kv_head * params.group + r % params.group) * params.n_q + r / params.group;
}

@compute @workgroup_size(WG)
fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let wg = workgroup_index(at);
    let split = wg % params.splits;
    let row0 = wg / params.splits % params.tiles * ROWS;
    let kv_head = wg / params.splits / params.tiles;
    if kv_head >= params.h_kv {
        return;
    }
    // Each row's visible keys, and the tile's: every row's within lo..hi.
    var lo: array<u32, ROWS>;
    var hi: array<u32, ROWS>;
    var tile_lo = params.n_kv;
    var tile_hi = 0u;
    for (var r = 0u; r < ROWS; r++) {
        let pos = params.q_offset + out_row_of(kv_head, row0 + r) % params.n_q;
        lo[r] = key_lo(pos);
        hi[r] = key_hi(pos);
        tile_lo = min(tile_lo, lo[r]);
        tile_hi = max(tile_hi, hi[r]);
    }
    tile_hi = max(tile_hi, tile_lo);
    let span = (tile_hi - tile_lo + params.splits - 1u) / params.splits;
    let first = min(tile_lo + split * span, tile_hi);
    let end = min(first + span, tile_hi);
    for (var e = lid; e < ROWS * D; e += WG) {
        staged[e] = q[out_row_of(kv_head, row0 + e / D) * D + e % D] * params.scale;
    }
    workgroupBarrier();

    // The running max (alike in every invocation), this invocation's share of the sum, and its
    // channels' accumulators [CH, ROWS].
    var m: array<f32, ROWS>;
    var l: array<f32, ROWS>;
    var acc: array<f32, CH * ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        m[r] = NO_SCORE;
    }
    for (var c0 = first; c0 < end; c0 += CHUNK) {
        let n = min(CHUNK, end - c0);
        var lane_max: array<f32, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            lane_max[r] = NO_SCORE;
        }
        for (var e = lid; e < CHUNK; e += WG) {
            let key = c0 + e;
            var s: array<f32, ROWS>;
            if e < n {
                s = key_scores(kv_head, key);
            }
            for (var r = 0u; r < ROWS; r++) {
                let seen = e < n && key >= lo[r] && key < hi[r];
                staged[QUERY_FLOATS + r * CHUNK + e] = select(NO_SCORE, s[r], seen);
                lane_max[r] = max(lane_max[r], staged[QUERY_FLOATS + r * CHUNK + e]);
            }
        }
        let chunk_max = across_lanes(lane_max, 0u, lid);
        // Rescale by alpha = exp(m_old - m_new) (0 before the first visible key: it underflows);
        // masked keys weigh 0, never exp.
        var alpha: array<f32, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            let m_new = max(m[r], chunk_max[r]);
            alpha[r] = exp(m[r] - m_new);
            m[r] = m_new;
            l[r] *= alpha[r];
        }
        for (var e = lid; e < CHUNK; e += WG) {
            for (var r = 0u; r < ROWS; r++) {
                let s = staged[QUERY_FLOATS + r * CHUNK + e];
                let p = select(0.0, exp(s - m[r]), s > NO_SCORE);
                staged[QUERY_FLOATS + r * CHUNK + e] = p;
                l[r] += p;
            }
        }
        workgroupBarrier();

        // acc = acc * alpha + P V over this invocation's key set and channels c1..c1 + CH.
        for (var a = 0u; a < CH; a++) {
            for (var r = 0u; r < ROWS; r++) {
                acc[a * ROWS + r] *= alpha[r];
            }
        }
        let c1 = lid % LANES_PER_KEY * CH;
        for (var e = select(lid / LANES_PER_KEY, n, lid >= LANES_PER_KEY * KEY_SETS); e < n; e += KEY_SETS) {
            let key = c0 + e;
            var p: array<f32, ROWS>;
            for (var r = 0u; r < ROWS; r++) {
                p[r] = staged[QUERY_FLOATS + r * CHUNK + e];
            }
            if KIVI && key >= params.v_packed {
                // KIVI's unquantised values: an f32 row.
                let at = params.v_f32_at + (kv_head * params.v_ring + key % max(params.v_ring, 1u)) * D;
                for (var a = 0u; a < CH; a++) {
                    let c = c1 + a;
                    if c < D {
                        let x = bitcast<f32>(v[at + c]);
                        for (var r = 0u; r < ROWS; r++) {
                            acc[a * ROWS + r] = fma(p[r], x, acc[a * ROWS + r]);
                        }
                    }
                }
            } else {
                let base = (kv_head * select(params.kv_stride, params.v_rows, KIVI) + key) * params.words;
                var sz = vec2<f32>(0.0);
                var word = 0u;
                for (var a = 0u; a < CH; a++) {
                    let c = c1 + a;
                    if c < D {
                        if a == 0u || c % SCALE_GROUP == 0u {
                            sz = scale_of(1u, base, c);
                        }
                        if a == 0u || c % PER_WORD == 0u {
                            word = v[base + c / PER_WORD];
                        }
                        let x = code_value(word, c % PER_WORD) * sz.x + sz.y;
                        for (var r = 0u; r < ROWS; r++) {
                            acc[a * ROWS + r] = fma(p[r], x, acc[a * ROWS + r]);
                        }
                    }
                }
            }
        }
        // Every invocation has read the weights before the next chunk writes them.
        workgroupBarrier();
    }

    let total = across_lanes(l, 1u, lid);
    // The key sets' sums, added channel by channel.
    if lid < LANES_PER_KEY * KEY_SETS {
        for (var a = 0u; a < CH; a++) {
            let c = lid % LANES_PER_KEY * CH + a;
            if c < D {
                for (var r = 0u; r < ROWS; r++) {
                    staged[(lid / LANES_PER_KEY * ROWS + r) * D + c] = acc[a * ROWS + r];
                }
            }
        }
    }
    workgroupBarrier();
    let rows = params.h_q * params.n_q;
    for (var i = lid; i < ROWS * D; i += WG) {
        let r = i / D;
        if row0 + r < params.n_q * params.group {
            let out_row = out_row_of(kv_head, row0 + r);
            var sum = 0.0;
            for (var ks = 0u; ks < KEY_SETS; ks++) {
                sum += staged[(ks * ROWS + r) * D + i % D];
            }
            // One slice writes O; several write their own O and log-sum-exp for `combine`.
            let x = select(0.0, sum / total[r], total[r] > 0.0);
            if params.splits == 1u {
                o[out_row * D + i % D] = x;
            } else {
                partial[(split * rows + out_row) * D + i % D] = x;
            }
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        if lid == 0u && params.splits > 1u && row0 + r < params.n_q * params.group {
            let lse = select(NO_SCORE, m[r] + log(total[r]), total[r] > 0.0);
            partial[params.splits * rows * D + split * rows + out_row_of(kv_head, row0 + r)] = lse;
        }
    }
}

// O of each output row from its slices: each slice's O weighted by exp(lse - the largest lse), over
// the weights' sum (0 where no slice saw a key). One workgroup per output row; reads params.d, not D.
@compute @workgroup_size(WG)
fn combine(at: GridPlace, @builtin(local_invocation_index) lid: u32) {
    let row = workgroup_index(at);
    let rows = params.h_q * params.n_q;
    if row >= rows {
        return;
    }
    let lse_at = params.splits * rows * params.d;
    var top = NO_SCORE;
    for (var s = 0u; s < params.splits; s++) {
        top = max(top, partial[lse_at + s * rows + row]);
    }
    var total = 0.0;
    for (var s = 0u; s < params.splits; s++) {
        let lse = partial[lse_at + s * rows + row];
        total += select(0.0, exp(lse - top), lse > NO_SCORE);
    }
    for (var c = lid; c < params.d; c += WG) {
        var x = 0.0;
        for (var s = 0u; s < params.splits; s++) {
            let lse = partial[lse_at + s * rows + row];
            x += select(0.0, exp(lse - top), lse > NO_SCORE) * partial[(s * rows + row) * params.d + c];
        }
        o[row * params.d + c] = select(0.0, x / total, total > 0.0);
    }
}
