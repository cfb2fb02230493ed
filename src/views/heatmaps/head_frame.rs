//! Where one head's heatmap sits on screen (its cells and their size in CSS pixels), which cell the
//! pointer is over, where the read-out goes, and what the figure says of its map (in words and in the
//! attributes the browser tests read).

use super::head_map::HeadMap;
use super::request::PROBS_ATTR_MAX_CELLS;

/// Labels are drawn only when a cell is at least this tall on screen.
const MIN_LABEL_CELL_PX: f64 = 10.0;

/// Where a map sits on screen: its cells and their size in CSS pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    pub rows: u32,
    pub cols: u32,
    pub css_w: f64,
    pub css_h: f64,
    pub cell: f64,
}

impl Frame {
    /// `rows` by `cols` cells whose longer side is `size_px`.
    pub fn of(rows: u32, cols: u32, size_px: f64) -> Self {
        let longest = rows.max(cols).max(1) as f64;
        Self {
            rows,
            cols,
            css_w: size_px * cols as f64 / longest,
            css_h: size_px * rows as f64 / longest,
            cell: size_px / longest,
        }
    }

    /// The cell `(row, col)` under a pointer at `(x, y)` CSS pixels from the plot's corner, if any.
    pub fn cell_at(&self, x_px: i32, y_px: i32) -> Option<(u32, u32)> {
        let row = (f64::from(y_px.max(0)) / self.css_h * self.rows as f64) as u32;
        let col = (f64::from(x_px.max(0)) / self.css_w * self.cols as f64) as u32;
        (row < self.rows && col < self.cols).then_some((row, col))
    }

    /// Whether token labels fit beside the cells.
    pub fn shows_labels(&self) -> bool {
        self.cell >= MIN_LABEL_CELL_PX
    }

    /// The body's style: the cell size and the labels' font size the style sheet reads.
    pub fn body_style(&self) -> String {
        format!("--cell: {}px; --label-font: {}px", self.cell, (self.cell * 0.7).clamp(9.0, 13.0))
    }

    /// The canvas's size on screen.
    pub fn canvas_style(&self) -> String {
        format!("width: {}px; height: {}px", self.css_w, self.css_h)
    }

    /// The read-out of cell `(row, col)`: just right of the cell (kept inside the plot), level with it.
    pub fn tooltip_style(&self, row: u32, col: u32) -> String {
        let left = ((col + 1) as f64 * self.css_w / self.cols as f64 + 6.0).min(self.css_w);
        format!("left: {}px; top: {}px", left, row as f64 * self.css_h / self.rows as f64)
    }
}

/// What a map shows, in words: its cells, and what they were pooled from.
pub fn shape_text(m: &HeadMap) -> String {
    match m.pooled {
        Some(p) => format!("{} pooled {} x {} from {} x {}", p.name(), m.rows, m.cols, m.n_q, m.n_kv),
        None => format!("{} queries by {} keys", m.rows, m.cols),
    }
}

/// A small map's values as an attribute (`data-probs` when exact, `data-pooled` when pooled); none
/// for the other kind or for a map too large to write into the page.
pub fn values_attr(m: &HeadMap, pooled: bool) -> Option<String> {
    (m.pooled.is_some() == pooled && m.values.len() <= PROBS_ATTR_MAX_CELLS)
        .then(|| m.values.iter().map(f32::to_string).collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::attention::pooled::Pool;
    use crate::model::Mask;

    fn map(values: Vec<f32>, rows: u32, cols: u32, n: u32, pooled: Option<Pool>) -> HeadMap {
        crate::views::heatmaps::head_map::tests::map(values, rows, cols, n, pooled, Mask::Causal)
    }

    #[test]
    fn the_longer_side_fills_the_size_and_cells_stay_square() {
        // 2 queries by 4 keys in 160 px: cells of 40 px, 160 x 80.
        let f = Frame::of(2, 4, 160.0);
        assert_eq!((f.css_w, f.css_h, f.cell), (160.0, 80.0, 40.0));
        assert_eq!(f.canvas_style(), "width: 160px; height: 80px");
        // 40 px cells: labels at 0.7 of that, at most 13 px.
        assert_eq!(f.body_style(), "--cell: 40px; --label-font: 13px");
        assert!(f.shows_labels());
        assert!(!Frame::of(512, 512, 640.0).shows_labels());
        assert_eq!(Frame::of(0, 0, 100.0).cell, 100.0);
    }

    #[test]
    fn the_pointer_finds_its_cell_and_the_read_out_stays_inside() {
        let f = Frame::of(2, 4, 160.0);
        assert_eq!(f.cell_at(0, 0), Some((0, 0)));
        assert_eq!(f.cell_at(-5, 79), Some((1, 0)));
        assert_eq!(f.cell_at(159, 41), Some((1, 3)));
        assert_eq!(f.cell_at(160, 0), None);
        assert_eq!(f.cell_at(0, 80), None);
        // Right of column 0 (40 + 6 px); the last column's read-out is held at the plot's edge.
        assert_eq!(f.tooltip_style(1, 0), "left: 46px; top: 40px");
        assert_eq!(f.tooltip_style(0, 3), "left: 160px; top: 0px");
    }

    #[test]
    fn a_map_says_what_it_shows_and_writes_small_values_where_tests_read_them() {
        let exact = map(vec![1.0, 0.0, 0.25, 0.75], 2, 2, 2, None);
        assert_eq!(shape_text(&exact), "2 queries by 2 keys");
        assert_eq!(values_attr(&exact, false).as_deref(), Some("1,0,0.25,0.75"));
        assert_eq!(values_attr(&exact, true), None);
        let pooled = map(vec![0.8, 0.0, 0.0, 0.4], 2, 2, 4, Some(Pool::Max));
        assert_eq!(shape_text(&pooled), "max pooled 2 x 2 from 4 x 4");
        assert_eq!(values_attr(&pooled, true).as_deref(), Some("0.8,0,0,0.4"));
        let large = PROBS_ATTR_MAX_CELLS + 1;
        assert_eq!(values_attr(&map(vec![0.0; large], 1, large as u32, 1, None), false), None);
    }
}
