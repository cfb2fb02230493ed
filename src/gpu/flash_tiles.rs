//! Tile sizes of the forward kernels (`flash_attention` and, on CPU adapters with subgroups,
//! `flash_attention_subgroup`): how many rows, keys and invocations a workgroup's step covers.

use crate::model::limits::NARROW_HEAD_DIM;

/// Keys per step at most: the shader's loops over a step are unrolled, so this bounds code size.
pub const MAX_KEYS_PER_TILE: u32 = 32;

/// Tile sizes for one head width on one adapter. With the head width they become the shader's
/// compile-time constants (`BC`, `R`, `STAGE_KV`; `BR` is an override).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashTiles {
    /// Invocations per workgroup; each owns [`FlashTiles::rows_per_invocation`] rows (query, head).
    pub rows_per_workgroup: u32,
    /// Keys per step (and per K/V tile when staged).
    pub keys_per_tile: u32,
    /// Whether K/V tiles are staged in workgroup memory (`STAGE_KV`); CPU adapters read them directly.
    pub stage_kv: bool,
}

impl FlashTiles {
    /// Chooses tiles for `d_pad`-wide heads. Workgroup memory holds one K and one V tile; stay within the
    /// adapter's limit and the web's portable 16 KiB, and within its invocation limit.
    /// GPUs stage tiles in workgroup memory, 64 rows per workgroup, one per invocation.
    /// CPU-class adapters (lavapipe, SwiftShader) run invocations as SIMD lanes, where every load from a
    /// buffer or from workgroup memory costs one scalar load per lane, many times an FMA. So they read
    /// K/V straight from the buffer (no tile copy, no barriers) and give each invocation several rows
    /// (see [`FlashTiles::rows_per_invocation`]), so each element read serves several rows; the step
    /// and workgroup sizes measured best on lavapipe (`bench --tiles`).
    pub fn choose(limits: &wgpu::Limits, is_cpu: bool, d_pad: u32) -> Self {
        let max_rows = limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_x).max(1);
        if is_cpu {
            return Self {
                rows_per_workgroup: CPU_ROWS_PER_WORKGROUP.min(max_rows),
                keys_per_tile: cpu_keys(d_pad),
                stage_kv: false,
            };
        }
        let bytes = limits.max_compute_workgroup_storage_size.min(16384);
        let keys_fit = bytes / (2 * d_pad.max(4) * 4);
        let mut keys = MAX_KEYS_PER_TILE;
        while keys > keys_fit && keys > 1 {
            keys /= 2;
        }
        // Too little workgroup memory for even one key: read K/V directly instead.
        let stage_kv = keys <= keys_fit;
        Self { rows_per_workgroup: 64.min(max_rows), keys_per_tile: keys, stage_kv }
    }

    /// The tiles of every WebGPU GPU: [`FlashTiles::choose`] caps workgroup memory at the web's
    /// portable 16 KiB and rows at 64, both within what the WebGPU spec requires of every adapter, so
    /// only CPU-emulated adapters pick differently. What the lessons count tiles with, and what the
    /// tile overlay draws when the page computes on the CPU.
    pub fn web_gpu(d_pad: u32) -> Self {
        Self::choose(&wgpu::Limits::defaults(), false, d_pad)
    }

    /// These tiles as one launch of `rows_total` (query, head) rows uses them: few rows (decode, one
    /// query per head) get a narrow workgroup instead of idle invocations.
    pub fn for_rows(self, d_pad: u32, rows_total: u32) -> Self {
        let invocations_needed = rows_total.div_ceil(self.rows_per_invocation(d_pad));
        let narrow = invocations_needed.checked_next_power_of_two().unwrap_or(u32::MAX).max(8);
        Self { rows_per_workgroup: self.rows_per_workgroup.min(narrow), ..self }
    }

    /// Query rows each invocation owns (the shader's `R`): 1 with staged tiles (GPUs, where registers
    /// are scarce and workgroup memory cheap), several when K/V are read directly (CPU adapters, where
    /// an invocation's query rows and accumulators live in the stack and a load is costly).
    pub fn rows_per_invocation(&self, d_pad: u32) -> u32 {
        if self.stage_kv { 1 } else { cpu_rows_per_invocation(d_pad) }
    }

    /// Query rows one workgroup covers.
    pub fn rows_per_tile(&self, d_pad: u32) -> u32 {
        self.rows_per_workgroup * self.rows_per_invocation(d_pad)
    }

    /// Workgroup memory the shader declares with these tiles.
    pub fn workgroup_bytes(&self, d_pad: u32) -> u32 {
        if self.stage_kv { 2 * self.keys_per_tile * d_pad * 4 } else { 0 }
    }
}

/// CPU adapters: invocations per workgroup, one SIMD batch on lavapipe (8 lanes of 256 bits). Small
/// row tiles keep the key range of a workgroup tight (little masked work on the diagonal or around a
/// sliding window).
const CPU_ROWS_PER_WORKGROUP: u32 = 8;

