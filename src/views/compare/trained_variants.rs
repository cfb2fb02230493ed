//! What sharing K/V cost, measured: small models trained by this project's training crate
//! (`tools/train`, `variants` command) that differ only in attention — MHA, GQA (the shipped
//! layout), MQA and MLA — with one recipe and several seeds. The crate's `variants.json` is read as
//! it was written; every figure the page shows is worked out here from its raw losses, and the KV
//! bytes per token are the app's own arithmetic for each variant of the trained model (a test checks
//! they equal the crate's count).

use serde::Deserialize;

use crate::catalog::presets::{TRAINED_ID, preset};
use crate::model::dtype::DType;
use crate::model::kv_cache::kv_bytes_per_token;
use crate::model::units::{count_of, format_thousands};
use crate::model::variants::{Variant, apply_variant};

/// The training crate's table, verbatim (`tools/train/runs/variants/variants.json`).
const VARIANTS_JSON: &str = include_str!("trained_variants.json");

#[derive(Deserialize)]
struct File {
    recipe: Recipe,
    rows: Vec<FileRow>,
}

#[derive(Deserialize)]
struct Recipe {
    steps: u32,
    batch: u32,
    context_tokens: u32,
    peak_lr: f64,
}

#[derive(Deserialize)]
struct FileRow {
    attn: String,
    parameters: u64,
    losses: Vec<f64>,
    seeds: Vec<u64>,
}

/// One variant's row: its loss over seeds and what its cache takes.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainedVariant {
    /// `mha`, `gqa`, `mqa` or `mla`.
    pub attn: String,
    pub parameters: u64,
    /// Bytes of K/V (or MLA's latent and RoPE key) per token over all layers, in f16 (the app's
    /// arithmetic for this variant of the trained model).
    pub kv_bytes_per_token: u128,
    /// Held-out loss of each seed's run, in the order of `seeds`.
    pub losses: Vec<f64>,
    pub seeds: Vec<u64>,
}

impl TrainedVariant {
    pub fn mean(&self) -> f64 {
        self.losses.iter().sum::<f64>() / self.losses.len() as f64
    }

    /// (lowest, highest) loss over the seeds.
    pub fn range(&self) -> (f64, f64) {
        let lo = self.losses.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.losses.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }

    /// Highest minus lowest loss over the seeds.
    pub fn spread(&self) -> f64 {
        let (lo, hi) = self.range();
        hi - lo
    }

    /// The table's cells: attention, parameters, KV bytes per token, mean loss, range, seeds.
    pub fn cells(&self) -> [String; 6] {
        let (lo, hi) = self.range();
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        [
            self.attn.to_uppercase(),
            format_thousands(self.parameters.into()),
            format_thousands(self.kv_bytes_per_token),
            format!("{:.3}", self.mean()),
            format!("{lo:.3} to {hi:.3}"),
            seeds.join(", "),
        ]
    }
}

/// The variants measured, and the recipe they share.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainedVariants {
    pub rows: Vec<TrainedVariant>,
    /// Training steps of each run.
    pub steps: u32,
    /// One line: steps, batch, context, learning rate, seeds.
    pub recipe: String,
}

/// The variant of the trained model the training crate's `attn` names (the crate's MLA: rank 112
/// with a 16-wide RoPE key, its defaults).
fn app_variant(attn: &str) -> Option<Variant> {
    match attn {
        "mha" => Some(Variant::Mha),
        "gqa" => Some(Variant::Gqa { groups: 2 }),
        "mqa" => Some(Variant::Mqa),
        "mla" => Some(Variant::Mla { kv_lora_rank: 112, rope_dim: 16 }),
        _ => None,
    }
}

/// The table as shipped; `Err` says why not (a damaged file, a variant the app cannot lay out). Read
/// once: every lesson figure of the variants asks for it.
pub fn trained_variants() -> Result<TrainedVariants, String> {
    static TABLE: std::sync::OnceLock<Result<TrainedVariants, String>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| parse(VARIANTS_JSON)).clone()
}

