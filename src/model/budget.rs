//! A GPU memory budget: how it is written (decimal GB in links), and what fits in it — the whole
//! cache at a context, the weights if counted, and the longest context that fits.
//!
//! Budgets are exact integers of bytes. `80` in a link means 80 GB = 80 × 10^9 bytes (the way GPU
//! makers label cards), never 80 GiB.

use super::config::Model;
use super::dtype::DType;
use super::kv_cache::{ContextFit, SizeOverflow, kv_total_bytes, max_context_tokens, state_bytes, weights_bytes};

/// Budgets offered as one-click choices, in GB, with a card that has that much memory.
pub const BUDGET_PRESETS_GB: [(u64, &str); 5] = [
    (24, "24 GB (RTX 4090, L4)"),
    (48, "48 GB (L40S, RTX 6000 Ada)"),
    (80, "80 GB (A100, H100)"),
    (141, "141 GB (H200)"),
    (192, "192 GB (B200, MI300X)"),
];

/// The default budget: one 80 GB card.
pub const DEFAULT_BUDGET_BYTES: u64 = 80_000_000_000;
/// Largest budget a link may ask for: 1 PB (a whole cluster; keeps every sum far from overflow).
pub const MAX_BUDGET_BYTES: u64 = 1_000_000_000_000_000;

const BYTES_PER_GB: u64 = 1_000_000_000;
/// Decimal places accepted after the point (0.001 GB = 1 MB).
const MAX_DECIMALS: usize = 3;

/// Reads a budget in decimal GB (`80`, `24.5`, `0.125`) into exact bytes.
pub fn parse_gb(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let shown: String = t.chars().take(24).collect();
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && frac.is_empty() || !digits_only(whole) || !digits_only(frac) || whole.len() > 9 {
        return Err(format!("\"{shown}\" is not a number of GB"));
    }
    if frac.len() > MAX_DECIMALS {
        return Err(format!("\"{shown}\" has more than {MAX_DECIMALS} decimals"));
    }
    let whole: u64 =
        if whole.is_empty() { 0 } else { whole.parse().map_err(|_| format!("\"{shown}\" is too large"))? };
    let frac_bytes: u64 = if frac.is_empty() {
        0
    } else {
        let scale = 10u64.pow((MAX_DECIMALS - frac.len()) as u32);
        frac.parse::<u64>().map_err(|_| format!("\"{shown}\" is not a number of GB"))? * scale * (BYTES_PER_GB / 1000)
    };
    let bytes = whole * BYTES_PER_GB + frac_bytes;
    if bytes == 0 || bytes > MAX_BUDGET_BYTES {
        return Err(format!("{shown} GB is outside 0.001 ..= {} GB", MAX_BUDGET_BYTES / BYTES_PER_GB));
    }
    Ok(bytes)
}

/// Writes bytes as decimal GB with no trailing zeros (`80000000000` -> `80`, `24500000000` -> `24.5`);
/// [`parse_gb`] reads it back exactly for whole megabytes.
pub fn format_gb(bytes: u64) -> String {
    let whole = bytes / BYTES_PER_GB;
    let frac = bytes % BYTES_PER_GB;
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// What fits in a budget for one model at one KV dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetFit {
    pub budget_bytes: u128,
    /// Weights in memory, when counted (`None`: the budget is for the cache alone).
    pub weights_bytes: Option<u128>,
    /// The budget left for the cache (0 when the weights alone do not fit).
    pub kv_room_bytes: u128,
    /// The cache at the chosen context.
    pub kv_at_ctx_bytes: u128,
    /// The recurrent state of one sequence ([`state_bytes`]; 0 for a transformer), the same at every
    /// context.
    pub state_bytes: u128,
    /// Weights (if counted) plus one sequence's cache at the chosen context and its state.
    pub used_at_ctx_bytes: u128,
    /// The longest context whose cache fits the room.
    pub fit: ContextFit,
}

impl BudgetFit {
    /// Whether the chosen context fits.
    pub fn ctx_fits(&self) -> bool {
        self.used_at_ctx_bytes <= self.budget_bytes
    }

    /// What one sequence of the chosen context keeps: its cache plus its recurrent state.
    pub const fn sequence_bytes(&self) -> u128 {
        self.kv_at_ctx_bytes.saturating_add(self.state_bytes)
    }

    /// How many sequences of the chosen context fit side by side in the room left beside the weights
    /// (a server's batch), each with its cache and its state; `None` when a sequence keeps nothing.
    pub fn sequences_at_ctx(&self) -> Option<u128> {
        self.kv_room_bytes.checked_div(self.sequence_bytes())
    }
}

