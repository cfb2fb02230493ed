//! One head's attention as live attention hands it out: every probability, or blocks of them pooled
//! by max or mean, with the tokens along its axes. How a view draws and describes it is the view's
//! (the explorer's `impl HeadMap` is in `views/heatmaps/head_map.rs`).

use std::sync::Arc;

use crate::attention::pooled::Pool;
use crate::attention::teaching_heads::TeachingHead;
use crate::lm::head_scores::HeadScores;
use crate::model::Mask;

/// The probabilities of one query head: every cell (`pooled == None`, `rows = n_q`, `cols = n_kv`) or
/// `rows x cols` blocks of the `n_q x n_kv` matrix pooled by max or mean.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadMap {
    pub head: u32,
    pub kv_head: u32,
    pub teaching: Option<TeachingHead>,
    pub rows: u32,
    pub cols: u32,
    pub values: Vec<f32>,
    pub pooled: Option<Pool>,
    pub n_q: u32,
    pub n_kv: u32,
    pub row_tokens: Arc<Vec<String>>,
    pub col_tokens: Arc<Vec<String>>,
    pub mask: Mask,
    /// Absolute position of query row 0 (queries are the last rows of the keys).
    pub q_offset: u32,
    /// What a trained head's attention measures on the shown text (`None` for synthetic weights,
    /// whose scores would say nothing about any model).
    pub scores: Option<HeadScores>,
}
