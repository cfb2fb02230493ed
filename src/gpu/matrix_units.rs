//! Whether the forward kernel may run its two products on the GPU's matrix units (tensor cores, from
//! WGSL: `flash_attention_coop.wgsl`), and with which tiles. Pure arithmetic over what an adapter
//! reports, with no wgpu type in it, so it is tested with hand-written lists; `context.rs` turns wgpu's
//! report into a [`CoopOffer`] and asks for the features only when [`choose`] picks a configuration.
//!
//! What WGSL (naga, in wgpu 30) can name sets the rules: `coop_mat8x8<T, R>` and `coop_mat16x16<T, R>`
//! are square, so a configuration is usable only with M = N = K = 8 or 16; the kernel multiplies f16
//! A and B into an f32 C (`enable f16;` needs `SHADER_F16`); and a matrix belongs to one subgroup, so
//! the kernel runs one subgroup per workgroup and needs a subgroup size the adapter fixes.

/// An element type of a cooperative matrix, as the adapter reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoopScalar {
    F16,
    F32,
    I32,
    U32,
}

impl CoopScalar {
    fn name(self) -> &'static str {
        match self {
            CoopScalar::F16 => "f16",
            CoopScalar::F32 => "f32",
            CoopScalar::I32 => "i32",
            CoopScalar::U32 => "u32",
        }
    }
}

/// One configuration the adapter supports: C (M x N) = A (M x K) · B (K x N) + C, A and B of `ab`,
/// C and the result of `cr` (wgpu's `CooperativeMatrixProperties`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopConfig {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub ab: CoopScalar,
    pub cr: CoopScalar,
}

impl std::fmt::Display for CoopConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{} {}->{}", self.m, self.n, self.k, self.ab.name(), self.cr.name())
    }
}

/// What an adapter offers that the choice depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoopOffer {
    /// `Features::EXPERIMENTAL_COOPERATIVE_MATRIX`.
    pub cooperative_matrix: bool,
    /// `Features::SHADER_F16`.
    pub shader_f16: bool,
    /// The adapter's smallest and largest subgroup sizes.
    pub subgroup_sizes: (u32, u32),
    /// `adapter.cooperative_matrix_properties()`.
    pub configs: Vec<CoopConfig>,
}

/// The configuration chosen: square matrices `side` wide with f16 inputs and f32 accumulation, in
/// workgroups of one subgroup of `subgroup_size` invocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixUnits {
    pub side: u32,
    pub subgroup_size: u32,
}

/// The sides WGSL can name, the larger first (more work per instruction).
const SIDES: [u32; 2] = [16, 8];

/// The configuration the forward kernel uses on this adapter, or why there is none (in words for the
/// benchmark's row: "not supported on this adapter (<reason>)").
pub fn choose(offer: &CoopOffer) -> Result<MatrixUnits, String> {
    if !offer.cooperative_matrix {
        return Err("no cooperative matrices: wgpu's EXPERIMENTAL_COOPERATIVE_MATRIX, from Vulkan's \
             VK_KHR_cooperative_matrix or Metal's simdgroup matrices"
            .into());
    }
    if !offer.shader_f16 {
        return Err("cooperative matrices but no f16 in shaders (SHADER_F16), which their f16 inputs need".into());
    }
    let (min, max) = offer.subgroup_sizes;
    if min != max || min == 0 {
        return Err(format!(
            "its subgroup size is not fixed ({min} to {max} invocations), and the kernel runs one subgroup per workgroup"
        ));
    }
    let usable = |side: u32| {
        offer
            .configs
            .iter()
            .any(|c| (c.m, c.n, c.k) == (side, side, side) && c.ab == CoopScalar::F16 && c.cr == CoopScalar::F32)
    };
    match SIDES.into_iter().find(|&side| usable(side)) {
        Some(side) => Ok(MatrixUnits { side, subgroup_size: min }),
        None if offer.configs.is_empty() => Err("it reports no cooperative-matrix configuration".into()),
        None => {
            let offered: Vec<String> = offer.configs.iter().map(CoopConfig::to_string).collect();
            Err(format!(
                "none of its cooperative-matrix configurations is 8x8x8 or 16x16x16 f16->f32, the square ones \
                 WGSL names (it offers {})",
                offered.join(", ")
            ))
        }
    }
}

/// Rows of a workgroup's tile when they fit, else one matrix of rows.
const ROWS_PER_WORKGROUP: u32 = 32;
/// Keys of one step.
const KEYS_PER_STEP: u32 = 16;

/// The tiles of one head width: the shader's compile-time constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopTiles {
    /// `T`: the matrices' side.
    pub side: u32,
    /// `BR`: (query, head) rows a workgroup owns, a multiple of `side`.
    pub rows: u32,
    /// `BC`: keys per step, a multiple of `side`.
    pub keys: u32,
    /// `DT`: the head width rounded up to a multiple of `side` (the tiles' columns past it are zero).
    pub width: u32,
}

impl CoopTiles {
    /// Bytes of workgroup memory the shader declares with these tiles: Q, K and V tiles in f16, the
    /// step's scores (f32) and weights (f16), each row's max, sum and rescale (f32) and one flag.
    pub fn workgroup_bytes(&self) -> u32 {
        let CoopTiles { rows, keys, width, .. } = *self;
        2 * rows * width + 2 * (2 * keys * width) + 4 * rows * keys + 2 * rows * keys + 3 * 4 * rows + 4
    }
}

