//! What the page says about a model with real weights: the trained model's summary (its size, its
//! heads, what it was trained on and how well it does, what its files weigh) and the phrase for a
//! dropped checkpoint's heads.

use std::sync::OnceLock;

use serde_json::Value;

use crate::catalog::presets::TRAINED_FILES;
use crate::lm::head_scores::INDUCTION_LABEL;
use crate::model::Model;
use crate::model::params::model_params;
use crate::model::units::format_thousands;

/// The training run's records beside the weights: its recipe and what `evaluate` measured.
const RECIPE_JSON: &str = include_str!("../../../www/models/attention-lab-tiny/recipe.json");
const QUALITY_JSON: &str = include_str!("../../../www/models/attention-lab-tiny/quality.json");

/// What it was trained on and how well it does, in words for the page: every figure is read from
/// `recipe.json` and `quality.json`, so a retrained model cannot leave the page describing the last one.
pub fn trained_facts() -> &'static str {
    static FACTS: OnceLock<String> = OnceLock::new();
    FACTS.get_or_init(|| {
        facts_from(RECIPE_JSON, QUALITY_JSON).unwrap_or_else(|| format!("Trained by this project on {CORPUS}."))
    })
}

const CORPUS: &str = "the prose and code of five Rust books that ship with the Rust toolchain (the Book, the \
     Reference, Rust by Example, the Cargo Book, the Nomicon)";

fn facts_from(recipe: &str, quality: &str) -> Option<String> {
    let (recipe, quality): (Value, Value) = (serde_json::from_str(recipe).ok()?, serde_json::from_str(quality).ok()?);
    let summary = &recipe["summary"];
    let count = |v: &Value| v.as_u64().map(|n| format_thousands(n.into()));
    let minutes = (summary["wall_secs"].as_f64()? / 60.0).round();
    let tokens_millions = summary["tokens_seen"].as_f64()? / 1e6;
    let mut text = format!(
        "Trained by this project on {} CPU threads in {minutes:.0} minutes: {} steps, {tokens_millions:.1} million \
         tokens of {CORPUS}.",
        recipe["threads"].as_u64()?,
        count(&summary["steps_done"])?,
    );
    let curriculum = summary["curriculum_steps"].as_u64().unwrap_or(0);
    if curriculum > 0 {
        let train = &recipe["train"];
        text += &format!(
            " The first {} steps read windows of {} random token ids, each run of ids said twice, which only \
             copying can predict; after them {:.0} % of the windows stayed such copies.",
            format_thousands(curriculum.into()),
            train["copy_context"].as_u64()?,
            train["copy_windows"].as_f64()? * 100.0
        );
    }
    text += &format!(
        " Held-out loss {:.2} nats per token, against {:.2} for a bigram model.",
        quality["heldout_loss"].as_f64()?,
        quality["bigram_loss"].as_f64()?
    );
    text += &induction_sentence(&evaluated_heads(&quality)?)?;
    Some(text)
}

/// One head as `evaluate` measured it after training: its layer, its number and its induction score
/// on repeated random sequences.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvaluatedHead {
    pub layer: usize,
    pub head: usize,
    pub induction: f64,
}

/// Every head of a `quality.json` (`heads`: one list per layer), or `None` when one lacks its score.
fn evaluated_heads(quality: &Value) -> Option<Vec<EvaluatedHead>> {
    let mut heads = Vec::new();
    for (layer, row) in quality["heads"].as_array()?.iter().enumerate() {
        for (head, scores) in row.as_array()?.iter().enumerate() {
            heads.push(EvaluatedHead { layer, head, induction: scores["induction"].as_f64()? });
        }
    }
    Some(heads)
}

/// The shipped model's heads as `evaluate` measured them (`quality.json` beside its weights).
pub fn shipped_heads() -> &'static [EvaluatedHead] {
    static HEADS: OnceLock<Vec<EvaluatedHead>> = OnceLock::new();
    HEADS.get_or_init(|| {
        serde_json::from_str(QUALITY_JSON).ok().and_then(|q: Value| evaluated_heads(&q)).unwrap_or_default()
    })
}

/// Which heads reached the induction label on repeated random sequences after training.
fn induction_sentence(heads: &[EvaluatedHead]) -> Option<String> {
    let found: Vec<&EvaluatedHead> = heads.iter().filter(|h| h.induction >= INDUCTION_LABEL).collect();
    let Some(best) = found.iter().map(|h| h.induction).reduce(f64::max) else {
        return Some(" No head reached the induction label on repeated random sequences.".into());
    };
    let places: Vec<String> = found.iter().map(|h| format!("{}.{}", h.layer, h.head)).collect();
    Some(format!(
        " On repeated random sequences {} head{} reached the induction label (layer.head {}; the best at {best:.2}).",
        found.len(),
        if found.len() == 1 { "" } else { "s" },
        places.join(", ")
    ))
}

