//! One head's attention as the heatmaps show it: every probability, or blocks of them pooled by max or
//! mean, with what a hover says about a cell and the RGBA pixels of the picture.

use crate::attention::pooled::block_range;
use crate::attention::teaching_heads::TeachingHead;
use crate::attention::tokens::display_token;
use crate::colormap::{ColorScale, Painter};
pub use crate::live_attention::head_map::HeadMap;

/// Colour of cells the mask hides (distinct from a probability of zero).
pub const MASKED_RGB: [u8; 3] = [226, 228, 233];

impl HeadMap {
    pub fn max(&self) -> f32 {
        self.values.iter().copied().fold(0.0, f32::max)
    }

    /// Query rows and key columns a cell covers.
    pub fn cell_ranges(&self, row: u32, col: u32) -> ((u32, u32), (u32, u32)) {
        (block_range(row, self.rows, self.n_q), block_range(col, self.cols, self.n_kv))
    }

    /// Whether the mask hides every pair of the cell.
    pub fn cell_masked(&self, row: u32, col: u32) -> bool {
        let (r, c) = self.cell_ranges(row, col);
        !self.mask.block_visible(self.q_offset, self.n_kv, r, c)
    }

    /// The label of the head: its index, KV head and designed role, or the labels its measured
    /// scores earn.
    pub fn caption(&self) -> String {
        let mut roles: Vec<&str> = self.teaching.map(TeachingHead::id).into_iter().collect();
        roles.extend(self.scores.map(|s| s.labels()).unwrap_or_default());
        let mut caption = format!("Head {} · KV {}", self.head, self.kv_head);
        for role in roles {
            caption.push_str(" · ");
            caption.push_str(role);
        }
        caption
    }

    /// Tokens along one axis for the cells (the first token of each block when pooled).
    pub fn axis_tokens(&self, rows: bool) -> Vec<String> {
        let (cells, n, tokens) =
            if rows { (self.rows, self.n_q, &self.row_tokens) } else { (self.cols, self.n_kv, &self.col_tokens) };
        (0..cells).map(|c| tokens.get(block_range(c, cells, n).0 as usize).cloned().unwrap_or_default()).collect()
    }

    /// What the read-out says about a cell.
    pub fn describe_cell(&self, row: u32, col: u32) -> String {
        let v = self.values[(row * self.cols + col) as usize];
        let ((i_a, i_b), (j_a, j_b)) = self.cell_ranges(row, col);
        match self.pooled {
            None => {
                let shown =
                    if self.mask.visible(self.q_offset + row, col) { format!("p = {v:.4}") } else { "masked".into() };
                format!(
                    "query “{}” ({row}) → key “{}” ({col}): {shown}",
                    display_token(&self.row_tokens[row as usize]),
                    display_token(&self.col_tokens[col as usize])
                )
            }
            Some(pool) => {
                let shown =
                    if self.cell_masked(row, col) { "masked".into() } else { format!("{} p = {v:.4}", pool.name()) };
                format!("queries {i_a}–{} → keys {j_a}–{}: {shown}", i_b - 1, j_b - 1)
            }
        }
    }

