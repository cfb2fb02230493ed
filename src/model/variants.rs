//! One base model re-expressed with each KV-saving technique, to compare them fairly.
//!
//! Every variant except [`Variant::AsPublished`] starts from the same *plain MHA baseline* of the
//! base model: all layers global, one KV head per query head, the base's head dimension, no MLA,
//! no K=V, no cross-layer sharing. Then exactly one technique is applied, so each row of the
//! comparison isolates one idea; `AsPublished` shows what the real model combines.
//!
//! In a hybrid (attention beside state-space, linear-attention, convolution or feed-forward-only
//! layers) every technique applies to the attention layers alone: the other layers stay where they
//! are, with their constant state, in every variant, and a sliding or hybrid schedule re-patterns
//! only the attention layers (counted among themselves). A model with no attention layer has no
//! variant but itself.

use std::fmt;
use std::str::FromStr;

use super::config::{AttnGeometry, CrossLayerSharing, Mla, Model};
use super::dtype::DType;
use super::kv_cache::{SizeOverflow, kv_bytes_per_token, kv_total_bytes, state_bytes};
use super::params::attn_params_total;
use super::schedule::{LayerKind, Schedule};

/// A way of storing K/V. URL names: `published mha gqa<g> mqa mla<rank>r<rope> sw<W>
/// hybrid<r>w<W> kveqv xl<g>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The model as published (all its techniques combined).
    AsPublished,
    Mha,
    /// Grouped-query attention with `groups` KV heads.
    Gqa {
        groups: u32,
    },
    Mqa,
    /// Latent attention caching `kv_lora_rank + rope_dim` elements per token per layer.
    Mla {
        kv_lora_rank: u32,
        rope_dim: u32,
    },
    /// Every layer slides over `window_tokens`.
    Sliding {
        window_tokens: u64,
    },
    /// `local_per_global` sliding layers, then one global layer, repeated.
    Hybrid {
        local_per_global: u32,
        window_tokens: u64,
    },
    /// K and V are one tensor.
    KEqV,
    /// Groups of `group_size` consecutive layers share one cache.
    CrossLayer {
        group_size: u32,
    },
}

/// The plain MHA form of `base` that every technique variant starts from (its attention layers all
/// global; its other layers kept).
pub fn mha_baseline(base: &Model) -> Model {
    let mut m = base.clone();
    m.attn = AttnGeometry { n_kv_heads: base.n_q_heads, head_dim: base.attn.head_dim, k_eq_v: false };
    m.global_attn = None;
    m.mla = None;
    m.schedule = repattern_attention(&base.schedule, |_| LayerKind::Global);
    m.cross_layer = CrossLayerSharing::None;
    m
}

/// `schedule` with its `i`-th attention layer (counted among attention layers only) made `kind_of(i)`;
/// every other layer stays where it is.
fn repattern_attention(schedule: &Schedule, mut kind_of: impl FnMut(u32) -> LayerKind) -> Schedule {
    let mut attention_index = 0u32;
    let layers = schedule.layers().iter().map(|&k| {
        if !k.is_attention() {
            return k;
        }
        attention_index += 1;
        kind_of(attention_index - 1)
    });
    Schedule::from_layers(layers.collect())
}

/// Why a variant cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantError(pub String);

impl fmt::Display for VariantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VariantError {}

/// `base` re-expressed as `variant` (validated).
pub fn apply_variant(base: &Model, variant: Variant) -> Result<Model, VariantError> {
    if variant == Variant::AsPublished {
        return Ok(base.clone());
    }
    if !base.has_attention() {
        return Err(VariantError(
            "no layer runs softmax attention, so there is no KV cache for a variant to change".into(),
        ));
    }
    let mut m = mha_baseline(base);
    let h = m.n_q_heads;
    match variant {
        Variant::AsPublished | Variant::Mha => {}
        Variant::Gqa { groups } => {
            if groups == 0 || !h.is_multiple_of(groups) {
                return Err(VariantError(format!("{h} query heads cannot form {groups} equal groups")));
            }
            m.attn.n_kv_heads = groups;
        }
        Variant::Mqa => m.attn.n_kv_heads = 1,
        Variant::Mla { kv_lora_rank, rope_dim } => {
            m.mla = Some(Mla {
                kv_lora_rank,
                qk_rope_head_dim: rope_dim,
                q_lora_rank: base.mla.and_then(|b| b.q_lora_rank),
                qk_nope_head_dim: m.attn.head_dim,
                v_head_dim: m.attn.head_dim,
                ..Mla::DEEPSEEK
            });
        }
        Variant::Sliding { window_tokens } => {
            m.schedule = repattern_attention(&m.schedule, |_| LayerKind::Sliding { window_tokens });
        }
        Variant::Hybrid { local_per_global, window_tokens } => {
            // `local_per_global` sliding attention layers, then a global one, as Schedule::periodic.
            let period = u64::from(local_per_global) + 1;
            m.schedule = repattern_attention(&m.schedule, |i| {
                if u64::from(i) % period == u64::from(local_per_global) {
                    LayerKind::Global
                } else {
                    LayerKind::Sliding { window_tokens }
                }
            });
        }
        Variant::KEqV => m.attn.k_eq_v = true,
        Variant::CrossLayer { group_size } => m.cross_layer = CrossLayerSharing::Groups { group_size },
    }
    m.name = format!("{} ({variant})", base.name);
    m.validate().map_err(|e| VariantError(e.to_string()))?;
    Ok(m)
}

