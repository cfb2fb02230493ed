//! What sharing K and V costs (issue 36 part 3): the same model, data, tokens, steps, schedule and
//! width, differing only in attention: MHA (a KV head per query head), GQA (the shipped layout's
//! KV heads), MQA (one KV head) and MLA (a latent of `kv_rank` plus a `rope_dim` RoPE key). Each is
//! trained over several seeds; its held-out loss on the whole split, its parameters and its cache
//! bytes per token (float16, every layer) are compared with each other, not with the shipped model.

use std::path::Path;

use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::bpe::Error;
use crate::mla::Mla;
use crate::model::ModelConfig;
use crate::train::{TrainConfig, Trainer};

/// One attention layout of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// `mha`, `gqa`, `mqa` or `mla` (DESIGN.md's `variant-row` `data-attn`).
    pub attn: &'static str,
    pub model: ModelConfig,
}

/// The four layouts from `base` (whose `kv_heads` is the GQA variant's).
pub fn variants(base: &ModelConfig, mla: Mla) -> Vec<Variant> {
    let with = |attn, kv_heads, mla| Variant { attn, model: ModelConfig { kv_heads, mla, ..base.clone() } };
    vec![
        with("mha", base.query_heads, None),
        with("gqa", base.kv_heads, None),
        with("mqa", 1, None),
        with("mla", base.query_heads, Some(mla)),
    ]
}

/// Bytes one token adds to the cache over every layer, at float16 (2 bytes a value).
pub fn kv_bytes_per_token(cfg: &ModelConfig) -> usize {
    2 * cfg.layers * cfg.cached_values_per_layer()
}

/// One trained run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub attn: String,
    pub seed: u64,
    pub heldout_loss: f64,
    pub wall_secs: f64,
}

/// A variant over its seeds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub attn: String,
    pub parameters: usize,
    pub kv_bytes_per_token: usize,
    pub seeds: Vec<u64>,
    pub losses: Vec<f64>,
    pub mean_loss: f64,
    pub min_loss: f64,
    pub max_loss: f64,
}

/// The table: one row per variant that has runs, in the variants' order, over its runs.
pub fn summarise(variants: &[Variant], runs: &[Run]) -> Vec<Row> {
    variants
        .iter()
        .filter(|v| runs.iter().any(|r| r.attn == v.attn))
        .map(|v| {
            let mine: Vec<&Run> = runs.iter().filter(|r| r.attn == v.attn).collect();
            let losses: Vec<f64> = mine.iter().map(|r| r.heldout_loss).collect();
            Row {
                attn: v.attn.to_string(),
                parameters: v.model.parameters(),
                kv_bytes_per_token: kv_bytes_per_token(&v.model),
                seeds: mine.iter().map(|r| r.seed).collect(),
                mean_loss: losses.iter().sum::<f64>() / losses.len() as f64,
                min_loss: losses.iter().copied().fold(f64::INFINITY, f64::min),
                max_loss: losses.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                losses,
            }
        })
        .collect()
}

/// Trains every variant over `seeds` with `recipe` (its model replaced by the variant's) and measures
/// each on the whole held-out split. Each run writes `{out}/{attn}-seed{seed}/` (`loss.csv`, `run.json`);
/// a run whose `run.json` exists is read back, not trained again, so the comparison can be spread over
/// sessions. After each run `{out}/variants.json` and `variants.md` hold the table so far.
pub fn train_all(
    variants: &[Variant],
    seeds: &[u64],
    recipe: &TrainConfig,
    (train, heldout): (&[u32], &[u32]),
    out: &Path,
) -> Result<Vec<Row>, Error> {
    let mut runs = Vec::new();
    for seed in seeds {
        for v in variants {
            let dir = out.join(format!("{}-seed{seed}", v.attn));
            let done = dir.join("run.json");
            let run = if done.exists() {
                serde_json::from_str(&std::fs::read_to_string(&done)?)?
            } else {
                std::fs::create_dir_all(&dir)?;
                let cfg = TrainConfig { seed: *seed, model: v.model.clone(), ..recipe.clone() };
                let mut trainer = Trainer::new(cfg, Device::Cpu)?;
                let summary = trainer.run(train, heldout, &dir)?;
                let loss = crate::quality::heldout_loss(&v.model, &trainer.weights, heldout)?;
                let run = Run { attn: v.attn.into(), seed: *seed, heldout_loss: loss, wall_secs: summary.wall_secs };
                std::fs::write(&done, serde_json::to_string_pretty(&run)? + "\n")?;
                run
            };
            println!("{} seed {seed}: held-out loss {:.4} ({:.0} s)", run.attn, run.heldout_loss, run.wall_secs);
            runs.push(run);
            let rows = summarise(variants, &runs);
            let table = serde_json::json!({ "recipe": recipe, "runs": runs, "rows": rows });
            std::fs::write(out.join("variants.json"), serde_json::to_string_pretty(&table)? + "\n")?;
            std::fs::write(out.join("variants.md"), markdown(&rows))?;
        }
    }
    Ok(summarise(variants, &runs))
}

