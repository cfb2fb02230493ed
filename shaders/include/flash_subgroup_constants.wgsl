// The compile-time constants of flash_attention_subgroup.wgsl and paged_attention_subgroup.wgsl
// (pasted in at their `// #include flash_subgroup_constants.wgsl` line); their owners rewrite them.

// Compile-time constants, rewritten by src/gpu/flash_attention_subgroup.rs (and src/gpu/paged_attention_subgroup.rs) for each pipeline (the
// values here keep the file valid as written). Constants, not overrides, so that private arrays have
// exactly the size their loops run over and the compiler keeps them in registers.
// Head dimension (a multiple of 4).
const D: u32 = 64u;
// Query rows each invocation owns.
const R: u32 = 8u;
// 1: query rows kept in registers; 0: read at every step (heads over 768 wide; see flash_attention.wgsl).
const Q_REGS: u32 = 1u;
// Keys per step, one per lane: the adapter's subgroup size (named as the key step of
// flash_attention.wgsl, which the shared step code loops over).
const BC: u32 = 8u;

// Invocations per workgroup: a multiple of BC, so every subgroup is full.
override BR: u32 = 8u;

const D4: u32 = D / 4u;
const Q4: u32 = D4 * Q_REGS + 1u - Q_REGS;

