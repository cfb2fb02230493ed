//! DeepSeek V3.2's lightning indexer in the report: the rule its cached key is counted by, with the
//! whole model's figure both ways. The reference implementations disagree on the key's dtype:
//! transformers (`modular_deepseek_v32.py`, `past_key_values.update_indexer`) caches it at the model's
//! dtype, DeepSeek's own inference code (DeepSeek-V3.2-Exp `inference/model.py`, `Indexer.k_cache` and
//! `k_scale_cache`) in fp8 with one float32 scale per 128 values. The figures follow the page's cache
//! dtype, as transformers; the reading gives DeepSeek's form beside it.

use super::reader::Reader;
use crate::model::config::Model;
use crate::model::dtype::DType;
use crate::model::kv_cache::{fp8_indexer_key_bytes, kv_bytes_per_token, kv_bytes_per_token_fp8_indexer};
use crate::model::units::format_thousands as t;

/// States how the indexer's key is counted, for a model that has one.
pub(super) fn report(r: &mut Reader<'_>, model: &Model) {
    let Some(mla) = model.mla else { return };
    let Some(dim) = mla.index_head_dim else { return };
    let latent = u128::from(mla.kv_lora_rank) + u128::from(mla.qk_rope_head_dim);
    let (Ok(at_16), Ok(Some(fp8))) =
        (kv_bytes_per_token(model, DType::Bf16), kv_bytes_per_token_fp8_indexer(model, DType::Bf16))
    else {
        return;
    };
    let (where_, per_layer) = if mla.indexer_in_some_layers() {
        let keeping = (0..model.n_layers()).filter(|&l| mla.keeps_indexer_key(l)).count();
        let n = model.n_layers();
        (
            format!("in the {keeping} of {n} layers that run the indexer"),
            format!("{} values a layer, {dim} more in those {keeping}", t(latent)),
        )
    } else {
        ("in every attention layer".to_string(), format!("{} values a layer", t(latent + u128::from(dim))))
    };
    r.read_as(format!(
        "index_head_dim = {dim}: the lightning indexer caches a {dim}-value key per token {where_} beside the \
         {latent}-value MLA latent, counted at the cache dtype like the latent (as transformers caches it): \
         {per_layer}, {} B per token at 16 bits. DeepSeek's inference code keeps this key in fp8 with a float32 \
         scale per 128 values ({} B a layer): {} B per token with a 16-bit latent",
        t(at_16),
        t(fp8_indexer_key_bytes(dim)),
        t(fp8)
    ));
}

#[cfg(test)]
mod tests {
    use super::super::import_hf_value;
    use crate::model::dtype::DType;
    use crate::model::kv_cache::{fp8_indexer_key_bytes, kv_bytes_per_token, kv_bytes_per_token_fp8_indexer};

    /// NVIDIA's NVFP4 release of DeepSeek V3.2 (the architecture's own file; its quantisation is kept
    /// apart in `hf_quant_config.json`).
    fn deepseek_v3_2() -> serde_json::Value {
        let path = format!("{}/tests/data/configs/deepseek-v3.2-nvfp4.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_indexer_key_is_counted_beside_the_latent_by_hand() {
        let imp = import_hf_value(&deepseek_v3_2()).unwrap_or_else(|e| panic!("{e}"));
        let m = &imp.model;
        assert_eq!(m.mla.and_then(|m| m.index_head_dim), Some(128));
        // 61 layers × (512 latent + 64 RoPE key + 128 indexer key) × 2 B = 61 × 1,408 = 85,888 B
        // (V3 without the indexer: 61 × 576 × 2 = 70,272 B).
        assert_eq!(kv_bytes_per_token(m, DType::Bf16), Ok(85_888));
        // fp8 cache: 61 × 704 × 1 B = 42,944 B.
        assert_eq!(kv_bytes_per_token(m, DType::Fp8), Ok(42_944));
        // DeepSeek's inference code: the key in fp8 (128 B) and one float32 scale (4 B) = 132 B a layer;
        // with the 16-bit latent 61 × (1,152 + 132) = 61 × 1,284 = 78,324 B.
        assert_eq!(fp8_indexer_key_bytes(128), 132);
        assert_eq!(kv_bytes_per_token_fp8_indexer(m, DType::Bf16), Ok(Some(78_324)));
        // With an fp8 latent too: 61 × (576 + 132) = 43,188 B.
        assert_eq!(kv_bytes_per_token_fp8_indexer(m, DType::Fp8), Ok(Some(43_188)));
        let rule = imp.report.readings.iter().find(|r| r.starts_with("index_head_dim = 128: the lightning indexer"));
        let rule = rule.unwrap_or_else(|| panic!("{:?}", imp.report.readings));
        assert!(rule.contains("704 values a layer, 85,888 B per token at 16 bits"), "{rule}");
        assert!(rule.contains("(132 B a layer): 78,324 B per token with a 16-bit latent"), "{rule}");
        assert!(!imp.report.warnings.iter().any(|w| w.starts_with("index_head_dim")), "{:?}", imp.report.warnings);
        assert!(imp.report.warnings.iter().any(|w| w.starts_with("index_topk = 2048")));
    }

    #[test]
    fn a_model_without_an_indexer_has_no_fp8_figure_and_no_rule() {
        let path = format!("{}/tests/data/configs/deepseek-v3.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let imp = super::super::import_hf_config(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kv_bytes_per_token_fp8_indexer(&imp.model, DType::Bf16), Ok(None));
        assert!(!imp.report.readings.iter().any(|r| r.contains("lightning indexer")));
        // A 200-value key: 200 fp8 bytes and two scales (blocks of 128) = 208 B.
        assert_eq!(fp8_indexer_key_bytes(200), 208);
    }
}
