//! Twin of `shaders/widen.wgsl`: f16 or bf16 values, as a checkpoint's file stores them, as f32.

use crate::lm::safetensors::{TensorDType, to_f32};

/// The f32 of each 16-bit value of `bytes` (little-endian, `dtype` F16 or BF16): exact for every
/// value, as the kernel is.
pub fn widen(bytes: &[u8], dtype: TensorDType) -> Vec<f32> {
    to_f32(dtype, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_and_minus_two_by_hand() {
        // f16 1.0 = 0x3c00, -2.0 = 0xc000; bf16 1.0 = 0x3f80, -2.0 = 0xc000.
        assert_eq!(widen(&[0x00, 0x3c, 0x00, 0xc0], TensorDType::F16), [1.0, -2.0]);
        assert_eq!(widen(&[0x80, 0x3f, 0x00, 0xc0], TensorDType::Bf16), [1.0, -2.0]);
    }
}
