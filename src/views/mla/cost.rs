//! What each form of one MLA layer costs: FLOPs (a multiply and an add are 2) and bytes moved, at a
//! prefill of n tokens (causal: n(n + 1)/2 query-key pairs per head) and at one decoded token against
//! a cache of n. Counted: the work after the cache, where the forms differ (the query projection and
//! the down-projections into the latent are the same in both and left out); bytes: the latent cache
//! and the up-projections read once, and every intermediate the form writes and reads back once.

use super::setup::MlaSizes;
use crate::model::dtype::bits_to_bytes_ceil;

/// Which way the layer is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Keys and values decompressed from the latent for every head, then ordinary attention.
    Expanded,
    /// Up-projections folded into the query and the output; attention over the latent itself.
    Absorbed,
}

impl Form {
    pub const ALL: [Form; 2] = [Form::Expanded, Form::Absorbed];

    pub fn id(self) -> &'static str {
        match self {
            Form::Expanded => "expanded",
            Form::Absorbed => "absorbed",
        }
    }
}

/// Prefill of the whole sequence, or one decoded token against the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Prefill,
    Decode,
}

impl Phase {
    pub const ALL: [Phase; 2] = [Phase::Prefill, Phase::Decode];

    pub fn id(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        }
    }
}

/// One form's cost in one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormCost {
    pub flops: u128,
    pub bytes: u128,
}

/// The cost of `form` in `phase` over `n` tokens (the sequence, or the cache a decoded token
/// reads), values of `bits` bits each (bytes rounded up).
pub fn cost(s: &MlaSizes, form: Form, phase: Phase, n: u64, bits: u32) -> FormCost {
    let w = |x: u32| u128::from(x);
    let (h, r, dr, dn, dv) = (w(s.heads), w(s.latent), w(s.rope), w(s.nope), w(s.value));
    let keys = u128::from(n);
    let (queries, pairs) = match phase {
        Phase::Prefill => (keys, keys * (keys + 1) / 2),
        Phase::Decode => (1, keys),
    };
    let shared_reads = keys * (r + dr) + h * r * (dn + dv);
    let (flops, moved) = match form {
        Form::Expanded => (
            // Every key's K_nope and V for every head, scores over nope + rope, P·V.
            2 * keys * r * h * (dn + dv) + 2 * pairs * h * (dn + dr) + 2 * pairs * h * dv,
            // K_nope and V of every head, written and read back.
            2 * keys * h * (dn + dv),
        ),
        Form::Absorbed => (
            // Fold each query (W_UKᵀ q), scores over latent + rope, P·latent, unfold (W_UV o).
            2 * queries * h * dn * r + 2 * pairs * h * (r + dr) + 2 * pairs * h * r + 2 * queries * h * r * dv,
            // The latent-space query and output of every head, written and read back.
            2 * 2 * queries * h * r,
        ),
    };
    FormCost { flops, bytes: bits_to_bytes_ceil((shared_reads + moved) * u128::from(bits)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Mla;

    fn tiny() -> MlaSizes {
        // h = 2, r = 4, RoPE 2, nope 3, values 3.
        let mla = Mla { kv_lora_rank: 4, qk_rope_head_dim: 2, qk_nope_head_dim: 3, v_head_dim: 3, ..Mla::DEEPSEEK };
        MlaSizes::of(2, mla, 1e4)
    }

    #[test]
    fn a_tiny_layer_by_hand() {
        let s = tiny();
        // Prefill of 2 tokens: 3 pairs a head.
        // Expanded: 2·2·4·2·6 = 192 decompressing, 2·3·2·5 = 60 scores, 2·3·2·3 = 36 P·V: 288.
        // Bytes at 2 B: cache 2·6 = 12, weights 2·4·6 = 48, K_nope and V 2·2·2·6 = 48: 108 values, 216 B.
        assert_eq!(cost(&s, Form::Expanded, Phase::Prefill, 2, 16), FormCost { flops: 288, bytes: 216 });
        // Absorbed: fold 2·2·2·3·4 = 96, scores 2·3·2·6 = 72, P·c 2·3·2·4 = 48, unfold 2·2·2·4·3 = 96: 312.
        // Bytes: 12 + 48 + latent query and output 4·2·2·4 = 64: 124 values, 248 B.
        assert_eq!(cost(&s, Form::Absorbed, Phase::Prefill, 2, 16), FormCost { flops: 312, bytes: 248 });
        // One token against 2 cached: expanded 192 + 2·2·2·5 = 40 + 2·2·2·3 = 24 = 256 flops, bytes as above.
        assert_eq!(cost(&s, Form::Expanded, Phase::Decode, 2, 16), FormCost { flops: 256, bytes: 216 });
        // Absorbed: 2·2·3·4 = 48 + 2·2·2·6 = 48 + 2·2·2·4 = 32 + 2·2·4·3 = 48 = 176; 12 + 48 + 4·2·4 = 92 values.
        assert_eq!(cost(&s, Form::Absorbed, Phase::Decode, 2, 16), FormCost { flops: 176, bytes: 184 });
        // At 4 bits a value, the 92 values are 46 bytes.
        assert_eq!(cost(&s, Form::Absorbed, Phase::Decode, 2, 4).bytes, 46);
    }

    #[test]
    fn deepseek_v3_decodes_cheaper_absorbed_and_prefills_cheaper_expanded() {
        let s = MlaSizes::of(128, Mla::DEEPSEEK, 1e4);
        // One token against 4,096 cached, 16-bit values.
        // Expanded: 2·4096·512·128·256 + 2·4096·128·192 + 2·4096·128·128 = 137,774,497,792 flops;
        // (4096·576 + 128·512·256 + 2·4096·128·256) · 2 B = 575,143,936 B.
        let e = cost(&s, Form::Expanded, Phase::Decode, 4096, 16);
        assert_eq!(e, FormCost { flops: 137_774_497_792, bytes: 575_143_936 });
        // Absorbed: 2·128·128·512 + 2·4096·128·576 + 2·4096·128·512 + 2·128·512·128 = 1,174,405,120;
        // (4096·576 + 128·512·256 + 4·128·512) · 2 B = 38,797,312 B.
        let a = cost(&s, Form::Absorbed, Phase::Decode, 4096, 16);
        assert_eq!(a, FormCost { flops: 1_174_405_120, bytes: 38_797_312 });
        // A prefill of 4,096: 824,801,492,992 expanded against 2,474,471,587,840 absorbed.
        assert_eq!(cost(&s, Form::Expanded, Phase::Prefill, 4096, 16).flops, 824_801_492_992);
        assert_eq!(cost(&s, Form::Absorbed, Phase::Prefill, 4096, 16).flops, 2_474_471_587_840);
    }
}