    /// The picture: one RGBA pixel per cell, row by row, as 32-bit words in memory order (their bytes
    /// are R, G, B, A), each head coloured from 0 to its own largest value.
    pub fn pixels(&self, scale: ColorScale) -> Vec<u32> {
        let painter = Painter::new(scale, self.max());
        let masked = u32::from_ne_bytes([MASKED_RGB[0], MASKED_RGB[1], MASKED_RGB[2], 255]);
        let cols = self.cols.max(1) as usize;
        let mut words = vec![masked; self.values.len()];
        for (row, (values, out)) in self.values.chunks_exact(cols).zip(words.chunks_exact_mut(cols)).enumerate() {
            let row = row as u32;
            match self.pooled {
                // An exact row's visible keys are one range: only those are looked up.
                None => {
                    let (lo, hi) = self.mask.key_range(self.q_offset + row, self.n_kv);
                    let hi = (hi as usize).min(cols);
                    let lo = (lo as usize).min(hi);
                    for (px, &v) in out[lo..hi].iter_mut().zip(&values[lo..hi]) {
                        *px = painter.word(v);
                    }
                }
                Some(_) => {
                    for (col, (px, &v)) in out.iter_mut().zip(values).enumerate() {
                        if v != 0.0 || !self.cell_masked(row, col as u32) {
                            *px = painter.word(v);
                        }
                    }
                }
            }
        }
        words
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::attention::pooled::Pool;
    use crate::colormap::viridis;
    use crate::lm::head_scores::HeadScores;
    use crate::model::Mask;
    use std::sync::Arc;

    /// A head's map of `rows` × `cols` values over `n` tokens named t0, t1, ... (head 3, KV head 1).
    pub(crate) fn map(values: Vec<f32>, rows: u32, cols: u32, n: u32, pooled: Option<Pool>, mask: Mask) -> HeadMap {
        let tokens = Arc::new((0..n).map(|i| format!("t{i}")).collect::<Vec<_>>());
        HeadMap {
            head: 3,
            kv_head: 1,
            teaching: None,
            rows,
            cols,
            values,
            pooled,
            n_q: n,
            n_kv: n,
            row_tokens: tokens.clone(),
            col_tokens: tokens,
            mask,
            q_offset: 0,
            scores: None,
        }
    }

    fn rgb(word: u32) -> [u8; 3] {
        let [r, g, b, a] = word.to_ne_bytes();
        assert_eq!(a, 255);
        [r, g, b]
    }

    #[test]
    fn exact_pixels_grey_out_what_the_mask_hides() {
        // Causal 3 x 3: row 0 sees key 0, row 1 keys 0-1, row 2 all. The largest value (0.5) is the top
        // of the scale, 0 its bottom, 0.25 its middle.
        let m = map(vec![0.5, 0.0, 0.0, 0.25, 0.25, 0.0, 0.0, 0.5, 0.5], 3, 3, 3, None, Mask::Causal);
        let px: Vec<[u8; 3]> = m.pixels(ColorScale::Linear).into_iter().map(rgb).collect();
        let (top, bottom, grey) = (viridis(1.0), viridis(0.0), MASKED_RGB);
        let middle = rgb(Painter::new(ColorScale::Linear, 0.5).word(0.25));
        assert_eq!(px, vec![top, grey, grey, middle, middle, grey, bottom, top, top]);
    }

    #[test]
    fn pooled_pixels_grey_only_blocks_the_mask_hides_whole() {
        // Causal 4 x 4 pooled to 2 x 2: the top-right block (queries 0-1, keys 2-3) is hidden; the
        // bottom-left holds a zero it can see, which stays a colour.
        let m = map(vec![0.8, 0.0, 0.0, 0.4], 2, 2, 4, Some(Pool::Max), Mask::Causal);
        let px: Vec<[u8; 3]> = m.pixels(ColorScale::Linear).into_iter().map(rgb).collect();
        let middle = rgb(Painter::new(ColorScale::Linear, 0.8).word(0.4));
        assert_eq!(px, vec![viridis(1.0), MASKED_RGB, viridis(0.0), middle]);
    }

    #[test]
    fn read_out_names_tokens_and_blocks() {
        let m = map(vec![1.0, 0.0, 0.3, 0.7], 2, 2, 2, None, Mask::Causal);
        assert_eq!(m.describe_cell(1, 0), "query “t1” (1) → key “t0” (0): p = 0.3000");
        assert_eq!(m.describe_cell(0, 1), "query “t0” (0) → key “t1” (1): masked");
        let pooled = map(vec![0.9, 0.0, 0.2, 0.6], 2, 2, 6, Some(Pool::Mean), Mask::Causal);
        assert_eq!(pooled.describe_cell(1, 0), "queries 3–5 → keys 0–2: mean p = 0.2000");
        assert_eq!(pooled.describe_cell(0, 1), "queries 0–2 → keys 3–5: masked");
        assert_eq!(pooled.caption(), "Head 3 · KV 1");
        let scores = HeadScores { previous: Some(0.8), induction: None, sink: Some(0.1), local: Some(0.95) };
        let trained = HeadMap { scores: Some(scores), ..pooled.clone() };
        assert_eq!(trained.caption(), "Head 3 · KV 1 · previous-token · local");
        let designed = HeadMap { teaching: Some(TeachingHead::PreviousToken), ..pooled.clone() };
        assert_eq!(designed.caption(), "Head 3 · KV 1 · previous-token");
        assert_eq!(pooled.axis_tokens(true), vec!["t0", "t3"]);
    }
}
