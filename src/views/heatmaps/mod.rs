//! The heatmap explorer (`view=heatmaps`), native: its link parameters, what it computes for them,
//! how a head's picture looks and what it says (live attention, `crate::live_attention`, computes it).

pub mod checkpoint_files;
pub mod controls;
pub mod entropy;
pub mod explorer_page;
pub mod flash_trace;
pub mod head_frame;
pub mod head_map;
pub mod head_mix;
pub mod input_mode;
pub mod npy;
pub mod params;
pub mod reach;
pub mod request;
pub mod rope;
pub mod step_through;
pub mod tile_grid;
pub mod trained;
pub mod trained_facts;