/// CPU adapters: rows per invocation (the forward's loop form and both decode kernels; the forward's
/// subgroup form takes [`cpu_forward_rows_per_invocation`]). Every K/V value an invocation holds
/// serves R rows, so more rows amortise each read, but the step's code (unrolled R x keys x d/4 times)
/// and its compile time grow with R, and so do the query and output rows an invocation holds, which
/// must stay within WGSL's 8 KiB per function: two rows while both keep their queries in registers
/// (up to 384 wide: at 320, 39 GFLOP/s on lavapipe, more than at 128), then one (at 512, two rows
/// re-reading their queries ran no faster than one keeping it).
pub fn cpu_rows_per_invocation(d_pad: u32) -> u32 {
    if d_pad <= 64 {
        8
    } else if d_pad <= 128 {
        4
    } else if d_pad <= NARROW_HEAD_DIM || queries_in_registers(d_pad, 2) {
        2
    } else {
        1
    }
}

/// CPU adapters, the forward's subgroup form (`flash_attention_subgroup`): rows per invocation. As
/// [`cpu_rows_per_invocation`], but six for heads 65-128 wide (2 x 6 x 128 x 4 = 6 KiB of query and
/// output rows, [`ROWS_MAX_BYTES`]): at d = 128 six ran faster than four on lavapipe (n = 1,024, 8/8
/// full 12.1-12.2 against 10.8-11.4 GFLOP/s) and on SwiftShader (causal 2.2-2.8 against 1.5-1.75), on
/// a 2-core AMD EPYC (README.md has every row). The paged decode keeps
/// [`cpu_rows_per_invocation`]: a decode step has few rows per KV head (4 for Llama 3 8B), and six
/// would leave two of them padding.
pub fn cpu_forward_rows_per_invocation(d_pad: u32) -> u32 {
    if d_pad > 64 && d_pad <= 128 { 6 } else { cpu_rows_per_invocation(d_pad) }
}

/// Bytes of an invocation's query and output rows (`q_rows`, `acc`) the forward kernels hold at
/// most: WGSL allows 8 KiB of variables per function (browsers enforce it), and the step's scores,
/// weights and bounds need some of the rest. Every head up to 256 wide fits (6 KiB at most: the
/// forward's six rows 128 wide).
pub const ROWS_MAX_BYTES: u32 = 6 * 1024;

/// Whether the forward kernels keep `rows` query rows `d_pad` wide in registers next to their
/// output rows (the shader's `Q_REGS`); if not (heads over 768 wide), every step re-reads the
/// query from its buffer, which costs one load per key step where K costs one per key.
pub fn queries_in_registers(d_pad: u32, rows: u32) -> bool {
    2 * rows * d_pad * 4 <= ROWS_MAX_BYTES
}

/// CPU adapters: keys per step. The softmax rescale runs once per step, so wider steps cost less of
/// it; 8 measured best at d = 64 (4: 25 % slower; 16: slower to compile and no faster).
fn cpu_keys(d_pad: u32) -> u32 {
    if d_pad <= 128 { 8 } else { 4 }
}

