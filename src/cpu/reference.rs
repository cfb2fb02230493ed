//! The attention kernels' CPU twins under the names the engine and the views use: each lives in its
//! own file here, beside the twins of the language model's kernels.

pub use super::flash_attention::{Forward, flash_attention, flash_attention_row};
pub use super::pool_rows::pool_rows;
pub use super::row_softmax::{row_softmax, row_softmax_row};
