//! Twin of `shaders/widen.wgsl`: f16 or bf16 values, as a checkpoint's file stores them, as f32.

/// Element types the app unpacks to f32 (a checkpoint's tensors; the kernel widens the 16-bit two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorDType {
    F16,
    Bf16,
    F32,
}

impl TensorDType {
    pub const fn bytes(self) -> usize {
        match self {
            TensorDType::F16 | TensorDType::Bf16 => 2,
            TensorDType::F32 => 4,
        }
    }
}

/// Little-endian elements of `dtype` widened to f32 (exact for all three).
pub fn to_f32(dtype: TensorDType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        TensorDType::F16 => bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        TensorDType::Bf16 => bytes.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        TensorDType::F32 => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
    }
}

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