/// The budget arithmetic for `model` with a `kv_dtype` cache at `ctx_tokens`; weights count when
/// `weights_dtype` is given.
pub fn budget_fit(
    model: &Model,
    kv_dtype: DType,
    ctx_tokens: u64,
    budget_bytes: u64,
    weights_dtype: Option<DType>,
) -> Result<BudgetFit, SizeOverflow> {
    let budget = u128::from(budget_bytes);
    let weights = weights_dtype.map(|d| weights_bytes(model, d)).transpose()?;
    let kv_at_ctx = kv_total_bytes(model, ctx_tokens, kv_dtype)?;
    let state = state_bytes(model)?;
    let used = kv_at_ctx.checked_add(state).and_then(|u| u.checked_add(weights.unwrap_or(0))).ok_or(SizeOverflow)?;
    Ok(BudgetFit {
        budget_bytes: budget,
        weights_bytes: weights,
        kv_room_bytes: budget.saturating_sub(weights.unwrap_or(0)),
        kv_at_ctx_bytes: kv_at_ctx,
        state_bytes: state,
        used_at_ctx_bytes: used,
        fit: max_context_tokens(model, kv_dtype, budget, weights_dtype),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn gb_text_round_trips_exactly() {
        assert_eq!(parse_gb("80"), Ok(80_000_000_000));
        assert_eq!(parse_gb(" 24.5 "), Ok(24_500_000_000));
        assert_eq!(parse_gb("0.125"), Ok(125_000_000));
        assert_eq!(parse_gb(".5"), Ok(500_000_000));
        assert_eq!(parse_gb("141."), Ok(141_000_000_000));
        for bad in ["", ".", "-1", "0", "0.000", "1e3", "80GB", "1.2345", "abc", "99999999999", "1000001"] {
            assert!(parse_gb(bad).is_err(), "{bad}");
        }
        for bytes in [80_000_000_000u64, 24_500_000_000, 125_000_000, 1_000_000, MAX_BUDGET_BYTES] {
            assert_eq!(parse_gb(&format_gb(bytes)), Ok(bytes), "{bytes}");
        }
        assert_eq!(format_gb(80_000_000_000), "80");
        assert_eq!(format_gb(24_500_000_000), "24.5");
    }

    #[test]
    fn llama3_8b_in_80_gb_by_hand() {
        let m = preset("llama-3-8b").cloned().unwrap_or_else(|| Model::simple(1, 64, 4));
        // Cache only: 80e9 / 131,072 B per token = 610,351.56 -> 610,351 tokens.
        let f = budget_fit(&m, DType::Fp16, 8192, 80_000_000_000, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.fit, ContextFit::Tokens(610_351));
        assert_eq!(f.kv_at_ctx_bytes, 1 << 30);
        assert!(f.ctx_fits());
        assert_eq!(f.weights_bytes, None);
        // With BF16 weights: 8,030,261,248 params * 2 B = 16,060,522,496 B.
        let w = budget_fit(&m, DType::Fp16, 8192, 80_000_000_000, Some(DType::Bf16)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.weights_bytes, Some(16_060_522_496));
        assert_eq!(w.kv_room_bytes, 80_000_000_000 - 16_060_522_496);
        // (80e9 - 16,060,522,496) / 131,072 = 487,819.0... -> 487,819 tokens.
        assert_eq!(w.fit, ContextFit::Tokens(487_819));
        assert_eq!(w.used_at_ctx_bytes, 16_060_522_496 + (1 << 30));
        // 63,939,477,504 B of room / 2^30 B per sequence of 8,192 tokens = 59.55 -> 59 sequences.
        assert_eq!(w.sequences_at_ctx(), Some(59));
        // A budget smaller than the weights.
        let tiny =
            budget_fit(&m, DType::Fp16, 8192, 10_000_000_000, Some(DType::Bf16)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tiny.fit, ContextFit::WeightsDoNotFit);
        assert_eq!(tiny.kv_room_bytes, 0);
        assert_eq!(tiny.sequences_at_ctx(), Some(0));
        assert!(!tiny.ctx_fits());
    }

    #[test]
    fn a_hybrid_sequence_keeps_its_state_beside_its_cache() {
        use crate::model::encoding::decode_model;
        // 8 layers, 2 attention (8 KV heads of 128) and 6 Mamba layers of 1,000 conv + 4,000 state
        // elements at 2 B: state 6 × (1,000 × 2 + 4,000 × 2) = 60,000 B per sequence.
        let m = decode_model("L8.d1024.h8.kv8.hd128.pat3s-1g.ssm1000-4000-2-2-0.fs4096.v1000.ctx4096").unwrap();
        let f = budget_fit(&m, DType::Fp16, 1000, 1_000_000_000, None).unwrap();
        assert_eq!(f.state_bytes, 60_000);
        // Cache: 2 layers × 8 × 128 × 2 × 2 B = 8,192 B per token; 1,000 tokens: 8,192,000 B.
        assert_eq!(f.kv_at_ctx_bytes, 8_192_000);
        assert_eq!((f.sequence_bytes(), f.used_at_ctx_bytes), (8_252_000, 8_252_000));
        // 10^9 / 8,252,000 = 121.18 -> 121 sequences (the cache alone would give 122).
        assert_eq!(f.sequences_at_ctx(), Some(121));
        // (10^9 − 60,000) / 8,192 = 122,062.98 -> 122,062 tokens.
        assert_eq!(f.fit, ContextFit::Tokens(122_062));
    }
}