/// What the page says the model is, from its layout: size, heads, the longest text it reads, and
/// what its files weigh.
pub fn trained_summary(model: &Model) -> String {
    let params = model_params(model).total();
    let download: u64 = TRAINED_FILES.iter().map(|(_, bytes)| bytes).sum();
    format!(
        "{} has {} parameters ({}) and reads at most {} tokens. {} Its files ({} bytes) are fetched only when it is \
         chosen.",
        model.name,
        format_thousands(params),
        heads_phrase(model),
        model.max_position_embeddings,
        trained_facts(),
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
    use crate::catalog::presets::TRAINED_DIR;

    fn shipped(file: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(TRAINED_DIR).join(file)
    }

    const QUALITY: &str = r#"{"heldout_loss": 3.5164, "bigram_loss": 4.5393,
        "heads": [[{"induction": 0.01}, {"induction": 0.0412}], [{"induction": 0.97}, {"induction": 0.41}]]}"#;

    #[test]
    fn the_facts_are_written_from_the_records() {
        let plain = r#"{"threads": 2, "summary": {"wall_secs": 2259.2, "steps_done": 2000, "tokens_seen": 4096000},
                        "train": {}}"#;
        let no_heads = QUALITY.replace("0.97", "0.02").replace("0.41", "0.03");
        assert_eq!(
            facts_from(plain, &no_heads).unwrap(),
            format!(
                "Trained by this project on 2 CPU threads in 38 minutes: 2,000 steps, 4.1 million tokens of {CORPUS}. \
                 Held-out loss 3.52 nats per token, against 4.54 for a bigram model. No head reached the induction \
                 label on repeated random sequences."
            )
        );
        // 9,888 s = 164.8 minutes; 10,547,200 tokens; a quarter of the windows copies after the curriculum.
        let curriculum = r#"{"threads": 2, "summary": {"wall_secs": 9888.0, "steps_done": 6000, "tokens_seen": 10547200,
                             "curriculum_steps": 1700}, "train": {"copy_context": 64, "copy_windows": 0.25}}"#;
        let facts = facts_from(curriculum, QUALITY).unwrap();
        assert!(
            facts.starts_with("Trained by this project on 2 CPU threads in 165 minutes: 6,000 steps, 10.5 million")
        );
        assert!(facts.contains(
            "The first 1,700 steps read windows of 64 random token ids, each run of ids said twice, which only copying \
             can predict; after them 25 % of the windows stayed such copies."
        ));
        assert!(facts.ends_with(
            "On repeated random sequences 2 heads reached the induction label (layer.head 1.0, 1.1; the best at 0.97)."
        ));
        assert_eq!(facts_from("{}", QUALITY), None, "records without their figures");
    }

    #[test]
    fn the_preset_is_the_shipped_config_and_the_facts_are_its_records() {
        let p = crate::catalog::presets::preset(crate::catalog::presets::TRAINED_ID).unwrap();
        // 4,096 x 192 tied embedding + 4 layers x (192 x (256 + 64 + 64) + 384 biases + 256 x 192
        // + 3 x 192 x 512 + 2 x 192 norms) + 192 final norm = 786,432 + 4 x 418,560 + 192 = 2,460,864.
        assert_eq!(model_params(p).total(), 2_460_864);
        assert_eq!((p.n_layers(), p.n_q_heads, p.attn.n_kv_heads), (4, 8, 2));
        let read = |f: &str| std::fs::read_to_string(shipped(f)).unwrap();
        assert_eq!(trained_facts(), facts_from(&read("recipe.json"), &read("quality.json")).unwrap());
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
        SHIPPED_FIGURES.iter().for_each(|figure| assert!(summary.contains(figure), "{figure}: {summary}"));
    }

    /// The shipped run's figures, read by hand from its recipe.json (threads 2, wall_secs 4,122.9 =
    /// 68.7 minutes, 6,000 steps, 10,496,000 tokens, curriculum 1,750 steps of 64 tokens, copy windows
    /// 0.25) and quality.json (held-out 3.5234, bigram 4.5393; induction at 0.4 or more: layer 2's heads
    /// 4-7 and layer 3's head 1, the best 0.9601).
    const SHIPPED_FIGURES: &[&str] = &[
        "on 2 CPU threads in 69 minutes: 6,000 steps, 10.5 million tokens of the prose and code of five Rust books",
        "The first 1,750 steps read windows of 64 random token ids",
        "after them 25 % of the windows stayed such copies.",
        "Held-out loss 3.52 nats per token, against 4.54 for a bigram model.",
        "On repeated random sequences 5 heads reached the induction label (layer.head 2.4, 2.5, 2.6, 2.7, 3.1; the \
         best at 0.96).",
    ];
}