/// The default set of variants for `base`: published, MHA, GQA (8 groups, or the largest divisor of
/// the head count below it), MQA, MLA 512 + 64, sliding 4096, hybrid 5:1 with 1024, K=V, layers
/// sharing in pairs.
pub fn standard_variants(base: &Model) -> Vec<Variant> {
    let h = base.n_q_heads.max(1);
    let groups = (1..=8.min(h)).rev().find(|g| h.is_multiple_of(*g) && *g < h).unwrap_or(1);
    vec![
        Variant::AsPublished,
        Variant::Mha,
        Variant::Gqa { groups },
        Variant::Mqa,
        Variant::Mla { kv_lora_rank: 512, rope_dim: 64 },
        Variant::Sliding { window_tokens: 4096 },
        Variant::Hybrid { local_per_global: 5, window_tokens: 1024 },
        Variant::KEqV,
        Variant::CrossLayer { group_size: 2 },
    ]
}

/// One row of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantFigures {
    pub variant: Variant,
    pub kv_bytes_per_token: u128,
    pub kv_total_bytes: u128,
    /// `kv_total_bytes` over the MHA baseline's at the same context and dtype.
    pub ratio_to_mha: f64,
    pub attn_params_total: u128,
    /// Attention parameters minus the MHA baseline's (negative: fewer).
    pub attn_params_delta_vs_mha: i128,
    /// The recurrent state per sequence of the layers without attention: the same in every variant
    /// (0 for a transformer).
    pub state_bytes: u128,
}

fn ratio(a: u128, b: u128) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn signed(v: u128) -> i128 {
    i128::try_from(v).unwrap_or(i128::MAX)
}

/// Figures for each variant of `base` at `n_tokens` and `dtype`; variants that cannot be built
/// (e.g. GQA groups that do not divide the heads) are skipped.
pub fn compare_variants(
    base: &Model,
    variants: &[Variant],
    n_tokens: u64,
    dtype: DType,
) -> Result<Vec<VariantFigures>, SizeOverflow> {
    let mha = mha_baseline(base);
    let mha_total = kv_total_bytes(&mha, n_tokens, dtype)?;
    let mha_params = attn_params_total(&mha);
    let mut rows = Vec::new();
    for &variant in variants {
        let Ok(m) = apply_variant(base, variant) else {
            continue;
        };
        let total = kv_total_bytes(&m, n_tokens, dtype)?;
        let params = attn_params_total(&m);
        rows.push(VariantFigures {
            variant,
            kv_bytes_per_token: kv_bytes_per_token(&m, dtype)?,
            kv_total_bytes: total,
            ratio_to_mha: ratio(total, mha_total),
            attn_params_total: params,
            attn_params_delta_vs_mha: signed(params) - signed(mha_params),
            state_bytes: state_bytes(&m)?,
        });
    }
    Ok(rows)
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::AsPublished => f.write_str("published"),
            Variant::Mha => f.write_str("mha"),
            Variant::Gqa { groups } => write!(f, "gqa{groups}"),
            Variant::Mqa => f.write_str("mqa"),
            Variant::Mla { kv_lora_rank, rope_dim } => write!(f, "mla{kv_lora_rank}r{rope_dim}"),
            Variant::Sliding { window_tokens } => write!(f, "sw{window_tokens}"),
            Variant::Hybrid { local_per_global, window_tokens } => {
                write!(f, "hybrid{local_per_global}w{window_tokens}")
            }
            Variant::KEqV => f.write_str("kveqv"),
            Variant::CrossLayer { group_size } => write!(f, "xl{group_size}"),
        }
    }
}