impl MatrixUnits {
    /// The tiles for heads `d_pad` wide within `max_workgroup_bytes` of workgroup memory: 32 rows a
    /// workgroup, or one matrix of rows for wide heads, or none (the forward keeps its FMA form).
    pub fn tiles(&self, d_pad: u32, max_workgroup_bytes: u32) -> Result<CoopTiles, String> {
        let side = self.side;
        let width = d_pad.div_ceil(side) * side;
        let keys = KEYS_PER_STEP.max(side);
        let fitting = [ROWS_PER_WORKGROUP.max(side), side]
            .into_iter()
            .map(|rows| CoopTiles { side, rows, keys, width })
            .find(|t| t.workgroup_bytes() <= max_workgroup_bytes);
        fitting.ok_or_else(|| {
            let least = CoopTiles { side, rows: side, keys, width }.workgroup_bytes();
            format!(
                "heads {d_pad} wide need {least} bytes of workgroup memory for {side} rows, over this device's \
                 {max_workgroup_bytes}"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CoopScalar::{F16, F32, I32};

    fn config(m: u32, n: u32, k: u32, ab: CoopScalar, cr: CoopScalar) -> CoopConfig {
        CoopConfig { m, n, k, ab, cr }
    }

    /// What an NVIDIA GPU's Vulkan driver reports (subgroup-scoped ones, as wgpu keeps them).
    fn nvidia() -> CoopOffer {
        CoopOffer {
            cooperative_matrix: true,
            shader_f16: true,
            subgroup_sizes: (32, 32),
            configs: vec![
                config(16, 8, 16, F16, F16),
                config(16, 8, 16, F16, F32),
                config(16, 16, 16, F16, F16),
                config(16, 16, 16, F16, F32),
                config(16, 8, 8, F16, F32),
            ],
        }
    }

    #[test]
    fn a_square_f16_to_f32_configuration_is_chosen_the_larger_first() {
        assert_eq!(choose(&nvidia()), Ok(MatrixUnits { side: 16, subgroup_size: 32 }));
        // Metal's three 8x8x8 ones (f32, f16, mixed): the mixed one.
        let apple_like = CoopOffer {
            subgroup_sizes: (32, 32),
            configs: vec![config(8, 8, 8, F32, F32), config(8, 8, 8, F16, F16), config(8, 8, 8, F16, F32)],
            ..nvidia()
        };
        assert_eq!(choose(&apple_like), Ok(MatrixUnits { side: 8, subgroup_size: 32 }));
    }

    #[test]
    fn without_the_feature_f16_or_a_fixed_subgroup_there_is_none_and_it_says_why() {
        let none = CoopOffer { cooperative_matrix: false, configs: vec![], ..nvidia() };
        assert!(choose(&none).unwrap_err().starts_with("no cooperative matrices"));
        let no_f16 = CoopOffer { shader_f16: false, ..nvidia() };
        assert!(choose(&no_f16).unwrap_err().contains("no f16 in shaders (SHADER_F16)"));
        // wgpu's Metal backend reports subgroups of 4 to 64.
        let varying = CoopOffer { subgroup_sizes: (4, 64), ..nvidia() };
        assert_eq!(
            choose(&varying),
            Err("its subgroup size is not fixed (4 to 64 invocations), and the kernel runs one subgroup per \
                 workgroup"
                .into())
        );
    }

    #[test]
    fn sizes_and_types_wgsl_cannot_use_are_refused_by_name() {
        // Rectangular only, f16 accumulation only, 32-bit integers, and f32 inputs: none usable.
        let offer = CoopOffer {
            configs: vec![
                config(16, 8, 16, F16, F32),
                config(16, 16, 16, F16, F16),
                config(16, 16, 16, I32, I32),
                config(8, 8, 8, F32, F32),
            ],
            ..nvidia()
        };
        assert_eq!(
            choose(&offer),
            Err("none of its cooperative-matrix configurations is 8x8x8 or 16x16x16 f16->f32, the square ones WGSL \
                 names (it offers 16x8x16 f16->f32, 16x16x16 f16->f16, 16x16x16 i32->i32, 8x8x8 f32->f32)"
                .into())
        );
        let empty = CoopOffer { configs: vec![], ..nvidia() };
        assert_eq!(choose(&empty), Err("it reports no cooperative-matrix configuration".into()));
    }

    #[test]
    fn tiles_and_their_workgroup_bytes_by_hand() {
        let units = MatrixUnits { side: 16, subgroup_size: 32 };
        // d = 64: Q 32 x 64 x 2 = 4,096; K and V 2 x 16 x 64 x 2 = 4,096; scores 32 x 16 x 4 = 2,048;
        // weights 32 x 16 x 2 = 1,024; max, sum, rescale 3 x 32 x 4 = 384; the flag 4: 11,652.
        let t64 = units.tiles(64, 16384).unwrap();
        assert_eq!(t64, CoopTiles { side: 16, rows: 32, keys: 16, width: 64 });
        assert_eq!(t64.workgroup_bytes(), 11_652);
        // d = 72 pads to 80 columns; d = 256 within 32 KiB keeps one matrix of rows:
        // 16 x 256 x 2 + 4 x 16 x 256 + 16 x 16 x 6 + 12 x 16 + 4 = 26,308.
        assert_eq!(units.tiles(72, 32768).unwrap().width, 80);
        let t256 = units.tiles(256, 32768).unwrap();
        assert_eq!((t256.rows, t256.workgroup_bytes()), (16, 26_308));
        // d = 512 does not fit: 16 x 512 x 2 + 4 x 16 x 512 + 1,536 + 196 = 50,884.
        assert_eq!(
            units.tiles(512, 32768),
            Err("heads 512 wide need 50884 bytes of workgroup memory for 16 rows, over this device's 32768".into())
        );
        // Side 8: still 32 rows and 16 keys a step.
        let t8 = MatrixUnits { side: 8, subgroup_size: 32 }.tiles(64, 16384).unwrap();
        assert_eq!((t8.rows, t8.keys, t8.width), (32, 16, 64));
    }
}
