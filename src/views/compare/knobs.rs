//! The parameters of the parameterised variants (GQA groups, window, hybrid ratio, MLA rank, sharing):
//! the values the controls show, read from the chosen list, and the variant each control's text makes.

use crate::model::Variant;

/// One control of the compare view's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    GqaGroups,
    WindowTokens,
    HybridRatio,
    HybridWindowTokens,
    MlaRank,
    MlaRopeDims,
    ShareGroup,
}

impl Knob {
    /// The number fields in their order on the page: the knob, its label, its test id and the least
    /// value the field offers (the GQA groups are a choice list of their own).
    pub const NUMBER_FIELDS: [(Knob, &'static str, &'static str, &'static str); 6] = [
        (Knob::WindowTokens, "Sliding window W", "window-tokens", "1"),
        (Knob::HybridRatio, "Hybrid r (sliding per global)", "hybrid-ratio", "1"),
        (Knob::HybridWindowTokens, "Hybrid window", "hybrid-window", "1"),
        (Knob::MlaRank, "MLA latent rank", "mla-rank", "1"),
        (Knob::MlaRopeDims, "MLA RoPE dims", "mla-rope", "0"),
        (Knob::ShareGroup, "Layers sharing a cache", "share-group", "1"),
    ];
}

/// The value each control shows: that of the first variant of its family in the list, else
/// [`Knobs::STANDARD`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    pub gqa_groups: u32,
    pub window_tokens: u64,
    pub hybrid_ratio: u32,
    pub hybrid_window_tokens: u64,
    pub mla_rank: u32,
    pub mla_rope_dims: u32,
    pub share_group: u32,
}

/// Largest hybrid ratio, sharing group and RoPE width a control accepts.
const MAX_SMALL_KNOB: u32 = 4096;
/// Largest MLA rank a control accepts (larger entries are cut to it).
const MAX_MLA_RANK: u64 = 1 << 20;

impl Knobs {
    /// What the control of `knob` shows.
    pub fn shown(&self, knob: Knob) -> u64 {
        match knob {
            Knob::GqaGroups => self.gqa_groups.into(),
            Knob::WindowTokens => self.window_tokens,
            Knob::HybridRatio => self.hybrid_ratio.into(),
            Knob::HybridWindowTokens => self.hybrid_window_tokens,
            Knob::MlaRank => self.mla_rank.into(),
            Knob::MlaRopeDims => self.mla_rope_dims.into(),
            Knob::ShareGroup => self.share_group.into(),
        }
    }

    /// Values for families the list lacks: those of [`crate::model::standard_variants`] for 32 heads.
    pub const STANDARD: Knobs = Knobs {
        gqa_groups: 8,
        window_tokens: 4096,
        hybrid_ratio: 5,
        hybrid_window_tokens: 1024,
        mla_rank: 512,
        mla_rope_dims: 64,
        share_group: 2,
    };

    pub fn of(list: &[Variant]) -> Knobs {
        let mut k = Knobs::STANDARD;
        // In reverse, so that the first variant of each family wins.
        for variant in list.iter().rev() {
            match *variant {
                Variant::Gqa { groups } => k.gqa_groups = groups,
                Variant::Sliding { window_tokens } => k.window_tokens = window_tokens,
                Variant::Hybrid { local_per_global, window_tokens } => {
                    (k.hybrid_ratio, k.hybrid_window_tokens) = (local_per_global, window_tokens);
                }
                Variant::Mla { kv_lora_rank, rope_dim } => (k.mla_rank, k.mla_rope_dims) = (kv_lora_rank, rope_dim),
                Variant::CrossLayer { group_size } => k.share_group = group_size,
                _ => {}
            }
        }
        k
    }

    /// The variant `knob`'s entered `text` makes, the family's other parameters kept; `None` when
    /// the text is not a value the knob takes.
    pub fn variant(&self, knob: Knob, text: &str) -> Option<Variant> {
        let text = text.trim();
        let positive = || text.parse::<u64>().ok().filter(|&n| n >= 1);
        let small = || text.parse::<u32>().ok().filter(|n| (1..=MAX_SMALL_KNOB).contains(n));
        Some(match knob {
            Knob::GqaGroups => Variant::Gqa { groups: text.parse().ok()? },
            Knob::WindowTokens => Variant::Sliding { window_tokens: positive()? },
            Knob::HybridRatio => {
                Variant::Hybrid { local_per_global: small()?, window_tokens: self.hybrid_window_tokens }
            }
            Knob::HybridWindowTokens => {
                Variant::Hybrid { local_per_global: self.hybrid_ratio, window_tokens: positive()? }
            }
            Knob::MlaRank => {
                Variant::Mla { kv_lora_rank: positive()?.min(MAX_MLA_RANK) as u32, rope_dim: self.mla_rope_dims }
            }
            Knob::MlaRopeDims => Variant::Mla {
                kv_lora_rank: self.mla_rank,
                rope_dim: text.parse().ok().filter(|&r| r <= MAX_SMALL_KNOB)?,
            },
            Knob::ShareGroup => Variant::CrossLayer { group_size: small()? },
        })
    }
}

