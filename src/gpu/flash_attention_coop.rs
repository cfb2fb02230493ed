//! Owner of `shaders/flash_attention_coop.wgsl`: the tiled forward with Q·Kᵀ and P·V on the GPU's matrix
//! units (f16 inputs, f32 accumulation). Same buffers, parameters and results as
//! `shaders/flash_attention.wgsl`, whose owner chooses this kernel where the device was opened with
//! matrix units and f16 inputs are asked for (so this module imports only what both share).

use crate::gpu::GpuContext;
use crate::gpu::attention_io::AttentionParams;
use crate::gpu::flash_io::FLASH_BINDINGS;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::Binding;
use crate::gpu::matrix_units::{CoopTiles, MatrixUnits};

/// The pipelines, one per head width, for this device's matrix units.
pub struct FlashAttentionCoop {
    launcher: Launcher<Self>,
    units: MatrixUnits,
    max_workgroup_bytes: u32,
}

impl Kernel for FlashAttentionCoop {
    const NAME: &'static str = "flash_attention_coop";
    const SOURCE: &'static str = include_str!("../../shaders/flash_attention_coop.wgsl");
    const BINDINGS: &'static [Binding] = &FLASH_BINDINGS;
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = AttentionParams;

    /// One workgroup (one subgroup) per tile of a KV head's (query, head) rows.
    fn workgroups(p: &AttentionParams) -> Option<u64> {
        Some(u64::from(p.tiles_per_kv_head) * u64::from(p.h_kv))
    }
}

impl FlashAttentionCoop {
    /// The kernel on a device opened with matrix units, or why there are none (`GpuContext::matrix_units`):
    /// nothing of this shader is compiled on any other device.
    pub fn new(ctx: &GpuContext) -> Result<Self, String> {
        let units = ctx.matrix_units.clone()?;
        let launcher = Launcher::from_source(ctx, &with_side(Self::SOURCE, units.side));
        // Written out, every block index is a constant (an H100 ran the FMA form's loops 6-11x slower).
        launcher.pipelines().set_unrolled(true);
        Ok(Self { launcher, units, max_workgroup_bytes: ctx.limits.max_compute_workgroup_storage_size })
    }

    /// The tiles for heads `d_pad` wide, or why they do not fit this device.
    pub fn tiles(&self, d_pad: u32) -> Result<CoopTiles, String> {
        self.units.tiles(d_pad, self.max_workgroup_bytes)
    }

    /// Invocations per workgroup: one subgroup.
    pub fn subgroup_size(&self) -> u32 {
        self.units.subgroup_size
    }

    /// Its owner (`flash_attention`, which checks the launch) dispatches through this.
    pub fn launcher(&self) -> &Launcher<Self> {
        &self.launcher
    }
}

/// The shader's compile-time constants for `tiles` over heads `d_pad` wide.
pub fn constants(tiles: &CoopTiles, d_pad: u32) -> Vec<(&'static str, u32)> {
    let CoopTiles { side, rows, keys, width } = *tiles;
    let blocks = width / side;
    vec![
        ("D", d_pad),
        ("T", side),
        ("DT", width),
        ("BR", rows),
        ("BC", keys),
        ("D4", d_pad / 4),
        ("DT4", width / 4),
        ("T4", side / 4),
        ("RB", rows / side),
        ("KB", keys / side),
        ("DB", blocks),
        ("RDB", rows / side * blocks),
    ]
}

/// `source` with its matrix types `side` wide: the shader's `alias Coop* = coop_mat16x16<...>` lines
/// name the type (WGSL spells the side in the type's name, so no constant can set it).
pub fn with_side(source: &str, side: u32) -> String {
    let wanted = format!("coop_mat{side}x{side}");
    let lines: Vec<String> = source
        .lines()
        .map(
            |line| {
                if line.starts_with("alias Coop") { line.replace("coop_mat16x16", &wanted) } else { line.to_owned() }
            },
        )
        .collect();
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::shader_text::{unroll_loops, with_constants, with_includes};

    /// Parses and validates `text` with the capabilities a device with matrix units grants, then
    /// writes it as SPIR-V for Vulkan (as wgpu does, its override set) and counts the products.
    fn validate_and_write_spirv(text: &str) -> usize {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(text).unwrap_or_else(|e| panic!("{}", e.emit_to_string(text)));
        let info =
            Validator::new(ValidationFlags::all(), Capabilities::COOPERATIVE_MATRIX | Capabilities::SHADER_FLOAT16)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{e:?}"));
        let constants = naga::back::PipelineConstants::from_iter([("SG".to_string(), 32.0)]);
        let (module, info) = naga::back::pipeline_constants::process_overrides(&module, &info, None, &constants)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let words = naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None)
            .unwrap_or_else(|e| panic!("SPIR-V: {e:?}"));
        // OpCooperativeMatrixMulAddKHR (4459), one instruction of 6 words.
        words.iter().filter(|&&w| w == (6 << 16) | 4459).count()
    }

    #[test]
    fn every_side_and_width_the_tiles_allow_builds_valid_wgsl_as_pipelines_are_built() {
        for side in [16, 8] {
            let units = MatrixUnits { side, subgroup_size: 32 };
            let source = with_includes(&with_side(FlashAttentionCoop::SOURCE, side));
            assert_eq!(source.matches(&format!("coop_mat{side}x{side}<")).count(), 3);
            for d_pad in [32, 64, 72, 128, 256] {
                let tiles = units.tiles(d_pad, 32768).expect("fits 32 KiB");
                let constants = constants(&tiles, d_pad);
                let text = unroll_loops(&with_constants(&source, &constants), &constants);
                assert!(!text.contains("< RB; rb++") && !text.contains("< DB; db++"), "loops left at {d_pad}");
                // Written out: per step, RB x KB score blocks of DB products and RB x DB output blocks of
                // KB products.
                let products = 2 * tiles.rows / side * tiles.keys / side * tiles.width / side;
                assert_eq!(validate_and_write_spirv(&text), products as usize, "side {side}, d {d_pad}");
            }
        }
    }

    #[test]
    fn constants_by_hand() {
        // d = 72 on 16-wide matrices: 80 columns, 5 column blocks, 2 row blocks of 32 rows: 10 O blocks.
        let tiles = CoopTiles { side: 16, rows: 32, keys: 16, width: 80 };
        let got = constants(&tiles, 72);
        let want = [
            ("D", 72),
            ("T", 16),
            ("DT", 80),
            ("BR", 32),
            ("BC", 16),
            ("D4", 18),
            ("DT4", 20),
            ("T4", 4),
            ("RB", 2),
            ("KB", 1),
            ("DB", 5),
            ("RDB", 10),
        ];
        assert_eq!(got, want);
    }
}
