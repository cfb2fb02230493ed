//! Which layers run the lightning indexer and so cache its key, read as transformers' GLM-5 code does.
//!
//! `GlmMoeDsaConfig.__post_init__` (`configuration_glm_moe_dsa.py`, transformers at 008e574) takes
//! an explicit `indexer_types` list (`"full"` runs the indexer, `"shared"` reuses the previous full
//! layer's top-k); failing that `index_topk_pattern` (`"F"`/`"S"` per layer); failing that layer `i`
//! is full when `max(i - index_skip_topk_offset + 1, 0) % max(index_topk_freq, 1) == 0`, with
//! defaults 2 and 1 (every layer full). `GlmMoeDsaAttention` (`modeling_glm_moe_dsa.py` at 00371f3)
//! sets `skip_topk = config.indexer_types[layer_idx] == "shared"` and calls its indexer, whose
//! `forward` appends the layer's key to `_cached_keys`, only `if not self.skip_topk or
//! prev_topk_indices is None`: a shared layer keeps no key. The model holds the full layers as that
//! rule's step and offset (GLM-5.2: 4 and 3, layers 0, 1, 2 and every 4th from 6: 21 of 78); a list
//! no step and offset reproduce is counted in every layer and warned of.

use serde_json::Value;

use super::reader::{Reader, show, to_u32};
use super::report::{ImportError, invalid};
use crate::model::units::format_thousands as t;

/// transformers' defaults when the file gives neither.
const DEFAULT_FREQ: u64 = 1;
const DEFAULT_OFFSET: u64 = 2;

/// The rule's step and offset: layer `i` keeps the key when `max(i + 1 - offset, 0) % freq == 0`.
/// A step of 1 (every layer) is held with offset 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Step {
    pub freq: u32,
    pub offset: u32,
}

impl Step {
    const EVERY_LAYER: Step = Step { freq: 1, offset: 0 };

    /// Whether `layer` runs the indexer (as [`crate::model::config::Mla::keeps_indexer_key`]): the
    /// rule's full layers, and layer 0, which has no earlier top-k to reuse.
    fn full(self, layer: usize) -> bool {
        layer == 0 || (layer + 1).saturating_sub(self.offset as usize).is_multiple_of(self.freq.max(1) as usize)
    }

    fn normalized(self) -> Step {
        if self.freq <= 1 { Step::EVERY_LAYER } else { self }
    }
}

/// The indexer's layers for a model with `layers` layers and an indexer key of `dim` values.
pub(super) fn read(r: &mut Reader<'_>, layers: u32, dim: u32) -> Result<Step, ImportError> {
    let stated = stated_step(r)?;
    let Some((path, full)) = listed(r, layers)? else {
        if stated.freq > 1 {
            let keeping = (0..layers as usize).filter(|&l| stated.full(l)).count();
            r.read_as(format!(
                "index_topk_freq = {}, index_skip_topk_offset = {}: the indexer runs, and caches its key, in {keeping} \
                 of {layers} layers (layer i when max(i + 1 - {}, 0) is a multiple of {}, transformers' rule); the \
                 others reuse its top-k",
                stated.freq, stated.offset, stated.offset, stated.freq
            ));
        }
        return Ok(stated);
    };
    if full.first() == Some(&false) {
        r.read_as(format!(
            "{path}: layer 0 is marked shared but runs the indexer all the same (no earlier top-k to reuse)"
        ));
    }
    let keeping = full.iter().enumerate().filter(|&(l, &f)| l == 0 || f).count();
    let Some(step) = fit(&full) else {
        let spare = (full.len() - keeping) as u128 * u128::from(dim) * 2;
        r.warn(format!(
            "{path}: {keeping} of {layers} layers run the indexer, in an order no step and offset describe; the cache \
             figures count its key in every layer ({} B per token too many at 16 bits)",
            t(spare)
        ));
        return Ok(Step::EVERY_LAYER);
    };
    r.read_as(format!(
        "{path}: {keeping} of {layers} layers are full and cache the indexer's key (layer i when max(i + 1 - {}, 0) is \
         a multiple of {}); the shared ones reuse the last full layer's top-k and keep none",
        step.offset, step.freq
    ));
    if stated != step
        && (r.value_at("index_topk_freq").is_some() || r.value_at("text_config.index_topk_freq").is_some())
    {
        r.read_as(format!(
            "index_topk_freq and index_skip_topk_offset not used: {path} lists every layer, as transformers reads it"
        ));
    }
    Ok(step)
}

/// `index_topk_freq` and `index_skip_topk_offset`, with transformers' defaults.
fn stated_step(r: &mut Reader<'_>) -> Result<Step, ImportError> {
    let freq = to_u32("index_topk_freq", r.count(&["index_topk_freq"])?.unwrap_or(DEFAULT_FREQ).max(1))?;
    let offset = to_u32("index_skip_topk_offset", r.count(&["index_skip_topk_offset"])?.unwrap_or(DEFAULT_OFFSET))?;
    Ok(Step { freq, offset }.normalized())
}

