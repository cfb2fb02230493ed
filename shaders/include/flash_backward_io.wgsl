// The buffers of the backward kernels after attention_io.wgsl (bindings 0-2), and what both forms
// share: flash_backward.wgsl and flash_backward_subgroup.wgsl (pasted in at their
// `// #include flash_backward_io.wgsl` line, after attention_masks.wgsl). Keep in sync with
// `BACKWARD_BINDINGS` and `BackwardBuffers` in src/gpu/flash_backward_io.rs.

// [h_kv, kv_stride, D] as vec4s.
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
// dO, the loss's gradient with respect to O: [h_q, n_q, D] as vec4s.
@group(0) @binding(4) var<storage, read> d_o: array<vec4<f32>>;
// The forward's log-sum-exp, [h_q, n_q] (-inf for a row that sees no key).
@group(0) @binding(5) var<storage, read> lse: array<f32>;
// D = rowsum(dO ∘ O), [h_q, n_q]: written by `main`, read by `key_grads`.
@group(0) @binding(6) var<storage, read_write> delta: array<f32>;
// dQ [h_q, n_q, D], then dK [h_kv, n_kv, D], then dV [h_kv, n_kv, D], as vec4s (one buffer: WebGPU
// guarantees 8 storage buffers per stage, and `main` binds all 8).
@group(0) @binding(7) var<storage, read_write> grads: array<vec4<f32>>;
// The forward's O, [h_q, n_q, D] as vec4s (`main` only).
@group(0) @binding(8) var<storage, read> o: array<vec4<f32>>;

// Vec4s of each row's Q and dO (`main`), each key's K and V, dK and dV (`key_grads`) that an
// invocation keeps: D4, or one, never used, where the form's constants say it does not keep them.
const ROW4: u32 = D4 * ROW_REGS + 1u - ROW_REGS;
const KEY4: u32 = D4 * KEY_REGS + 1u - KEY_REGS;
const DK4: u32 = D4 * KEEP_DK + 1u - KEEP_DK;
const DV4: u32 = D4 * KEEP_DV + 1u - KEEP_DV;

// The sum of a vec4's lanes, paired as the forward pairs them.
fn lanes_sum(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// Where dK and dV start in `grads`, in vec4s.
fn dk_base() -> u32 {
    return params.h_kv * params.group * params.n_q * D4;
}
fn dv_base() -> u32 {
    return dk_base() + params.h_kv * params.n_kv * D4;
}

// The first query position that sees `key`: every mask's visible keys [key_lo(pos), key_hi(pos))
// move up with pos, so the positions that see a key form a range (keep in sync with attention_masks.wgsl).
fn query_lo(key: u32) -> u32 {
    return select(key, 0u, params.mask_kind == MASK_FULL);
}

// One past the last query position that sees `key` (saturating: a window may be u32::MAX wide).
fn query_hi(key: u32) -> u32 {
    let most = 0xffffffffu;
    switch params.mask_kind {
        case MASK_SLIDING: { return select(key + params.mask_size, most, params.mask_size > most - key); }
        case MASK_CHUNKED: {
            let start = key - key % params.mask_size;
            return select(start + params.mask_size, most, params.mask_size > most - start);
        }
        default: { return most; }
    }
}
