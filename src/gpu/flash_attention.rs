//! Owner of `shaders/flash_attention.wgsl`: the tiled online-softmax forward (O and log-sum-exp).

use bytemuck::{Pod, Zeroable};

use crate::attention::{AttentionShape, Mask};
use crate::gpu::flash_attention_subgroup::FlashSubgroup;
use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// Uniform parameters of one launch.
/// Keep in sync with `Params` in `shaders/include/attention_io.wgsl` (the forward kernels and the row softmax share it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct FlashParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_kv: u32,
    pub group: u32,
    pub kv_stride: u32,
    pub mask_kind: u32,
    pub mask_size: u32,
    pub scale: f32,
    pub tiles_per_kv_head: u32,
    pub q_offset: u32,
    /// Row softmax with block outputs: key blocks per row.
    pub key_blocks: u32,
    pub _pad: u32,
}

/// params, Q, K (`shaders/include/attention_io.wgsl`), V, O, lse (`flash_io.wgsl`), shared by both forward kernels.
pub const FLASH_BINDINGS: [Binding; 6] =
    [Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite, Binding::ReadWrite];

impl FlashParams {
    /// The parameters of one launch whose workgroups each cover `1 / tiles_per_kv_head` of a KV head's rows.
    pub fn new(shape: AttentionShape, kv_stride: u32, mask: Mask, scale: f32, tiles_per_kv_head: u32) -> Self {
        let (mask_kind, mask_size) = mask.to_gpu();
        Self {
            n_q: shape.n_q,
            n_kv: shape.n_kv,
            h_kv: shape.h_kv,
            group: shape.group_size(),
            kv_stride,
            mask_kind,
            mask_size,
            scale,
            tiles_per_kv_head,
            q_offset: shape.q_offset(),
            key_blocks: 0,
            _pad: 0,
        }
    }
}

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

/// CPU adapters: rows per invocation (both forward kernels). Every K/V value an invocation holds
/// serves R rows, so more rows amortise each read, but the step's code (unrolled R x keys x d/4 times)
/// and its compile time grow with R.
pub fn cpu_rows_per_invocation(d_pad: u32) -> u32 {
    if d_pad <= 64 {
        8
    } else if d_pad <= 128 {
        4
    } else {
        2
    }
}

/// CPU adapters: keys per step. The softmax rescale runs once per step, so wider steps cost less of
/// it; 8 measured best at d = 64 (4: 25 % slower; 16: slower to compile and no faster).
fn cpu_keys(d_pad: u32) -> u32 {
    if d_pad <= 128 { 8 } else { 4 }
}

/// Whether CPU adapters get unrolled kernels ([`crate::gpu::shader_text`]) unless told otherwise.
/// Natively yes: 5-15x faster on lavapipe, compiled in seconds. In the browser no: on SwiftShader the
/// unrolled subgroup kernel halves the explorer's time at n = 256, but its first compile made the
/// first heatmap take 9 s instead of 1.4 s. The benchmark view turns them on (compiling is not timed).
const UNROLL_ON_CPU_BY_DEFAULT: bool = !cfg!(target_arch = "wasm32");

/// The bind-group layout and the per-head-width pipelines.
pub struct FlashAttention {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    limits: wgpu::Limits,
    is_cpu: bool,
    /// Tiles forced by the benchmark's `--tiles` (tuning), instead of [`FlashTiles::choose`].
    forced: std::cell::Cell<Option<FlashTiles>>,
    /// The subgroup-sharing kernel, used instead on CPU adapters that have subgroups, when unrolled.
    subgroup: Option<FlashSubgroup>,
}

/// The buffers of one launch. Q/O are `[h_q, n_q, d_pad]`, K/V `[h_kv, kv_stride, d_pad]`, lse `[h_q, n_q]`.
pub struct FlashBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
    pub lse: &'a wgpu::Buffer,
}

impl FlashAttention {
    pub fn new(ctx: &GpuContext) -> Self {
        let layout = launch::bind_group_layout(&ctx.device, "flash_attention", &FLASH_BINDINGS);
        let source = include_str!("../../shaders/flash_attention.wgsl");
        let pipelines = PipelineCache::new(&ctx.device, "flash_attention", source, "main", &layout);
        pipelines.set_unrolled(ctx.adapter.is_cpu && UNROLL_ON_CPU_BY_DEFAULT);
        let subgroup = if ctx.adapter.is_cpu { FlashSubgroup::new(ctx) } else { None };
        Self {
            layout,
            pipelines,
            limits: ctx.limits.clone(),
            is_cpu: ctx.adapter.is_cpu,
            forced: Default::default(),
            subgroup,
        }
    }