fn num<T: FromStr>(s: &str) -> Result<T, VariantError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VariantError(format!("expected a number, found {s:?}")));
    }
    s.parse().map_err(|_| VariantError(format!("number {s:?} is too large")))
}

impl FromStr for Variant {
    type Err = VariantError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let v = match s {
            "published" => Variant::AsPublished,
            "mha" => Variant::Mha,
            "mqa" => Variant::Mqa,
            "kveqv" => Variant::KEqV,
            _ => {
                if let Some(rest) = s.strip_prefix("gqa") {
                    Variant::Gqa { groups: num(rest)? }
                } else if let Some(rest) = s.strip_prefix("mla") {
                    let (rank, rope) =
                        rest.split_once('r').ok_or_else(|| VariantError(format!("bad MLA variant {s:?}")))?;
                    Variant::Mla { kv_lora_rank: num(rank)?, rope_dim: num(rope)? }
                } else if let Some(rest) = s.strip_prefix("sw") {
                    Variant::Sliding { window_tokens: num(rest)? }
                } else if let Some(rest) = s.strip_prefix("hybrid") {
                    let (r, w) =
                        rest.split_once('w').ok_or_else(|| VariantError(format!("bad hybrid variant {s:?}")))?;
                    Variant::Hybrid { local_per_global: num(r)?, window_tokens: num(w)? }
                } else if let Some(rest) = s.strip_prefix("xl") {
                    Variant::CrossLayer { group_size: num(rest)? }
                } else {
                    return Err(VariantError(format!("unknown variant {:?}", s.chars().take(32).collect::<String>())));
                }
            }
        };
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Model {
        let mut m = Model::simple(32, 4096, 32);
        m.attn.n_kv_heads = 8;
        m
    }

