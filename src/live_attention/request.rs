//! What a live-attention job computes: one layer of one model over some tokens, which heads, and
//! at which size each head's map comes back.

use std::sync::Arc;

use crate::attention::layer_inputs::{LayerInputs, LayerLayout};
use crate::attention::pooled::Pool;
use crate::model::Mask;

/// Heads at most this long (queries and keys) are drawn cell by cell with exact probabilities;
/// longer ones are pooled on the GPU to the size they take on screen.
pub const EXACT_MAX_N: u32 = 256;

/// Everything a computation depends on (compared to decide whether to start a new one). The
/// weights are synthetic (seeded by `seed`, with the designed heads when `teach`) unless `ids` is
/// given: then they are a loaded model's ([`super::Weights::Loaded`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub layout: LayerLayout,
    pub tokens: Arc<Vec<String>>,
    pub kv_tokens: Option<Arc<Vec<String>>>,
    pub seed: u64,
    pub teach: bool,
    pub mask: Mask,
    pub heads: Vec<u32>,
    pub pool: Pool,
    /// Cells per side each head's map comes back pooled to when it is too long to draw cell by cell
    /// (the explorer's thumbnails), and the same for the `focus` head (shown larger, at its own size).
    pub map_cells: u32,
    pub focus_cells: u32,
    /// A head computed again at `focus_cells`, beside the others.
    pub focus: Option<u32>,
    /// The trained model's token ids (its maps come from its forward pass, not from seeded weights).
    pub ids: Option<Arc<Vec<u32>>>,
}

impl Request {
    pub fn n_q(&self) -> u32 {
        self.tokens.len() as u32
    }
    pub fn n_kv(&self) -> u32 {
        self.kv_tokens.as_ref().map_or(self.tokens.len(), |t| t.len()) as u32
    }
    /// The one head a panel about a single head shows (the step-through, the backward view): the
    /// enlarged one (`focus`) when the layer has it, else the first head on display.
    pub fn shown_head(&self, focus: Option<u32>) -> Option<u32> {
        focus.filter(|&f| f < self.layout.n_q_heads).or_else(|| self.heads.first().copied())
    }

    /// Small enough to draw every cell.
    pub fn exact(&self) -> bool {
        self.n_q() <= EXACT_MAX_N && self.n_kv() <= EXACT_MAX_N
    }

    /// Every head's inputs for this request: the layer's layout, the tokens, the seeded weights.
    pub fn inputs(&self) -> LayerInputs {
        LayerInputs::new(
            self.layout.clone(),
            self.tokens.as_ref().clone(),
            self.kv_tokens.as_ref().map(|t| t.as_ref().clone()),
            self.seed,
            self.teach,
        )
    }
}
