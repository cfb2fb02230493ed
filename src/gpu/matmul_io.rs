//! The Rust side of `shaders/include/matmul_io.wgsl`: the params and bindings of both matmul kernels,
//! `matmul` and `matmul_subgroup`.

use bytemuck::{Pod, Zeroable};

use crate::gpu::launch::Binding;

/// Keep in sync with `Params` in `shaders/include/matmul_io.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct MatmulParams {
    pub rows: u32,
    pub inputs4: u32,
    pub outputs: u32,
    pub x_row0: u32,
    pub has_bias: u32,
    pub accumulate: u32,
    pub col_tiles: u32,
    pub _pad: u32,
}

/// params, X (`matmul_io.wgsl`), W (`weights_*.wgsl`), bias (`matmul_io.wgsl`), Y.
pub const MATMUL_BINDINGS: [Binding; 5] =
    [Binding::Uniform, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadOnly, Binding::ReadWrite];

#[cfg(test)]
mod tests {
    #[test]
    fn params_are_a_multiple_of_16_bytes() {
        assert_eq!(size_of::<super::MatmulParams>(), 32);
    }
}