/// `indexer_types`, else `index_topk_pattern`, as one flag per layer (true: full).
fn listed(r: &mut Reader<'_>, layers: u32) -> Result<Option<(String, Vec<bool>)>, ImportError> {
    let Some((path, v)) = r.find(&["indexer_types", "index_topk_pattern"]) else { return Ok(None) };
    let flags: Option<Vec<bool>> = match v {
        Value::Array(items) => items.iter().map(|x| kind(x.as_str()?)).collect(),
        Value::String(s) => s.chars().map(|c| kind(&c.to_string())).collect(),
        _ => None,
    };
    let flags =
        flags.ok_or_else(|| invalid(&path, format!("{} is not a list of \"full\"/\"shared\" (or F/S)", show(v))))?;
    if flags.len() != layers as usize {
        return Err(invalid(&path, format!("has {} entries for {layers} layers", flags.len())));
    }
    r.note_used(&path, v);
    Ok(Some((path, flags)))
}

fn kind(s: &str) -> Option<bool> {
    match s {
        "full" | "F" => Some(true),
        "shared" | "S" => Some(false),
        _ => None,
    }
}

/// The step and offset whose rule gives exactly `full` (layer 0 taken as full), if any. With an
/// offset the rule makes the first `offset` layers full, then every `freq`-th; with offset 0 layer
/// `freq - 1` is the first after layer 0. Each candidate follows from the list in one pass.
fn fit(full: &[bool]) -> Option<Step> {
    let runs = |l: usize| l == 0 || full[l];
    let n = full.len();
    let leading = (0..n).take_while(|&l| runs(l)).count();
    let next_after = |from: usize| (from..n).find(|&l| runs(l));
    let candidates = if leading == n {
        vec![Step::EVERY_LAYER]
    } else {
        // Past the list, any longer step fits: the shortest is taken.
        let from_leading = next_after(leading + 1).map_or(n - leading + 1, |l| l + 1 - leading);
        let from_zero = next_after(1).map_or(n + 1, |l| l + 1);
        vec![(from_leading, leading), (from_zero, 0)]
            .into_iter()
            .filter_map(|(freq, offset)| {
                Some(Step { freq: u32::try_from(freq).ok()?, offset: u32::try_from(offset).ok()? })
            })
            .map(Step::normalized)
            .collect()
    };
    candidates.into_iter().find(|&step| (0..n).all(|l| step.full(l) == runs(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Vec<bool> {
        s.chars().map(|c| c == 'F').collect()
    }

    #[test]
    fn the_rule_is_transformers_post_init() {
        // GlmMoeDsaConfig: "full" if max(i - offset + 1, 0) % freq == 0.
        let glm = Step { freq: 4, offset: 3 };
        let full: Vec<usize> = (0..78).filter(|&l| glm.full(l)).collect();
        assert_eq!(full[..6], [0, 1, 2, 6, 10, 14]);
        assert_eq!((full.len(), full.last()), (21, Some(&74)));
        // The defaults (freq 1, offset 2): every layer.
        assert!((0..78).all(|l| Step { freq: 1, offset: 2 }.full(l)));
        // Offset 0: after layer 0 (which has no top-k to reuse) the first full layer is freq - 1.
        assert_eq!((0..8).filter(|&l| Step { freq: 4, offset: 0 }.full(l)).collect::<Vec<_>>(), [0, 3, 7]);
    }

    #[test]
    fn a_list_is_fitted_to_its_step_and_offset_or_not_at_all() {
        assert_eq!(fit(&flags("FFFSSSFSSSF")), Some(Step { freq: 4, offset: 3 }));
        assert_eq!(fit(&flags("FFFF")), Some(Step::EVERY_LAYER));
        assert_eq!(fit(&flags("SSSFSSSF")), Some(Step { freq: 4, offset: 0 }));
        assert_eq!(fit(&flags("FSFS")), Some(Step { freq: 2, offset: 1 }));
        // Only the leading layers full: a step past the end.
        assert_eq!(fit(&flags("FFSS")), Some(Step { freq: 3, offset: 2 }));
        assert_eq!(fit(&flags("FSSFSF")), None);
        // Layer 0 runs the indexer whatever the list says: all shared is layer 0 alone.
        assert_eq!(fit(&flags("SSSS")), Some(Step { freq: 4, offset: 1 }));
        for s in ["FFFSSSFSSSF", "FSFS", "FFSS", "FSSFSSSF"] {
            let step = fit(&flags(s)).unwrap_or_else(|| panic!("{s}"));
            assert!(flags(s).iter().enumerate().all(|(l, &f)| step.full(l) == f), "{s}");
        }
    }
}
