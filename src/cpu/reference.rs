//! The attention kernels' CPU twins under the names the engine and the views use: each lives in
//! `crate::cpu`, one file per kernel, beside the twins of the language model's kernels.

pub use crate::cpu::flash_attention::{Forward, flash_attention, flash_attention_row};
pub use crate::cpu::pool_rows::pool_rows;
pub use crate::cpu::row_softmax::{row_softmax, row_softmax_row};
