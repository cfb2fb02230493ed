//! What the page says about a model with real weights: the trained model's summary (its size, its
//! heads, what it was trained on and how well it does, what its files weigh) and the phrase for a
//! dropped checkpoint's heads.

use crate::model::Model;
use crate::model::params::model_params;
use crate::model::presets::TRAINED_FILES;
use crate::model::units::format_thousands;

/// What it was trained on and how well it does, in words for the page; each figure is in
/// `recipe.json` / `quality.json` beside the weights (a test reads them there).
pub const TRAINED_FACTS: &str = "Trained by this project on a 2-core CPU in 38 minutes: 2,000 steps of 2,048 tokens \
     (4.1 million tokens) of the prose and code of five Rust books that ship with the Rust toolchain (the Book, \
     the Reference, Rust by Example, the Cargo Book, the Nomicon). Held-out loss 3.52 nats per token, against 4.54 \
     for a bigram model.";

/// What the page says the model is, from its layout: size, heads, the longest text it reads, and
/// what its files weigh.
pub fn trained_summary(model: &Model) -> String {
    let params = model_params(model).total();
    let download: u64 = TRAINED_FILES.iter().map(|(_, bytes)| bytes).sum();
    format!(
        "{} has {} parameters ({}) and reads at most {} tokens. {TRAINED_FACTS} Its files ({} bytes) are fetched only \
         when it is chosen.",
        model.name,
        format_thousands(params),
        heads_phrase(model),
        model.max_position_embeddings,
        format_thousands(download.into())
    )
}

/// "4 layers, 8 query heads sharing 2 KV heads, head width 32" ("... sharing 1 KV head ..." for
/// multi-query): what a model with real weights is made of.
pub fn heads_phrase(model: &Model) -> String {
    let kv = model.attn.n_kv_heads;
    format!(
        "{} layers, {} query heads sharing {kv} KV head{}, head width {}",
        model.n_layers(),
        model.n_q_heads,
        if kv == 1 { "" } else { "s" },
        model.attn.head_dim
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::presets::TRAINED_DIR;

    fn shipped(file: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(TRAINED_DIR).join(file)
    }

    #[test]
    fn the_preset_is_the_shipped_config_and_the_facts_are_its_records() {
        let p = crate::model::presets::preset(crate::model::presets::TRAINED_ID).unwrap();
        // 4,096 x 192 tied embedding + 4 layers x (192 x (256 + 64 + 64) + 384 biases + 256 x 192
        // + 3 x 192 x 512 + 2 x 192 norms) + 192 final norm = 786,432 + 4 x 418,560 + 192 = 2,460,864.
        assert_eq!(model_params(p).total(), 2_460_864);
        assert_eq!((p.n_layers(), p.n_q_heads, p.attn.n_kv_heads), (4, 8, 2));
        let read = |f: &str| serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(shipped(f)).unwrap());
        let (recipe, quality) = (read("recipe.json").unwrap(), read("quality.json").unwrap());
        let secs = recipe["summary"]["wall_secs"].as_f64().unwrap();
        assert_eq!((secs / 60.0).round(), 38.0);
        assert_eq!(recipe["summary"]["steps_done"], 2000);
        assert_eq!(recipe["summary"]["tokens_seen"], 4_096_000);
        assert_eq!(recipe["threads"], 2);
        assert_eq!(format!("{:.2}", quality["heldout_loss"].as_f64().unwrap()), "3.52");
        assert_eq!(format!("{:.2}", quality["bigram_loss"].as_f64().unwrap()), "4.54");
        let summary = trained_summary(p);
        assert!(
            summary.starts_with(
                "Attention Lab tiny has 2,460,864 parameters (4 layers, 8 query heads sharing 2 KV heads, head width 32) \
                 and reads at most 128 tokens. Trained by this project"
            ),
            "{summary}"
        );
        // 688 + 107,706 + 4,926,960 bytes.
        assert!(summary.ends_with("Its files (5,035,354 bytes) are fetched only when it is chosen."), "{summary}");
        for figure in ["38 minutes", "2,000 steps of 2,048 tokens", "4.1 million", "3.52", "4.54", "five Rust books"] {
            assert!(TRAINED_FACTS.contains(figure), "{figure}");
        }
    }
}