fn parse(json: &str) -> Result<TrainedVariants, String> {
    let file: File = serde_json::from_str(json).map_err(|e| format!("the variants' table does not read: {e}"))?;
    let base = preset(TRAINED_ID).ok_or("no trained model")?.clone();
    let mut rows = Vec::new();
    for r in file.rows {
        if r.losses.is_empty() || r.losses.len() != r.seeds.len() || r.losses.iter().any(|l| !l.is_finite()) {
            return Err(format!("{}: no finite loss for each seed", r.attn));
        }
        let variant = app_variant(&r.attn).ok_or_else(|| format!("{}: not a variant the app knows", r.attn))?;
        let model = apply_variant(&base, variant).map_err(|e| e.to_string())?;
        let kv = kv_bytes_per_token(&model, DType::Fp16).map_err(|e| e.to_string())?;
        rows.push(TrainedVariant {
            attn: r.attn,
            parameters: r.parameters,
            kv_bytes_per_token: kv,
            losses: r.losses,
            seeds: r.seeds,
        });
    }
    let c = &file.recipe;
    let recipe = format!(
        "{} steps of {} windows of {} tokens each, peak learning rate {}, {}",
        c.steps,
        c.batch,
        c.context_tokens,
        c.peak_lr,
        seeds_per_variant(&rows)
    );
    Ok(TrainedVariants { rows, steps: c.steps, recipe })
}

/// The variant's loss minus MHA's for each seed both ran (the same seed gives both the same order of
/// training windows), in the variant's order of seeds.
pub fn paired_differences(r: &TrainedVariant, mha: &TrainedVariant) -> Vec<f64> {
    let mha_loss = |seed: &u64| mha.seeds.iter().position(|s| s == seed).map(|i| mha.losses[i]);
    r.seeds.iter().zip(&r.losses).filter_map(|(seed, loss)| mha_loss(seed).map(|m| loss - m)).collect()
}

/// "2 seeds per variant", or "1 to 3 seeds per variant" when the rows differ.
fn seeds_per_variant(rows: &[TrainedVariant]) -> String {
    let counts = rows.iter().map(|r| r.seeds.len() as u128);
    let (fewest, most) = (counts.clone().min().unwrap_or(0), counts.max().unwrap_or(0));
    if fewest == most {
        format!("{} per variant", count_of(most, "seed"))
    } else {
        format!("{fewest} to {most} seeds per variant")
    }
}

/// What the table shows, in one sentence per variant against MHA: its loss range lies above or below
/// MHA's; or the ranges overlap and the means differ by no more than the wider spread (the runs
/// cannot tell them apart); or they overlap but the means lie further apart than that (unsettled). A
/// variant or an MHA with a single seed has no range, and its sentence says so instead. Then the
/// differences seed by seed.
pub fn findings(t: &TrainedVariants) -> Vec<String> {
    let Some(mha) = t.rows.iter().find(|r| r.attn == "mha") else { return Vec::new() };
    t.rows
        .iter()
        .filter(|r| r.attn != "mha")
        .map(|r| {
            let pairs: Vec<String> = paired_differences(r, mha).iter().map(|d| format!("{d:+.3}")).collect();
            let by_seed = if pairs.is_empty() {
                String::new()
            } else {
                format!(" Seed by seed, on the same training windows: {}.", pairs.join(", "))
            };
            overall(r, mha) + &by_seed
        })
        .collect()
}

/// The finding's first sentence: the variant's mean against MHA's, judged by the seeds' ranges.
fn overall(r: &TrainedVariant, mha: &TrainedVariant) -> String {
    let ((mha_lo, mha_hi), (lo, hi)) = (mha.range(), r.range());
    let delta = r.mean() - mha.mean();
    let bytes = format!("{}x MHA's cache", ratio(r.kv_bytes_per_token, mha.kv_bytes_per_token));
    let name = r.attn.to_uppercase();
    if r.losses.len() < 2 || mha.losses.len() < 2 {
        format!(
            "{name} ({bytes}): {delta:+.3} nats from MHA on the mean, but with fewer than two seeds a side there \
             is no spread to judge the difference by."
        )
    } else if lo > mha_hi {
        format!("{name} ({bytes}): {delta:+.3} nats above MHA, outside both ranges over seeds.")
    } else if hi < mha_lo {
        format!("{name} ({bytes}): {delta:+.3} nats below MHA, outside both ranges over seeds.")
    } else if delta.abs() > r.spread().max(mha.spread()) {
        format!(
            "{name} ({bytes}): {delta:+.3} nats from MHA on the mean: the ranges over seeds overlap, but the \
             means lie further apart than either spread, so the seeds do not settle it."
        )
    } else {
        format!(
            "{name} ({bytes}): {delta:+.3} nats from MHA on the mean, within the spread of the seeds: at this scale \
             the runs cannot tell them apart."
        )
    }
}

