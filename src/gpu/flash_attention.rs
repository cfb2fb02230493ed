//! Owner of `shaders/flash_attention.wgsl`: the tiled online-softmax forward (O and log-sum-exp).

use bytemuck::{Pod, Zeroable};

use crate::attention::{AttentionShape, Mask};
use crate::gpu::launch::{self, Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};

/// Uniform parameters of one launch.
/// Keep in sync with `Params` in `shaders/flash_attention.wgsl`.
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
    pub _pad: [u32; 2],
}

/// The shader's private arrays hold at most this many keys per tile (`BC_MAX`).
pub const MAX_KEYS_PER_TILE: u32 = 32;
/// Query rows each invocation owns. Keep in sync with the shader (one `q_row` and `acc` each).
pub const ROWS_PER_INVOCATION: u32 = 1;

/// Tile sizes (the shader's `BR` and `BC` overrides) for one head width on one adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashTiles {
    /// Invocations per workgroup; each owns [`ROWS_PER_INVOCATION`] rows (query, head).
    pub rows_per_workgroup: u32,
    /// Keys per K/V tile.
    pub keys_per_tile: u32,
    /// Whether K/V tiles are staged in workgroup memory (`STAGE_KV`); CPU adapters read them directly.
    pub stage_kv: bool,
}

impl FlashTiles {
    /// Chooses tiles for `d_pad`-wide heads. Workgroup memory holds one K and one V tile; stay within the
    /// adapter's limit and the web's portable 16 KiB, and within its invocation limit.
    /// CPU-class adapters (lavapipe, SwiftShader) read K/V straight from the buffer (a read from a
    /// staged copy costs them as much as one from the buffer, so the copy and its two barriers are pure
    /// cost) with the widest key tile, and take 128 rows per workgroup, which measured
    /// best on lavapipe (`bench --tiles`); GPUs stage tiles in workgroup memory, 64 rows per workgroup.
    pub fn choose(limits: &wgpu::Limits, is_cpu: bool, d_pad: u32) -> Self {
        let bytes = limits.max_compute_workgroup_storage_size.min(16384);
        let keys_fit = bytes / (2 * d_pad.max(4) * 4);
        let mut keys = MAX_KEYS_PER_TILE;
        while keys > keys_fit && keys > 1 {
            keys /= 2;
        }
        // Too little workgroup memory for even one key: read K/V directly instead.
        let stage_kv = !is_cpu && keys <= keys_fit;
        if !stage_kv {
            keys = MAX_KEYS_PER_TILE; // no workgroup memory involved
        }
        let wanted_rows = if is_cpu { 128 } else { 64 };
        let rows = wanted_rows.min(limits.max_compute_invocations_per_workgroup).min(limits.max_compute_workgroup_size_x).max(1);
        Self { rows_per_workgroup: rows, keys_per_tile: keys, stage_kv }
    }

    /// Query rows one workgroup covers.
    pub fn rows_per_tile(&self) -> u32 {
        self.rows_per_workgroup * ROWS_PER_INVOCATION
    }

    /// Workgroup memory the shader declares with these tiles.
    pub fn workgroup_bytes(&self, d_pad: u32) -> u32 {
        if self.stage_kv { 2 * self.keys_per_tile * d_pad * 4 } else { 0 }
    }
}

/// The bind-group layout and the per-head-width pipelines.
pub struct FlashAttention {
    layout: wgpu::BindGroupLayout,
    pipelines: PipelineCache,
    limits: wgpu::Limits,
    is_cpu: bool,
    /// Tiles forced by the benchmark's `--tiles` (tuning), instead of [`FlashTiles::choose`].
    forced: std::cell::Cell<Option<FlashTiles>>,
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
        let layout = launch::bind_group_layout(&ctx.device, "flash_attention", &[Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite, Binding::ReadWrite]);
        let source = include_str!("../../shaders/flash_attention.wgsl");
        let pipelines = PipelineCache::new(&ctx.device, "flash_attention", source, "main", &layout);
        Self { layout, pipelines, limits: ctx.limits.clone(), is_cpu: ctx.adapter.is_cpu, forced: Default::default() }
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
    pub fn prepare(&self, ctx: &GpuContext, buffers: &FlashBuffers<'_>, shape: AttentionShape, kv_stride: u32, mask: Mask, scale: f32) -> Result<Dispatch, GpuError> {
        let d_pad = shape.d;
        if !d_pad.is_multiple_of(4) || d_pad > launch::MAX_HEAD_DIM || kv_stride < shape.n_kv {
            return Err(GpuError::LimitExceeded(format!("flash attention needs d a multiple of 4 up to 256 (got {d_pad}) and kv_stride >= n_kv")));
        }
        let mut tiles = self.tiles(d_pad);
        // Few rows (decode: one query per head) get a narrow workgroup instead of idle invocations.
        let rows_total = shape.n_q * shape.group_size();
        let invocations_needed = rows_total.div_ceil(ROWS_PER_INVOCATION);
        tiles.rows_per_workgroup = tiles.rows_per_workgroup.min(invocations_needed.next_power_of_two().max(8));
        let (mask_kind, mask_size) = mask.to_gpu();
        let tiles_per_kv_head = rows_total.div_ceil(tiles.rows_per_tile());
        let params = FlashParams {
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
            _pad: [0; 2],
        };
        let params = ctx.uniform_from("flash_attention params", &params);
        let pipeline = self.pipelines.get(
            &ctx.device,
            &[("D", d_pad), ("BR", tiles.rows_per_workgroup), ("BC", tiles.keys_per_tile), ("STAGE_KV", u32::from(tiles.stage_kv))],
        );
        let bind_group = launch::bind_buffers(
            &ctx.device,
            &self.layout,
            "flash_attention",
            &[&params, buffers.q, buffers.k, buffers.v, buffers.o, buffers.lse],
        );
        let workgroups = tiles_per_kv_head * shape.h_kv;
        Ok(Dispatch { pipeline, bind_group, grid: launch::grid(workgroups, self.limits.max_compute_workgroups_per_dimension) })
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
        assert_eq!(FlashTiles::choose(&web, false, 64).rows_per_tile(), 64);
        // A device with little workgroup memory gets a small tile...
        let small = wgpu::Limits { max_compute_workgroup_storage_size: 4096, ..web };
        assert_eq!(FlashTiles::choose(&small, false, 256).keys_per_tile, 2);
        // ...and one with none to spare reads K/V directly rather than failing.
        let none = wgpu::Limits { max_compute_workgroup_storage_size: 1024, ..web };
        let t = FlashTiles::choose(&none, false, 256);
        assert!(!t.stage_kv && t.workgroup_bytes(256) == 0);
        // CPU adapters read K/V directly, with the widest tile at every width.
        assert_eq!(FlashTiles::choose(&web, true, 256), FlashTiles { rows_per_workgroup: 128, keys_per_tile: 32, stage_kv: false });
    }

    #[test]
    fn params_match_the_wgsl_layout() {
        // 12 u32-sized fields: a multiple of 16 bytes, as uniform buffers want.
        assert_eq!(std::mem::size_of::<FlashParams>(), 48);
    }
}