    /// Whether CPU adapters' pipelines built from now on unroll their loops (the benchmark asks for
    /// them; see [`UNROLL_ON_CPU_BY_DEFAULT`]). GPUs keep their loops.
    pub fn set_unrolled(&self, unroll: bool) {
        self.pipelines.set_unrolled(unroll && self.is_cpu);
    }

    pub fn is_unrolled(&self) -> bool {
        self.pipelines.is_unrolled()
    }

    pub fn tiles(&self, d_pad: u32) -> FlashTiles {
        self.forced.get().unwrap_or_else(|| FlashTiles::choose(&self.limits, self.is_cpu, d_pad))
    }

    /// Forces tile sizes (for tuning with the benchmark); `None` goes back to the adapter's choice.
    /// Sizes beyond the shader's limits or this device's are clamped.
    pub fn force_tiles(&self, tiles: Option<FlashTiles>) {
        let max_rows = self.limits.max_compute_invocations_per_workgroup.min(self.limits.max_compute_workgroup_size_x);
        self.forced.set(tiles.map(|t| FlashTiles {
            rows_per_workgroup: t.rows_per_workgroup.clamp(1, max_rows),
            keys_per_tile: t.keys_per_tile.clamp(1, MAX_KEYS_PER_TILE),
            stage_kv: t.stage_kv,
        }));
    }

    /// Prepares one launch. `shape.d` must already be padded to a multiple of 4; K/V rows of KV head `h`
    /// start at `h * kv_stride` (`kv_stride >= n_kv`, so a cache can grow in place).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &FlashBuffers<'_>,
        shape: AttentionShape,
        kv_stride: u32,
        mask: Mask,
        scale: f32,
    ) -> Result<Dispatch, GpuError> {
        let d_pad = shape.d;
        if !d_pad.is_multiple_of(4) || d_pad > launch::MAX_HEAD_DIM || kv_stride < shape.n_kv {
            return Err(GpuError::LimitExceeded(format!(
                "flash attention needs d a multiple of 4 up to 256 (got {d_pad}) and kv_stride >= n_kv"
            )));
        }
        // The subgroup kernel only pays unrolled, so it follows the unrolling choice.
        if let (None, Some(subgroup), true) = (self.forced.get(), &self.subgroup, self.is_unrolled()) {
            return subgroup.prepare(ctx, buffers, shape, kv_stride, mask, scale);
        }
        let mut tiles = self.tiles(d_pad);
        // Few rows (decode: one query per head) get a narrow workgroup instead of idle invocations.
        let rows_total = shape.n_q * shape.group_size();
        let invocations_needed = rows_total.div_ceil(tiles.rows_per_invocation(d_pad));
        tiles.rows_per_workgroup = tiles.rows_per_workgroup.min(invocations_needed.next_power_of_two().max(8));
        let tiles_per_kv_head = rows_total.div_ceil(tiles.rows_per_tile(d_pad));
        let params = ctx.uniform_from(
            "flash_attention params",
            &FlashParams::new(shape, kv_stride, mask, scale, tiles_per_kv_head),
        );
        let constants = [
            ("D", d_pad),
            ("D4", d_pad / 4),
            ("BC", tiles.keys_per_tile),
            ("R", tiles.rows_per_invocation(d_pad)),
            ("STAGE_KV", u32::from(tiles.stage_kv)),
        ];
        let pipeline = self.pipelines.get_specialised(&ctx.device, &constants, &[("BR", tiles.rows_per_workgroup)]);
        let bind_group = launch::bind_buffers(
            &ctx.device,
            &self.layout,
            "flash_attention",
            &[&params, buffers.q, buffers.k, buffers.v, buffers.o, buffers.lse],
        );
        let workgroups = tiles_per_kv_head * shape.h_kv;
        Ok(Dispatch {
            pipeline,
            bind_group,
            grid: launch::grid(workgroups, self.limits.max_compute_workgroups_per_dimension),
        })
    }
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
    fn params_match_the_wgsl_layout() {
        // 12 u32-sized fields: a multiple of 16 bytes, as uniform buffers want.
        assert_eq!(std::mem::size_of::<FlashParams>(), 48);
    }
}