/// `a / b` as a short decimal ("1/4" reads as 0.25).
fn ratio(a: u128, b: u128) -> String {
    let r = a as f64 / b as f64;
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apps_cache_arithmetic_equals_the_training_crates_count() {
        // The trained layout: 4 layers, 8 query heads of 32; f16. MHA: 4 x 8 x 32 x 2 (K and V) x 2 B =
        // 4,096; GQA with 2 KV heads 1,024; MQA 512; MLA 4 x (112 + 16) x 2 B = 1,024.
        let file: serde_json::Value = serde_json::from_str(VARIANTS_JSON).unwrap();
        let t = trained_variants().unwrap();
        let ours: Vec<(String, u128)> = t.rows.iter().map(|r| (r.attn.clone(), r.kv_bytes_per_token)).collect();
        let theirs: Vec<(String, u128)> = file["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| !r["losses"].as_array().unwrap().is_empty())
            .map(|r| (r["attn"].as_str().unwrap().to_string(), r["kv_bytes_per_token"].as_u64().unwrap().into()))
            .collect();
        assert_eq!(ours, theirs);
        let base = preset(TRAINED_ID).unwrap().clone();
        for (attn, bytes) in [("mha", 4096), ("gqa", 1024), ("mqa", 512), ("mla", 1024)] {
            let model = apply_variant(&base, app_variant(attn).unwrap()).unwrap();
            assert_eq!(kv_bytes_per_token(&model, DType::Fp16).unwrap(), bytes, "{attn}");
        }
        assert_eq!(t.rows.len(), 4, "all four variants are in the shipped table");
    }

    fn row(attn: &str, losses: &[f64], kv: u128) -> TrainedVariant {
        let seeds = (1..=losses.len() as u64).collect();
        TrainedVariant { attn: attn.into(), parameters: 1, kv_bytes_per_token: kv, losses: losses.to_vec(), seeds }
    }

    #[test]
    fn mean_range_and_spread_by_hand() {
        let r = row("gqa", &[4.25, 4.75, 4.5], 1024);
        assert_eq!(r.mean(), 4.5);
        assert_eq!(r.range(), (4.25, 4.75));
        assert_eq!(r.spread(), 0.5);
        let big = TrainedVariant { parameters: 2_460_864, ..r };
        assert_eq!(big.cells(), ["GQA", "2,460,864", "1,024", "4.500", "4.250 to 4.750", "1, 2, 3"].map(String::from));
    }

    #[test]
    fn findings_say_within_the_spread_or_outside_it() {
        let t = TrainedVariants {
            rows: vec![
                row("mha", &[4.0, 4.2], 4096),
                row("gqa", &[4.1, 4.3], 1024),
                row("mqa", &[4.5, 4.6], 512),
                row("mla", &[3.5, 3.7], 1024),
            ],
            steps: 1,
            recipe: String::new(),
        };
        let f = findings(&t);
        assert_eq!(f.len(), 3);
        assert!(
            f[0].starts_with("GQA (0.25x MHA's cache): +0.100 nats") && f[0].contains("within the spread"),
            "{}",
            f[0]
        );
        assert!(f[1].starts_with("MQA (0.125x MHA's cache): +0.450 nats above MHA"), "{}", f[1]);
        assert!(f[2].starts_with("MLA (0.25x MHA's cache): -0.500 nats below MHA"), "{}", f[2]);
        assert!(f[1].ends_with("Seed by seed, on the same training windows: +0.500, +0.400."), "{}", f[1]);
        // Ranges that touch (at 4.1) while the means lie 0.15 apart, more than either spread (0.1): not
        // "within" (with two seeds a side, overlapping ranges always have closer means than that).
        let rows = vec![row("mha", &[4.0, 4.0, 4.0, 4.1], 4096), row("mqa", &[4.1, 4.2, 4.2, 4.2], 512)];
        let f = findings(&TrainedVariants { rows, ..t.clone() });
        assert!(
            f[0].starts_with("MQA (0.125x MHA's cache): +0.150 nats") && f[0].contains("do not settle it"),
            "{}",
            f[0]
        );
        let one_seed = TrainedVariants { rows: vec![row("mha", &[4.0, 4.2], 4096), row("mqa", &[4.9], 512)], ..t };
        let f = findings(&one_seed);
        assert!(f[0].starts_with("MQA (0.125x MHA's cache): +0.800 nats") && f[0].contains("no spread"), "{}", f[0]);
    }

    #[test]
    fn what_the_lesson_says_of_the_shipped_table_holds() {
        // lessons/20-what-sharing-costs.md, step 3: every variant's mean is closer to MHA's than MHA's
        // own seeds are to each other, every range overlaps MHA's (so no variant is told apart), and
        // MQA caches an eighth of MHA's bytes. New runs that change this must change the lesson too.
        let t = trained_variants().unwrap();
        let mha = t.rows.iter().find(|r| r.attn == "mha").unwrap();
        for r in t.rows.iter().filter(|r| r.attn != "mha") {
            assert!((r.mean() - mha.mean()).abs() < mha.spread(), "{}", r.attn);
            assert!(r.seeds.len() >= 2, "{}: the lesson's finding needs two seeds", r.attn);
        }
        assert!(findings(&t).iter().all(|f| f.contains("within the spread of the seeds")), "{:?}", findings(&t));
        let mqa = t.rows.iter().find(|r| r.attn == "mqa").unwrap();
        assert_eq!(mha.kv_bytes_per_token, 8 * mqa.kv_bytes_per_token);
        // Read in pairs: GQA's differences change sign, MQA's are both above MHA, MLA's both below.
        let signs = |attn: &str| {
            let r = t.rows.iter().find(|r| r.attn == attn).unwrap();
            paired_differences(r, mha).iter().map(|d| d.signum()).collect::<Vec<_>>()
        };
        assert_eq!(signs("gqa"), [-1.0, 1.0]);
        assert_eq!(signs("mqa"), [1.0, 1.0]);
        assert_eq!(signs("mla"), [-1.0, -1.0]);
    }

    #[test]
    fn paired_differences_match_seeds_not_positions() {
        let mha = row("mha", &[4.0, 4.25], 4096);
        let other = TrainedVariant { seeds: vec![2, 3], ..row("mqa", &[4.5, 9.0], 512) };
        // Seed 2: 4.5 - 4.25; seed 3 has no MHA run.
        assert_eq!(paired_differences(&other, &mha), [0.25]);
    }

    #[test]
    fn the_recipe_line_counts_the_seeds() {
        let rows = vec![row("mha", &[4.0, 4.2], 4096), row("gqa", &[4.1, 4.3], 1024)];
        assert_eq!(seeds_per_variant(&rows), "2 seeds per variant");
        let uneven = vec![row("mha", &[4.0], 4096), row("gqa", &[4.1, 4.3, 4.2], 1024)];
        assert_eq!(seeds_per_variant(&uneven), "1 to 3 seeds per variant");
        assert_eq!(seeds_per_variant(&[row("mla", &[4.4], 1024)]), "1 seed per variant");
        assert_eq!(
            trained_variants().unwrap().recipe,
            "600 steps of 16 windows of 128 tokens each, peak learning rate 0.003, 2 seeds per variant"
        );
    }

    #[test]
    fn a_damaged_table_is_refused_with_the_reason() {
        assert!(parse("{").unwrap_err().starts_with("the variants' table does not read"));
        let recipe = r#""recipe": {"steps": 1, "batch": 1, "context_tokens": 1, "peak_lr": 0.1}"#;
        let empty = format!(r#"{{{recipe}, "rows": [{{"attn": "mha", "parameters": 1, "losses": [], "seeds": []}}]}}"#);
        assert_eq!(parse(&empty).unwrap_err(), "mha: no finite loss for each seed");
        let odd =
            format!(r#"{{{recipe}, "rows": [{{"attn": "kv9", "parameters": 1, "losses": [1.0], "seeds": [1]}}]}}"#);
        assert_eq!(parse(&odd).unwrap_err(), "kv9: not a variant the app knows");
    }

    #[test]
    fn parameter_counts_are_the_apps_for_the_same_layouts() {
        use crate::model::params::model_params;
        // The app lays out each variant of the trained model as the crate trained it, except that its
        // MLA keeps Qwen2's attention biases (8 x 48 on the query, 112 + 16 on the latent and RoPE key,
        // 8 x 64 on the up-projection: 1,024 per layer), which the crate's MLA does not have.
        let base = preset(TRAINED_ID).unwrap().clone();
        for (attn, crate_count) in [("mha", 2_757_312u128), ("gqa", 2_460_864), ("mqa", 2_411_456), ("mla", 2_787_456)]
        {
            let model = apply_variant(&base, app_variant(attn).unwrap()).unwrap();
            let biases = if attn == "mla" { 4 * 1024 } else { 0 };
            assert_eq!(model_params(&model).total(), crate_count + biases, "{attn}");
        }
        for r in trained_variants().unwrap().rows {
            let expected = [("mha", 2_757_312u64), ("gqa", 2_460_864), ("mqa", 2_411_456), ("mla", 2_787_456)];
            assert!(expected.contains(&(r.attn.as_str(), r.parameters)), "{} {}", r.attn, r.parameters);
        }
        assert_eq!(model_params(&base).total(), 2_460_864, "the shipped model is the GQA variant's layout");
    }
}
