//! The models the app knows: by name ([`presets`], the published layouts and the model trained here)
//! and from a file ([`hf_import`], a Hugging Face `config.json`). Each comes with words on where its
//! figures came from (a preset's fields and notes, the import report), which is why this floor sits
//! above `model/`, whose arithmetic says nothing to the page.

pub mod hf_import;
pub mod presets;

#[cfg(test)]
mod import_families_tests;
#[cfg(test)]
mod import_files_tests;
#[cfg(test)]
mod import_hybrids_tests;
#[cfg(test)]
mod import_params_tests;
#[cfg(test)]
mod import_verbatim_cache_tests;
#[cfg(test)]
mod import_verbatim_tests;
#[cfg(test)]
mod import_verbatim_vendor_tests;

pub use hf_import::{ImportError, ImportReport, Imported, import_hf_config, import_hf_value, parse_config_json};
pub use presets::{Preset, all_presets, preset, preset_info};
