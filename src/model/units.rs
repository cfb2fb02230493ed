//! Human formatting with explicit units. GB means 10^9 bytes and GiB 2^30 bytes: the app always
//! shows both, because mixing them silently is the most common error in memory tables
//! (1 GiB is 7.4% more than 1 GB).

/// Bytes in a decimal gigabyte (10^9).
pub const BYTES_PER_GB: u128 = 1_000_000_000;
/// Bytes in a binary gibibyte (2^30).
pub const BYTES_PER_GIB: u128 = 1 << 30;

/// Conversion for display only (the integer stays the source of truth).
fn as_f64(v: u128) -> f64 {
    v as f64
}

/// Decimal units: B, KB, MB, GB, TB, PB (powers of 1000), two decimals above bytes.
pub fn format_bytes_decimal(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    scaled(bytes, 1000, &UNITS)
}

/// Binary units: B, KiB, MiB, GiB, TiB, PiB (powers of 1024), two decimals above bytes.
pub fn format_bytes_binary(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    scaled(bytes, 1024, &UNITS)
}

fn scaled(bytes: u128, base: u128, units: &[&str; 6]) -> String {
    if bytes < base {
        return format!("{bytes} {}", units[0]);
    }
    let mut unit = 0;
    let mut divisor: u128 = 1;
    while unit + 1 < units.len() && bytes / divisor >= base {
        divisor *= base;
        unit += 1;
    }
    format!("{:.2} {}", as_f64(bytes) / as_f64(divisor), units[unit])
}

/// Both systems side by side, e.g. `"13.42 GB (12.50 GiB)"`.
pub fn format_bytes(bytes: u128) -> String {
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    format!("{} ({})", format_bytes_decimal(bytes), format_bytes_binary(bytes))
}

/// Every byte, then both units: `1,073,741,824 bytes = 1.07 GB (1.00 GiB)`.
pub fn bytes_text(bytes: u128) -> String {
    if bytes < 1000 {
        format!("{} bytes", format_thousands(bytes))
    } else {
        format!("{} bytes = {}", format_thousands(bytes), format_bytes(bytes))
    }
}

/// Bytes in GB (10^9) as a float, for charts.
pub fn bytes_to_gb(bytes: u128) -> f64 {
    as_f64(bytes) / as_f64(BYTES_PER_GB)
}

/// Bytes in GiB (2^30) as a float, for charts.
pub fn bytes_to_gib(bytes: u128) -> f64 {
    as_f64(bytes) / as_f64(BYTES_PER_GIB)
}

/// Parameter counts with decimal suffixes: "124.4 M", "7.0 B", "671.0 B", "1.2 T".
pub fn format_params(params: u128) -> String {
    const STEPS: [(u128, &str); 4] = [(1_000_000_000_000, "T"), (1_000_000_000, "B"), (1_000_000, "M"), (1_000, "K")];
    for (scale, suffix) in STEPS {
        if params >= scale {
            return format!("{:.1} {suffix}", as_f64(params) / as_f64(scale));
        }
    }
    params.to_string()
}

/// Token counts the way people say them: 8192 -> "8K", 131072 -> "128K", 1048576 -> "1M" (binary
/// steps, since context lengths are powers of two); anything else is written out in full.
pub fn format_tokens(tokens: u64) -> String {
    if tokens >= 1 << 20 && tokens.is_multiple_of(1 << 20) {
        format!("{}M", tokens >> 20)
    } else if tokens >= 1 << 10 && tokens.is_multiple_of(1 << 10) {
        format!("{}K", tokens >> 10)
    } else {
        tokens.to_string()
    }
}

/// `n` things in words, with thousands separators and a plural `s`: "1 attention layer",
/// "2,048 attention layers".
pub fn count_of(n: u128, noun: &str) -> String {
    format!("{} {noun}{}", format_thousands(n), if n == 1 { "" } else { "s" })
}

/// Integers with thousands separators ("1,073,741,824"), for showing the exact figure.
pub fn format_thousands(v: u128) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_in_words() {
        assert_eq!(count_of(1, "attention layer"), "1 attention layer");
        assert_eq!(count_of(2048, "attention layer"), "2,048 attention layers");
        assert_eq!(count_of(0, "layer"), "0 layers");
    }

    #[test]
    fn bytes_text_counts_every_byte_then_both_units() {
        assert_eq!(bytes_text(999), "999 bytes");
        assert_eq!(bytes_text(1 << 30), "1,073,741,824 bytes = 1.07 GB (1.00 GiB)");
    }

    #[test]
    fn both_units_shown() {
        // 12.5 GiB = 12.5 * 2^30 = 13,421,772,800 bytes = 13.42 GB.
        assert_eq!(format_bytes(13_421_772_800), "13.42 GB (12.50 GiB)");
        // 2^30 bytes = 1.07 GB = 1.00 GiB.
        assert_eq!(format_bytes(1 << 30), "1.07 GB (1.00 GiB)");
        assert_eq!(format_bytes(999), "999 B");
        // 131072 bytes = 131.07 KB = 128.00 KiB.
        assert_eq!(format_bytes(131_072), "131.07 KB (128.00 KiB)");
    }

    #[test]
    fn decimal_and_binary_edges() {
        assert_eq!(format_bytes_decimal(1_000), "1.00 KB");
        assert_eq!(format_bytes_binary(1_023), "1023 B");
        assert_eq!(format_bytes_binary(1_024), "1.00 KiB");
        assert!(format_bytes_decimal(u128::MAX).ends_with("PB"));
        assert!((bytes_to_gib(1 << 31) - 2.0).abs() < 1e-12);
        assert!((bytes_to_gb(3_000_000_000) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn params_and_tokens() {
        assert_eq!(format_params(6_738_415_616), "6.7 B");
        assert_eq!(format_params(124_439_808), "124.4 M");
        assert_eq!(format_params(7_000_000_000), "7.0 B");
        assert_eq!(format_params(999), "999");
        assert_eq!(format_tokens(8192), "8K");
        assert_eq!(format_tokens(131_072), "128K");
        assert_eq!(format_tokens(1 << 20), "1M");
        assert_eq!(format_tokens(1000), "1000");
        assert_eq!(format_thousands(1_073_741_824), "1,073,741,824");
        assert_eq!(format_thousands(12), "12");
        assert_eq!(format_thousands(123_456), "123,456");
    }
}
