//! Published models by id (the DESIGN.md contract). Values are those of the models' Hugging Face
//! `config.json` files (text towers only); Gemma 4 figures follow seed 004's table and the public
//! Gemma 4 configs. Where a value is uncertain or a simplification, the preset's `notes` say so.
//!
//! `table` holds one row per model; `row` says what a row holds and turns it into a [`Model`];
//! `fields` lists the config fields each row's values come from.

mod fields;
mod row;
mod table;
mod trained;

use std::sync::OnceLock;

use crate::model::config::Model;
pub use row::Preset;
pub use trained::{TRAINED_DIR, TRAINED_FILES, TRAINED_ID};

/// Every preset id, in menu order: the trained model first, then the published layouts.
pub const PRESET_IDS: [&str; 17] = [
    "attention-lab-tiny",
    "transformer-base",
    "gpt2-small",
    "llama-2-7b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3.1-8b",
    "llama-3-70b",
    "llama-4-maverick",
    "llama-4-scout",
    "mistral-7b",
    "qwen3-8b",
    "gemma-3-27b",
    "gemma-4-12b",
    "gemma-4-e4b",
    "deepseek-v2",
    "deepseek-v3",
];

/// All presets, built once.
pub fn all_presets() -> &'static [Preset] {
    static PRESETS: OnceLock<Vec<Preset>> = OnceLock::new();
    PRESETS.get_or_init(|| {
        std::iter::once(trained::trained_preset()).chain(table::ROWS.iter().map(row::Row::preset)).collect()
    })
}

/// The model of preset `id`, if there is one.
pub fn preset(id: &str) -> Option<&'static Model> {
    preset_info(id).map(|p| &p.model)
}

/// The whole preset record of `id`.
pub fn preset_info(id: &str) -> Option<&'static Preset> {
    all_presets().iter().find(|p| p.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_id_has_a_valid_preset() {
        assert_eq!(all_presets().len(), PRESET_IDS.len());
        for id in PRESET_IDS {
            let p = preset_info(id).unwrap_or_else(|| panic!("missing preset {id}"));
            assert_eq!(p.id, id);
            assert_eq!(p.model.id, id);
            assert!(!p.display_name.is_empty() && !p.fields.is_empty());
            assert_eq!(p.model.validate(), Ok(()), "{id}");
        }
        assert!(preset("gpt-5").is_none());
    }
}
