//! Owner of `shaders/paged_attention.wgsl`: attention of a few queries (a decode step) over a paged
//! K/V pool ([`crate::gpu::KvPool`]), each key's row found through the request's page table. The
//! tiles are the forward kernel's ([`FlashTiles`]), since the loop is `flash_attention.wgsl`'s.

use crate::attention::AttentionShape;
use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::FlashBuffers;
use crate::gpu::flash_tiles::{FlashTiles, cpu_rows_per_invocation, queries_in_registers};
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::paged_attention_subgroup::{PAGED_BINDINGS, PagedSubgroup};
use crate::gpu::subgroup_form::SubgroupForm;
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};
use crate::model::paging::PAGE_TOKENS;

/// Unrolled natively, kept as loops in the browser: the forward kernel's choice, for its reasons.
const UNROLL_BY_DEFAULT: bool = !cfg!(target_arch = "wasm32");

pub struct PagedAttention {
    launcher: Launcher<Self>,
    limits: wgpu::Limits,
    is_cpu: bool,
    /// The subgroup form, used instead on CPU adapters that have subgroups, when unrolled (where the
    /// forward kernel's owner picks its own subgroup form).
    subgroup: Option<SubgroupForm<PagedSubgroup>>,
}

impl Kernel for PagedAttention {
    const NAME: &'static str = "paged_attention";
    const SOURCE: &'static str = include_str!("../../shaders/paged_attention.wgsl");
    const BINDINGS: &'static [Binding] = &PAGED_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = AttentionParams;

    /// One workgroup per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

/// One launch: `shape.d` padded to a multiple of 4; the table holds `table_pages` entries, each below
/// `pool_pages`, covering `shape.n_kv` keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PagedLaunch {
    pub shape: AttentionShape,
    pub table_pages: u32,
    pub pool_pages: u32,
    pub mask: Mask,
    pub scale: f32,
}

impl PagedLaunch {
    /// Why the kernel cannot run this launch, if it cannot (checked before anything is bound).
    pub fn check(&self) -> Result<(), String> {
        let d_pad = self.shape.d;
        if !d_pad.is_multiple_of(4) || !kernels_take_head_dim(d_pad) {
            return Err(format!("paged attention needs d a multiple of 4 up to {KERNEL_MAX_HEAD_DIM} (got {d_pad})"));
        }
        let needed = u64::from(self.shape.n_kv).div_ceil(PAGE_TOKENS);
        if u64::from(self.table_pages) < needed {
            return Err(format!(
                "{} keys need {needed} pages of {PAGE_TOKENS}, the page table has {}",
                self.shape.n_kv, self.table_pages
            ));
        }
        if self.pool_pages == 0 {
            return Err("the pool has no page".into());
        }
        self.shape.validate()
    }
}

impl PagedAttention {
    /// Whether pipelines built from now on unroll their loops (the forward kernel's rule: the bench
    /// page asks for them; CPU adapters then take the subgroup form).
    pub fn set_unrolled(&self, unroll: bool) {
        self.launcher.pipelines().set_unrolled(unroll && (self.is_cpu || UNROLL_BY_DEFAULT));
    }

    pub fn new(ctx: &GpuContext) -> Self {
        let launcher = Launcher::new(ctx);
        launcher.pipelines().set_unrolled(UNROLL_BY_DEFAULT);
        let subgroup = if ctx.adapter.is_cpu { SubgroupForm::new(ctx, cpu_rows_per_invocation) } else { None };
        Self { launcher, limits: ctx.limits.clone(), is_cpu: ctx.adapter.is_cpu, subgroup }
    }

    /// Prepares one launch over `buffers` (K and V the pool's, `[pages, h_kv, PAGE_TOKENS, d_pad]`) and
    /// the page table `table` (`u32` physical page per logical page).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        buffers: &FlashBuffers<'_>,
        table: &wgpu::Buffer,
        launch: PagedLaunch,
    ) -> Result<Dispatch, GpuError> {
        launch.check().map_err(GpuError::InvalidInput)?;
        let PagedLaunch { shape, mask, scale, .. } = launch;
        let d_pad = shape.d;
        let rows_total = shape.n_q * shape.group_size();
        let [q, k, v, o, lse] = buffers.bound();
        if let (Some(subgroup), true) = (&self.subgroup, self.launcher.pipelines().is_unrolled()) {
            let tiles_per_kv_head = rows_total.div_ceil(subgroup.tile(d_pad).0);
            let params = AttentionParams::new(shape, PAGE_TOKENS as u32, mask, scale, tiles_per_kv_head);
            let pipeline = subgroup.pipeline(&ctx.device, d_pad);
            return subgroup.launcher().dispatch(ctx, pipeline, &params, &[q, k, v, o, lse, table]);
        }
        let tiles = FlashTiles::choose(&self.limits, self.is_cpu, d_pad).for_rows(d_pad, rows_total);
        let tiles_per_kv_head = rows_total.div_ceil(tiles.rows_per_tile(d_pad));
        // kv_stride is unused by the paged rows; PAGE_TOKENS documents the layout.
        let params = AttentionParams::new(shape, PAGE_TOKENS as u32, mask, scale, tiles_per_kv_head);
        let rows = tiles.rows_per_invocation(d_pad);
        let constants = [
            ("D", d_pad),
            ("D4", d_pad / 4),
            ("BC", tiles.keys_per_tile),
            ("R", rows),
            ("STAGE_KV", u32::from(tiles.stage_kv)),
            ("Q_REGS", u32::from(queries_in_registers(d_pad, rows))),
        ];
        let pipeline =
            self.launcher.pipelines().get_specialised(&ctx.device, &constants, &[("BR", tiles.rows_per_workgroup)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[q, k, v, o, lse, table])
    }
}