    #[test]
    fn names_round_trip_and_reject_garbage() {
        for v in standard_variants(&base()) {
            assert_eq!(v.to_string().parse::<Variant>(), Ok(v));
        }
        for bad in ["", "gqa", "gqa-1", "mla512", "mla512rx", "hybrid5", "swx", "xl", "foo", "gqa99999999999"] {
            assert!(bad.parse::<Variant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn figures_by_hand() {
        let rows = compare_variants(&base(), &standard_variants(&base()), 131_072, DType::Fp16).unwrap_or_default();
        let get = |v: Variant| rows.iter().find(|r| r.variant == v).cloned();
        // MHA: 32 layers * 32 heads * 2 * 128 * 2 B = 524,288 B/token
        let mha = get(Variant::Mha).map(|r| r.kv_bytes_per_token);
        assert_eq!(mha, Some(524_288));
        // GQA 8: 131,072 (ratio 0.25); MQA: 16,384 (1/32)
        assert_eq!(get(Variant::Gqa { groups: 8 }).map(|r| r.kv_bytes_per_token), Some(131_072));
        assert_eq!(get(Variant::Mqa).map(|r| r.kv_bytes_per_token), Some(16_384));
        assert!(get(Variant::Gqa { groups: 8 }).is_some_and(|r| (r.ratio_to_mha - 0.25).abs() < 1e-12));
        // MLA 512 + 64: 32 * 576 * 2 = 36,864
        assert_eq!(get(Variant::Mla { kv_lora_rank: 512, rope_dim: 64 }).map(|r| r.kv_bytes_per_token), Some(36_864));
        // K=V halves MHA; pairs of layers sharing halve it too.
        assert_eq!(get(Variant::KEqV).map(|r| r.kv_total_bytes * 2), get(Variant::Mha).map(|r| r.kv_total_bytes));
        assert_eq!(
            get(Variant::CrossLayer { group_size: 2 }).map(|r| r.kv_total_bytes * 2),
            get(Variant::Mha).map(|r| r.kv_total_bytes)
        );
        // Sliding 4096 at 128K: 524,288 * 4096 = 2,147,483,648 (1/32 of MHA's 68,719,476,736)
        assert_eq!(get(Variant::Sliding { window_tokens: 4096 }).map(|r| r.kv_total_bytes), Some(2_147_483_648));
        // Hybrid 5:1 over 32 layers: 27 sliding(1024) + 5 global ((i+1) % 6 == 0 for i < 32):
        // 16,384 B/token/layer * (27 * 1024 + 5 * 131072) = 16,384 * 683,008 = 11,190,403,072
        assert_eq!(
            get(Variant::Hybrid { local_per_global: 5, window_tokens: 1024 }).map(|r| r.kv_total_bytes),
            Some(11_190_403_072)
        );
        // GQA saves attention parameters: 32 * 2 * 4096 * (4096 - 1024) fewer = 805,306,368
        assert_eq!(get(Variant::Gqa { groups: 8 }).map(|r| r.attn_params_delta_vs_mha), Some(-805_306_368));
        assert_eq!(get(Variant::Mha).map(|r| r.attn_params_delta_vs_mha), Some(0));
    }

    #[test]
    fn bad_groups_are_errors() {
        assert!(apply_variant(&base(), Variant::Gqa { groups: 5 }).is_err());
        assert!(apply_variant(&base(), Variant::Gqa { groups: 0 }).is_err());
        assert!(apply_variant(&base(), Variant::Sliding { window_tokens: 0 }).is_err());
        assert_eq!(apply_variant(&base(), Variant::AsPublished), Ok(base()));
    }

    /// Jamba's shape on 16 layers: 4 Mamba, 1 attention, 3 Mamba, repeated (2 attention layers, 14
    /// Mamba layers of (100 + 200) elements × 2 B = 600 B each: 8,400 B of state).
    fn jamba_like() -> Model {
        crate::model::decode_model("L16.d512.h8.kv2.hd64.pat4s-1g-3s.ssm100-200-2-2-1000.fs1024").unwrap()
    }

    #[test]
    fn variants_change_only_the_attention_layers_of_a_hybrid() {
        let base = jamba_like();
        let kinds = |m: &Model| m.schedule.layers().to_vec();
        let (s, g) = (LayerKind::Stateful(crate::model::StateMixer::Ssm), LayerKind::Global);
        let w = LayerKind::Sliding { window_tokens: 64 };
        for v in standard_variants(&base) {
            let m = apply_variant(&base, v).unwrap();
            // Every Mamba layer stays where it was.
            let stateful: Vec<bool> = m.schedule.layers().iter().map(|k| *k == s).collect();
            let base_stateful: Vec<bool> = base.schedule.layers().iter().map(|k| *k == s).collect();
            assert_eq!(stateful, base_stateful, "{v}");
            assert_eq!(state_bytes(&m), Ok(8_400), "{v}");
        }
        // Sliding: both attention layers (4 and 12) slide; hybrid 1:1 makes the first sliding and
        // the second global (attention layers counted among themselves).
        let sliding = apply_variant(&base, Variant::Sliding { window_tokens: 64 }).unwrap();
        assert_eq!((kinds(&sliding)[4], kinds(&sliding)[12], kinds(&sliding)[5]), (w, w, s));
        let hybrid = apply_variant(&base, Variant::Hybrid { local_per_global: 1, window_tokens: 64 }).unwrap();
        assert_eq!((kinds(&hybrid)[4], kinds(&hybrid)[12]), (w, g));
        // At 1,000 tokens in FP16: MHA caches 2 layers × 8 heads × 64 × 2 × 2 B = 4,096 B per token,
        // 4,096,000 B; every row carries the same 8,400 B of state.
        let rows =
            compare_variants(&base, &[Variant::AsPublished, Variant::Mha, Variant::Mqa], 1000, DType::Fp16).unwrap();
        assert_eq!(rows[1].kv_total_bytes, 4_096_000);
        // GQA as published: 2 KV heads, a quarter; MQA 1 KV head, an eighth: 512,000 B.
        assert_eq!((rows[0].kv_total_bytes, rows[2].kv_total_bytes), (1_024_000, 512_000));
        assert!(rows.iter().all(|r| r.state_bytes == 8_400));
        // Sharing in pairs pairs the two attention layers (4 and 12), not a layer with its Mamba
        // neighbour: half of MHA.
        let xl = compare_variants(&base, &[Variant::CrossLayer { group_size: 2 }], 1000, DType::Fp16).unwrap();
        assert_eq!(xl[0].kv_total_bytes, 2_048_000);
    }

    #[test]
    fn a_model_without_attention_has_no_variant_but_itself() {
        let mamba = crate::model::decode_model("L4.d64.h1.kv1.hd1.pat1s.ssm10-20-2-4-0.fs0").unwrap();
        let err = apply_variant(&mamba, Variant::Mqa).unwrap_err();
        assert!(err.0.starts_with("no layer runs softmax attention"), "{err}");
        let rows = compare_variants(&mamba, &standard_variants(&mamba), 1000, DType::Fp16).unwrap();
        // Only "published" remains: no cache, 4 × (10 × 2 + 20 × 4) = 400 B of state.
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].variant, rows[0].kv_total_bytes, rows[0].state_bytes), (Variant::AsPublished, 0, 400));
    }
}
