// Mask bounds shared by the attention kernels (pasted in at their `// #include attention_masks.wgsl`
// line by src/gpu/shader_text.rs: WGSL has no includes). They read the including shader's `params`
// uniform, which must have `mask_kind`, `mask_size` and `n_kv`.

// Keep in sync with `Mask::to_gpu` in src/model/mask.rs.
const MASK_FULL: u32 = 0u;
const MASK_CAUSAL: u32 = 1u;
const MASK_SLIDING: u32 = 2u;
const MASK_CHUNKED: u32 = 3u;

// Score given to masked keys: below any real scaled score, and never exponentiated.
const NO_SCORE: f32 = -3.0e38;

// First visible key of the query at absolute position `pos` (keep in sync with `Mask::key_range`).
fn key_lo(pos: u32) -> u32 {
    switch params.mask_kind {
        case MASK_SLIDING: { return max(pos + 1u, params.mask_size) - params.mask_size; }
        case MASK_CHUNKED: { return pos - pos % params.mask_size; }
        default: { return 0u; }
    }
}

// One past the last visible key of the query at `pos`, clipped to n_kv.
fn key_hi(pos: u32) -> u32 {
    if params.mask_kind == MASK_FULL {
        return params.n_kv;
    }
    return min(pos + 1u, params.n_kv);
}

// -inf for rows that see no key. WGSL has no infinity literal, and browsers (Tint) reject a constant
// expression that evaluates to one, so the bits come from a private variable read at run time.
var<private> NEG_INF_BITS: u32 = 0xff800000u;
fn negative_infinity() -> f32 {
    return bitcast<f32>(NEG_INF_BITS);
}