/// The table as Markdown, for the README and the note.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| attention | parameters | KV bytes per token | held-out loss (mean) | min-max | seeds |\n\
         | --- | ---: | ---: | ---: | ---: | --- |\n",
    );
    for r in rows {
        let seeds: Vec<String> = r.seeds.iter().map(u64::to_string).collect();
        s += &format!(
            "| {} | {} | {} | {:.3} | {:.3}-{:.3} | {} |\n",
            r.attn.to_uppercase(),
            r.parameters,
            r.kv_bytes_per_token,
            r.mean_loss,
            r.min_loss,
            r.max_loss,
            seeds.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Weights, forward, tests::tiny};
    use candle_core::{Device, Tensor};

    const MLA: Mla = Mla { kv_rank: 12, rope_dim: 4 };

    #[test]
    fn the_four_layouts_differ_only_in_attention() {
        let base = tiny();
        let v = variants(&base, MLA);
        let names: Vec<&str> = v.iter().map(|v| v.attn).collect();
        assert_eq!(names, ["mha", "gqa", "mqa", "mla"]);
        assert_eq!([v[0].model.kv_heads, v[1].model.kv_heads, v[2].model.kv_heads], [4, 2, 1]);
        for x in &v {
            let same = ModelConfig { kv_heads: base.kv_heads, mla: None, ..x.model.clone() };
            assert_eq!(same, base);
        }
    }

    /// By hand, tiny(): 4 layers, 4 query heads of width 8. MHA caches 2 x 4 x 8 = 64 values a layer,
    /// GQA 2 x 2 x 8 = 32, MQA 2 x 8 = 16, MLA 12 + 4 = 16; times 4 layers and 2 bytes.
    #[test]
    fn cache_bytes_per_token_by_hand() {
        let bytes: Vec<usize> = variants(&tiny(), MLA).iter().map(|v| kv_bytes_per_token(&v.model)).collect();
        assert_eq!(bytes, [512, 256, 128, 128]);
    }

    /// tiny() at width 32: MLA's attention per layer is Q 32 x 4 x (8 + 4) = 1,536, the latent's
    /// down-projection 32 x 16 = 512, its norm 12, the up-projection 12 x 4 x 16 = 768, O 32 x 32 = 1,024.
    #[test]
    fn mla_parameters_by_hand_and_in_the_weights() {
        let cfg = ModelConfig { mla: Some(MLA), ..tiny() };
        assert_eq!(MLA.layer_parameters(&cfg), 1536 + 512 + 12 + 768 + 1024);
        let w = Weights::init(&cfg, 1, &Device::Cpu).unwrap();
        let n: usize = w.vars.values().map(|v| v.elem_count()).sum();
        assert_eq!(n, cfg.parameters());
        assert!(
            w.vars.keys().any(|k| k.ends_with("kv_b_proj.weight")) && !w.vars.keys().any(|k| k.contains("k_proj."))
        );
    }

    /// MLA's pass keeps the model causal and its rows sum to one, sliding layers included.
    #[test]
    fn mla_forward_is_causal_with_normalised_rows() {
        let cfg = ModelConfig { mla: Some(MLA), ..tiny() };
        let dev = Device::Cpu;
        let w = Weights::init(&cfg, 3, &dev).unwrap();
        let run = |ids: &[u32]| {
            let x = Tensor::from_vec(ids.to_vec(), (1, ids.len()), &dev).unwrap();
            forward(&cfg, &w, &x, true).unwrap()
        };
        let ids: Vec<u32> = (0..8u32).map(|i| (i * 11 + 5) % 50).collect();
        let base = run(&ids);
        let mut changed = ids.clone();
        changed[4] = (ids[4] + 1) % 50;
        let after = run(&changed);
        let rows = |f: &crate::model::Forward| f.logits.squeeze(0).unwrap().to_vec2::<f32>().unwrap();
        let (a, b) = (rows(&base), rows(&after));
        assert_eq!(a[..4], b[..4]);
        assert!(a[4..].iter().zip(&b[4..]).all(|(x, y)| x != y));
        for p in &base.probs {
            let row = p.get(0).unwrap().get(2).unwrap().get(7).unwrap().to_vec1::<f32>().unwrap();
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn summary_spreads_and_table() {
        let v = variants(&tiny(), MLA);
        let run = |attn: &str, seed, heldout_loss| Run { attn: attn.into(), seed, heldout_loss, wall_secs: 1.0 };
        let rows = summarise(&v, &[run("gqa", 1, 4.0), run("mqa", 1, 4.5), run("gqa", 2, 4.2)]);
        let names: Vec<&str> = rows.iter().map(|r| r.attn.as_str()).collect();
        assert_eq!(names, ["gqa", "mqa"], "variants without runs have no row");
        assert_eq!(rows[0].losses, [4.0, 4.2]);
        assert!((rows[0].mean_loss - 4.1).abs() < 1e-12);
        assert_eq!((rows[0].min_loss, rows[0].max_loss), (4.0, 4.2));
        assert_eq!(rows[1].seeds, [1]);
        assert!(markdown(&rows).contains("| GQA | 32864 | 256 | 4.100 | 4.000-4.200 | 1, 2 |"));
    }
}
