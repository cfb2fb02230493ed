// The compile-time constants and K/V tiles of flash_attention.wgsl and paged_attention.wgsl (pasted in
// at their `// #include flash_constants.wgsl` line). Their owners rewrite the `const` lines.

// Compile-time constants. src/gpu/flash_attention.rs (and src/gpu/paged_attention.rs) rewrite these four lines (same names, new
// values) for each pipeline it builds; the values here are the defaults that keep this file valid
// as written. They are constants, not overrides, so every private array below has exactly the size
// its loops run over: drivers unroll those loops fully and keep the arrays in registers (CPU
// adapters such as lavapipe otherwise keep them in memory, where every read is a per-lane load).
// Head dimension (a multiple of 4; Rust pads other widths with zeros).
const D: u32 = 64u;
// Keys per step (and per K/V tile).
const BC: u32 = 16u;
// Query rows each invocation owns: every K/V element it reads serves R rows.
const R: u32 = 1u;
// 1: stage K/V tiles in workgroup memory (GPUs: each element is fetched from global memory once per
// workgroup). 0: every invocation reads K/V straight from the storage buffer, all at the same address
// (CPU adapters: no tile copy, no barriers).
const STAGE_KV: u32 = 1u;
// 1: each invocation keeps its query rows in registers (every head up to 768 wide). 0: it reads them
// from the buffer at every step, so its output rows alone fill WGSL's 8 KiB of function variables.
const Q_REGS: u32 = 1u;

// Invocations per workgroup; they own BR * R rows.
override BR: u32 = 64u;

const D4: u32 = D / 4u;
// Vec4s of each query row kept in registers (one, unused, without Q_REGS).
const Q4: u32 = D4 * Q_REGS + 1u - Q_REGS;
// Without staging the tiles shrink to one element (they must still be declared); their indices are
// then multiplied by STAGE_KV = 0, because unrolled code (CPU adapters) indexes them with constants,
// which must be in range even in branches that never run.
const TILE_VEC4S: u32 = BC * D4 * STAGE_KV + 1u - STAGE_KV;

var<workgroup> k_tile: array<vec4<f32>, TILE_VEC4S>;
var<workgroup> v_tile: array<vec4<f32>, TILE_VEC4S>;