/// The compile-time constants of a subgroup form (`flash_attention_subgroup`,
/// `paged_attention_subgroup`) for `d_pad`-wide heads: one key per lane at every step, `rows` rows
/// per invocation.
pub fn subgroup_constants(d_pad: u32, subgroup_size: u32, rows: u32) -> [(&'static str, u32); 5] {
    [
        ("D", d_pad),
        ("D4", d_pad / 4),
        ("R", rows),
        ("BC", subgroup_size),
        ("Q_REGS", u32::from(queries_in_registers(d_pad, rows))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_fit_the_web_limits() {
        let web = wgpu::Limits::defaults();
        for is_cpu in [false, true] {
            for d in [4, 16, 32, 64, 128, 256] {
                let t = FlashTiles::choose(&web, is_cpu, d);
                assert!(t.workgroup_bytes(d) <= 16384, "d {d}: {t:?}");
                assert!(t.rows_per_workgroup <= 256 && t.keys_per_tile <= MAX_KEYS_PER_TILE);
                assert_eq!(t.stage_kv, !is_cpu);
            }
        }
        // 2 tiles x 8 keys x 256 floats x 4 bytes = 16 KiB exactly.
        assert_eq!(FlashTiles::choose(&web, false, 256).keys_per_tile, 8);
        assert_eq!(FlashTiles::choose(&web, false, 64).keys_per_tile, 32);
        assert_eq!(FlashTiles::choose(&web, false, 64).rows_per_tile(64), 64);
        // A device with little workgroup memory gets a small tile...
        let small = wgpu::Limits { max_compute_workgroup_storage_size: 4096, ..web };
        assert_eq!(FlashTiles::choose(&small, false, 256).keys_per_tile, 2);
        // ...and one with none to spare reads K/V directly rather than failing.
        let none = wgpu::Limits { max_compute_workgroup_storage_size: 1024, ..web };
        let t = FlashTiles::choose(&none, false, 256);
        assert!(!t.stage_kv && t.workgroup_bytes(256) == 0);
        // CPU adapters read K/V directly, several rows per invocation (one on GPUs).
        let cpu = FlashTiles::choose(&web, true, 64);
        assert_eq!(cpu, FlashTiles { rows_per_workgroup: 8, keys_per_tile: 8, stage_kv: false });
        assert_eq!(cpu.rows_per_tile(64), 64);
        assert_eq!(FlashTiles::choose(&web, true, 256).rows_per_invocation(256), 2);
        assert_eq!(FlashTiles::choose(&web, false, 256).rows_per_invocation(256), 1);
    }

    #[test]
    fn wide_heads_fit_wgsl_function_memory_and_the_web_tiles() {
        let web = wgpu::Limits::defaults();
        // Up to 256 wide every adapter keeps its query rows (6 KiB of q_rows and acc at most).
        for d in [4, 64, 128, 256] {
            for rows in [cpu_rows_per_invocation(d), cpu_forward_rows_per_invocation(d), 1] {
                assert!(queries_in_registers(d, rows), "{d} {rows}");
            }
        }
        // Wider: two rows up to 384 (2 x 2 x 384 x 4 = 6 KiB of queries and outputs), then one;
        // 2 x 576 x 4 = 4,608 bytes keep the query, 2 x 1,024 x 4 = 8 KiB would not (WGSL's limit for
        // all of a function's variables), so it is re-read.
        assert_eq!((cpu_rows_per_invocation(320), cpu_rows_per_invocation(384)), (2, 2));
        // The forward's subgroup form: six rows for 65-128 (6 KiB, the most the budget allows);
        // at every other width the decode's rows.
        assert!(queries_in_registers(128, 6) && !queries_in_registers(132, 6));
        for (d, forward, decode) in [(64, 8, 8), (68, 6, 4), (128, 6, 4), (132, 2, 2), (256, 2, 2), (512, 1, 1)] {
            assert_eq!((cpu_forward_rows_per_invocation(d), cpu_rows_per_invocation(d)), (forward, decode), "{d}");
        }
        assert!(queries_in_registers(320, 2));
        for d in [388, 512, 576, 768, 1024] {
            assert_eq!(cpu_rows_per_invocation(d), 1, "{d}");
            assert_eq!(FlashTiles::choose(&web, true, d).rows_per_invocation(d), 1);
        }
        assert!(queries_in_registers(576, 1) && queries_in_registers(768, 1));
        assert!(!queries_in_registers(772, 1) && !queries_in_registers(1024, 1));
        // GPUs: K and V tiles of 2 keys at d = 1,024 (2 x 2 x 1,024 x 4 = 16 KiB), 4 at d = 512.
        assert_eq!(FlashTiles::web_gpu(1024).keys_per_tile, 2);
        assert_eq!(FlashTiles::web_gpu(512).keys_per_tile, 4);
        assert_eq!(FlashTiles::web_gpu(576).keys_per_tile, 2);
        for d in [320, 512, 576, 1024] {
            assert!(FlashTiles::web_gpu(d).stage_kv && FlashTiles::web_gpu(d).workgroup_bytes(d) <= 16384);
        }
    }

    #[test]
    fn a_web_gpu_and_a_launch_of_few_rows() {
        // Every WebGPU GPU: 64 rows; K and V tiles of 32 keys x 64 floats x 4 bytes = 16 KiB at d = 64,
        // 16 keys at d = 128 (2 x 16 x 128 x 4 = 16 KiB).
        assert_eq!(FlashTiles::web_gpu(64), FlashTiles { rows_per_workgroup: 64, keys_per_tile: 32, stage_kv: true });
        assert_eq!(FlashTiles::web_gpu(128).keys_per_tile, 16);
        // 256 rows fill 64-row workgroups; 12 rows (12 decode heads) need 16 invocations; 3 rows get 8.
        let gpu = FlashTiles::web_gpu(64);
        assert_eq!(gpu.for_rows(64, 256).rows_per_tile(64), 64);
        assert_eq!(gpu.for_rows(64, 12).rows_per_tile(64), 16);
        assert_eq!(gpu.for_rows(64, 3).rows_per_tile(64), 8);
        // A CPU adapter: 8 invocations of 8 rows at d = 64, so a workgroup covers 64 rows, not 8.
        let cpu = FlashTiles::choose(&wgpu::Limits::defaults(), true, 64).for_rows(64, 256);
        assert_eq!((cpu.rows_per_workgroup, cpu.rows_per_tile(64)), (8, 64));
        assert_eq!(gpu.for_rows(64, u32::MAX).rows_per_workgroup, 64, "no overflow");
    }
}
