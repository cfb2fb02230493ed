//! What the hand-drawn SVG charts show and where it goes: the data of a line chart (series,
//! reference lines, ticks, titles) and the geometry that places it in a fixed 720 × 340 view box.
//! The scales and ticks come from [`crate::model::plot`]; `ui/chart.rs` only draws.

use crate::model::plot::Scale;

/// The SVG's view box.
pub const WIDTH: f64 = 720.0;
pub const HEIGHT: f64 = 340.0;
/// Margins of the plot area inside the view box (room for tick labels and axis titles).
pub const LEFT: f64 = 74.0;
pub const RIGHT: f64 = 16.0;
pub const TOP: f64 = 14.0;
pub const BOTTOM: f64 = 44.0;
/// The y of the x axis.
pub const AXIS_Y: f64 = HEIGHT - BOTTOM;

/// One line: `points` in data units, drawn with CSS class `class` (which sets its colour).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub class: &'static str,
    pub points: Vec<(f64, f64)>,
}

/// A reference line across the plot (a budget) or up it (a context), labelled.
#[derive(Clone, Debug, PartialEq)]
pub struct RefLine {
    pub value: f64,
    pub label: String,
    pub class: &'static str,
}

/// Everything a line chart shows.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChartData {
    pub x: Scale,
    pub y: Scale,
    pub x_ticks: Vec<(f64, String)>,
    pub y_ticks: Vec<(f64, String)>,
    pub series: Vec<Series>,
    /// Horizontal lines at a y value.
    pub h_lines: Vec<RefLine>,
    /// Vertical lines at an x value.
    pub v_lines: Vec<RefLine>,
    pub x_title: String,
    pub y_title: String,
    /// A sentence describing the chart for screen readers.
    pub description: String,
}

/// The view-box x of data value `v`.
pub fn x_px(scale: &Scale, v: f64) -> f64 {
    LEFT + scale.fraction(v) * (WIDTH - LEFT - RIGHT)
}

/// The view-box y of data value `v` (SVG y grows downwards).
pub fn y_px(scale: &Scale, v: f64) -> f64 {
    HEIGHT - BOTTOM - scale.fraction(v) * (HEIGHT - TOP - BOTTOM)
}

/// The SVG path (`M x y L x y ...`) through `points`, to a tenth of a unit.
pub fn path_d(data: &LineChartData, points: &[(f64, f64)]) -> String {
    let mut d = String::with_capacity(points.len() * 16);
    for (i, &(x, y)) in points.iter().enumerate() {
        d.push_str(if i == 0 { "M" } else { " L" });
        d.push_str(&format!("{:.1} {:.1}", x_px(&data.x, x), y_px(&data.y, y)));
    }
    d
}

/// Where a label beside a point at view-box `x` goes: to its left (`end`) in the right half of the
/// chart, to its right otherwise, `gap` units away, so it never runs off the edge.
pub fn label_side(x: f64, gap: f64) -> (&'static str, f64) {
    if x > WIDTH / 2.0 { ("end", -gap) } else { ("start", gap) }
}

/// The y of the `index`-th vertical line's label: staggered, so labels of close lines do not overlap.
pub fn v_label_y(index: usize) -> f64 {
    TOP + 12.0 + 14.0 * index as f64
}

/// A bar's width in percent of its track, for a `fraction` that may be out of range or not finite.
pub fn bar_percent(fraction: f64) -> f64 {
    if fraction.is_finite() { (fraction * 100.0).clamp(0.0, 100.0) } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::plot::Axis;

    fn data(x: Scale, y: Scale) -> LineChartData {
        LineChartData {
            x,
            y,
            x_ticks: vec![],
            y_ticks: vec![],
            series: vec![],
            h_lines: vec![],
            v_lines: vec![],
            x_title: String::new(),
            y_title: String::new(),
            description: String::new(),
        }
    }

    #[test]
    fn the_plot_area_spans_the_margins() {
        let s = Scale::new(Axis::Linear, 0.0, 100.0);
        // x: 74 at the minimum, 720 − 16 = 704 at the maximum, halfway 74 + 630 / 2 = 389.
        assert_eq!((x_px(&s, 0.0), x_px(&s, 100.0), x_px(&s, 50.0)), (74.0, 704.0, 389.0));
        // y: 340 − 44 = 296 at the minimum, 14 at the maximum.
        assert_eq!((y_px(&s, 0.0), y_px(&s, 100.0)), (AXIS_Y, TOP));
        // Out-of-range values clamp to the edges.
        assert_eq!((x_px(&s, -5.0), y_px(&s, 1e9)), (LEFT, TOP));
    }

    #[test]
    fn paths_go_through_every_point() {
        let d = data(Scale::new(Axis::Linear, 0.0, 100.0), Scale::new(Axis::Log, 1.0, 100.0));
        // Log y: 10 is halfway between 1 and 100, so 296 − 282 / 2 = 155.
        assert_eq!(path_d(&d, &[(0.0, 1.0), (50.0, 10.0), (100.0, 100.0)]), "M74.0 296.0 L389.0 155.0 L704.0 14.0");
        assert_eq!(path_d(&d, &[]), "");
    }

    #[test]
    fn labels_stay_inside_and_bars_in_their_track() {
        assert_eq!(label_side(100.0, 4.0), ("start", 4.0));
        assert_eq!(label_side(500.0, 8.0), ("end", -8.0));
        assert_eq!((v_label_y(0), v_label_y(2)), (26.0, 54.0));
        assert_eq!(
            (bar_percent(0.25), bar_percent(1.5), bar_percent(-1.0), bar_percent(f64::NAN)),
            (25.0, 100.0, 0.0, 0.0)
        );
    }
}
