//! Element types a KV cache (or the weights) can be stored in, with exact bit widths.
//!
//! Byte figures are computed from *bits* with integer arithmetic so that the sub-byte formats
//! (INT4, 2-bit) are exact: a total is summed in bits and divided by 8 once, rounding up
//! (a packed buffer of 3 INT4 values needs 2 bytes). Quantisation scales and zero points are
//! not counted: they depend on the group size a runtime chooses, not on the architecture.

use std::fmt;
use std::str::FromStr;

/// Storage type of one element. The URL names are exactly `fp32 fp16 bf16 fp8 int4 int2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Fp32,
    Fp16,
    Bf16,
    Fp8,
    Int4,
    Int2,
}

impl DType {
    /// Every dtype, widest first (the order a picker shows them in).
    pub const ALL: [DType; 6] = [DType::Fp32, DType::Fp16, DType::Bf16, DType::Fp8, DType::Int4, DType::Int2];

    /// Exact storage width of one element, in bits.
    pub const fn bits(self) -> u32 {
        match self {
            DType::Fp32 => 32,
            DType::Fp16 | DType::Bf16 => 16,
            DType::Fp8 => 8,
            DType::Int4 => 4,
            DType::Int2 => 2,
        }
    }

    /// The name used in URLs (`dtype=`) and in the UI.
    pub const fn url_name(self) -> &'static str {
        match self {
            DType::Fp32 => "fp32",
            DType::Fp16 => "fp16",
            DType::Bf16 => "bf16",
            DType::Fp8 => "fp8",
            DType::Int4 => "int4",
            DType::Int2 => "int2",
        }
    }

    /// A human label ("FP16", "2-bit").
    pub const fn label(self) -> &'static str {
        match self {
            DType::Fp32 => "FP32",
            DType::Fp16 => "FP16",
            DType::Bf16 => "BF16",
            DType::Fp8 => "FP8",
            DType::Int4 => "INT4",
            DType::Int2 => "2-bit",
        }
    }
}

/// Whole bytes needed to hold `bits` bits, rounding up (a partly used byte is still allocated).
pub const fn bits_to_bytes_ceil(bits: u128) -> u128 {
    bits.div_ceil(8)
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url_name())
    }
}

/// The text was not one of `fp32 fp16 bf16 fp8 int4 int2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDType(pub String);

impl fmt::Display for UnknownDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown dtype {:?} (expected fp32, fp16, bf16, fp8, int4 or int2)", self.0)
    }
}

impl std::error::Error for UnknownDType {}

impl FromStr for DType {
    type Err = UnknownDType;

    /// Accepts the URL names exactly (case-sensitive, as the URL contract fixes them).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL.into_iter().find(|d| d.url_name() == s).ok_or_else(|| UnknownDType(s.chars().take(32).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.to_string().parse::<DType>(), Ok(d));
        }
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.url_name()).collect();
        assert_eq!(names, ["fp32", "fp16", "bf16", "fp8", "int4", "int2"]);
    }

    #[test]
    fn rejects_other_spellings() {
        for bad in ["", "FP16", "float16", "int8", "fp16 ", "q4"] {
            assert!(bad.parse::<DType>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bits_are_exact() {
        let bits: Vec<u32> = DType::ALL.iter().map(|d| d.bits()).collect();
        assert_eq!(bits, [32, 16, 16, 8, 4, 2]);
    }

    #[test]
    fn sub_byte_rounding_is_up_once() {
        // 3 INT4 values = 12 bits -> 2 bytes; 4 values = 16 bits -> exactly 2 bytes.
        assert_eq!(bits_to_bytes_ceil(3 * 4), 2);
        assert_eq!(bits_to_bytes_ceil(4 * 4), 2);
        // 5 two-bit values = 10 bits -> 2 bytes.
        assert_eq!(bits_to_bytes_ceil(5 * 2), 2);
        assert_eq!(bits_to_bytes_ceil(0), 0);
    }
}
