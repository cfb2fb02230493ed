//! The model this project trains and ships (`www/models/attention-lab-tiny/`): the only preset with
//! real weights. Its layout is read from its own `config.json` by the same importer users' configs
//! go through, so the KV and compare views show it like any other model.

use super::row::Preset;
use crate::catalog::hf_import::import_hf_config;

/// Its preset id (URL `model=`), the first entry of the model picker.
pub const TRAINED_ID: &str = "attention-lab-tiny";

/// Where the page fetches its files, relative to the page (build.sh copies them into `dist/`).
pub const TRAINED_DIR: &str = "www/models/attention-lab-tiny";

/// The files the page fetches when the model is chosen, and their sizes in bytes (a test checks
/// them against the files, so the page can say what it downloads before it does).
pub const TRAINED_FILES: [(&str, u64); 3] =
    [("config.json", 688), ("tokenizer.json", 107_706), ("model.safetensors", 4_926_960)];

const CONFIG_JSON: &str = include_str!("../../../www/models/attention-lab-tiny/config.json");

/// The preset record, its model imported from the shipped `config.json`.
pub(super) fn trained_preset() -> Preset {
    let mut model = match import_hf_config(CONFIG_JSON) {
        Ok(imported) => imported.model,
        // The file is part of the build and a test imports it; a damaged copy shows a one-layer model.
        Err(_) => crate::model::Model::simple(1, 192, 8),
    };
    model.id = TRAINED_ID.to_string();
    model.name = "Attention Lab tiny".to_string();
    Preset {
        id: TRAINED_ID,
        display_name: "Attention Lab tiny (trained here: real weights)",
        model,
        fields: &["config.json of www/models/attention-lab-tiny, read by the Hugging Face importer"],
        notes: "A 2.5M-parameter Qwen2-layout model this project trained itself; the other presets are \
                real layouts with synthetic weights.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(file: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(TRAINED_DIR).join(file)
    }

    #[test]
    fn the_files_the_page_fetches_have_the_sizes_it_announces() {
        for (name, bytes) in TRAINED_FILES {
            assert_eq!(std::fs::metadata(shipped(name)).unwrap().len(), bytes, "{name}");
        }
        // The download budget: at most 6 MB.
        assert!(TRAINED_FILES.iter().map(|(_, b)| b).sum::<u64>() <= 6_000_000);
    }
}