/// The KV head counts GQA can use: the divisors of the query heads, below the count itself (MHA).
pub fn gqa_choices(n_q_heads: u32) -> Vec<u32> {
    (1..n_q_heads).filter(|g| n_q_heads.is_multiple_of(*g)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_show_the_list_or_the_standard_values() {
        assert_eq!(Knobs::of(&[Variant::Mha]), Knobs::STANDARD);
        let list = [
            Variant::Gqa { groups: 4 },
            Variant::Hybrid { local_per_global: 3, window_tokens: 2048 },
            Variant::Mla { kv_lora_rank: 256, rope_dim: 32 },
            Variant::CrossLayer { group_size: 3 },
            Variant::Gqa { groups: 2 },
        ];
        let k = Knobs::of(&list);
        // The first GQA (4 KV heads) wins over the later one.
        assert_eq!((k.gqa_groups, k.hybrid_ratio, k.hybrid_window_tokens), (4, 3, 2048));
        assert_eq!((k.mla_rank, k.mla_rope_dims, k.share_group, k.window_tokens), (256, 32, 3, 4096));
    }

    #[test]
    fn entered_text_makes_a_variant_keeping_the_rest_of_its_family() {
        let k = Knobs::of(&[Variant::Hybrid { local_per_global: 3, window_tokens: 2048 }]);
        assert_eq!(k.variant(Knob::GqaGroups, "4"), Some(Variant::Gqa { groups: 4 }));
        assert_eq!(k.variant(Knob::WindowTokens, " 1024 "), Some(Variant::Sliding { window_tokens: 1024 }));
        assert_eq!(
            k.variant(Knob::HybridRatio, "7"),
            Some(Variant::Hybrid { local_per_global: 7, window_tokens: 2048 })
        );
        assert_eq!(
            k.variant(Knob::HybridWindowTokens, "512"),
            Some(Variant::Hybrid { local_per_global: 3, window_tokens: 512 })
        );
        // Ranks past 2^20 = 1,048,576 are cut to it; RoPE may be 0 (no RoPE key).
        assert_eq!(k.variant(Knob::MlaRank, "5000000"), Some(Variant::Mla { kv_lora_rank: 1 << 20, rope_dim: 64 }));
        assert_eq!(k.variant(Knob::MlaRopeDims, "0"), Some(Variant::Mla { kv_lora_rank: 512, rope_dim: 0 }));
        assert_eq!(k.variant(Knob::ShareGroup, "4"), Some(Variant::CrossLayer { group_size: 4 }));
        for (knob, bad) in [
            (Knob::WindowTokens, "0"),
            (Knob::HybridRatio, "4097"),
            (Knob::MlaRopeDims, "4097"),
            (Knob::ShareGroup, "x"),
            (Knob::GqaGroups, ""),
        ] {
            assert_eq!(k.variant(knob, bad), None, "{knob:?} {bad}");
        }
    }

    #[test]
    fn gqa_offers_the_divisors_below_mha() {
        // 32 query heads: 1, 2, 4, 8, 16 (32 itself is MHA).
        assert_eq!(gqa_choices(32), [1, 2, 4, 8, 16]);
        // 40 query heads (Llama 4 Maverick).
        assert_eq!(gqa_choices(40), [1, 2, 4, 5, 8, 10, 20]);
        assert!(gqa_choices(1).is_empty());
    }

    #[test]
    fn each_field_shows_its_own_knob() {
        let k = Knobs {
            gqa_groups: 1,
            window_tokens: 2,
            hybrid_ratio: 3,
            hybrid_window_tokens: 4,
            mla_rank: 5,
            mla_rope_dims: 6,
            share_group: 7,
        };
        let shown: Vec<u64> = Knob::NUMBER_FIELDS.iter().map(|(knob, ..)| k.shown(*knob)).collect();
        assert_eq!(shown, [2, 3, 4, 5, 6, 7]);
        assert_eq!(k.shown(Knob::GqaGroups), 1);
    }
}
