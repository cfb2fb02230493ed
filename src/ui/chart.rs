//! Small hand-written SVG charts: a line chart with reference lines and a moving marker, and a bar
//! track. No chart library: the scales and ticks come from [`crate::model::plot`], this file only
//! draws. All labels are text nodes.

use leptos::prelude::*;

use crate::model::plot::Scale;

/// Drawing area inside the SVG's 720 × 340 view box.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 340.0;
const LEFT: f64 = 74.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 44.0;

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

fn px(scale: &Scale, v: f64) -> f64 {
    LEFT + scale.fraction(v) * (WIDTH - LEFT - RIGHT)
}

fn py(scale: &Scale, v: f64) -> f64 {
    HEIGHT - BOTTOM - scale.fraction(v) * (HEIGHT - TOP - BOTTOM)
}

fn path(data: &LineChartData, points: &[(f64, f64)]) -> String {
    let mut d = String::with_capacity(points.len() * 16);
    for (i, &(x, y)) in points.iter().enumerate() {
        d.push_str(if i == 0 { "M" } else { " L" });
        d.push_str(&format!("{:.1} {:.1}", px(&data.x, x), py(&data.y, y)));
    }
    d
}

/// A line chart. `marker` is an optional moving point `(x, y, label)` (the decode animation's
/// position on the total curve); only it re-renders as it moves.
#[component]
pub fn LineChart(
    data: LineChartData,
    #[prop(into)] marker: Signal<Option<(f64, f64, String)>>,
    testid: &'static str,
) -> impl IntoView {
    let x_scale = data.x;
    let y_scale = data.y;
    let axis_y = HEIGHT - BOTTOM;
    let grid = data
        .y_ticks
        .iter()
        .map(|(v, label)| {
            let y = py(&y_scale, *v);
            view! {
                <line class="grid" x1=LEFT x2=WIDTH - RIGHT y1=y y2=y/>
                <text class="tick" x=LEFT - 6.0 y=y + 4.0 text-anchor="end">{label.clone()}</text>
            }
        })
        .collect_view();
    let x_ticks = data
        .x_ticks
        .iter()
        .map(|(v, label)| {
            let x = px(&x_scale, *v);
            view! {
                <line class="grid" x1=x x2=x y1=TOP y2=axis_y/>
                <text class="tick" x=x y=axis_y + 16.0 text-anchor="middle">{label.clone()}</text>
            }
        })
        .collect_view();
    let lines = data
        .series
        .iter()
        .map(|s| view! { <path class=format!("series {}", s.class) d=path(&data, &s.points)><title>{s.label.clone()}</title></path> })
        .collect_view();
    let h_lines = data
        .h_lines
        .iter()
        .map(|l| {
            let y = py(&y_scale, l.value);
            view! {
                <line class=format!("ref {}", l.class) x1=LEFT x2=WIDTH - RIGHT y1=y y2=y/>
                <text class=format!("ref-label {}", l.class) x=WIDTH - RIGHT - 4.0 y=y - 5.0 text-anchor="end">{l.label.clone()}</text>
            }
        })
        .collect_view();
    let v_lines = data
        .v_lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let x = px(&x_scale, l.value);
            // Labels sit on the left of their line when it is in the right half, and stagger.
            let (anchor, dx) = if x > WIDTH / 2.0 { ("end", -4.0) } else { ("start", 4.0) };
            view! {
                <line class=format!("ref {}", l.class) x1=x x2=x y1=TOP y2=axis_y/>
                <text class=format!("ref-label {}", l.class) x=x + dx y=TOP + 12.0 + 14.0 * i as f64 text-anchor=anchor>{l.label.clone()}</text>
            }
        })
        .collect_view();
    let legend = data
        .series
        .iter()
        .map(|s| view! { <li><span class=format!("swatch {}", s.class)></span>{s.label.clone()}</li> })
        .collect_view();
    let moving = move || {
        marker.get().map(|(x, y, label)| {
            let (cx, cy) = (px(&x_scale, x), py(&y_scale, y));
            let anchor = if cx > WIDTH / 2.0 { "end" } else { "start" };
            let dx = if cx > WIDTH / 2.0 { -8.0 } else { 8.0 };
            view! {
                <circle class="marker" cx=cx cy=cy r="5"/>
                <text class="marker-label" x=cx + dx y=cy - 8.0 text-anchor=anchor>{label}</text>
            }
        })
    };
    view! {
        <figure class="line-chart" data-testid=testid>
            <svg viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img" aria-label=data.description.clone()>
                {grid}
                {x_ticks}
                <line class="axis" x1=LEFT x2=WIDTH - RIGHT y1=axis_y y2=axis_y/>
                <line class="axis" x1=LEFT x2=LEFT y1=TOP y2=axis_y/>
                {lines}
                {h_lines}
                {v_lines}
                {moving}
                <text class="axis-title" x=(LEFT + WIDTH - RIGHT) / 2.0 y=HEIGHT - 6.0 text-anchor="middle">{data.x_title.clone()}</text>
                <text class="axis-title" x="14" y=(TOP + axis_y) / 2.0 text-anchor="middle"
                    transform=format!("rotate(-90 14 {})", (TOP + axis_y) / 2.0)>{data.y_title.clone()}</text>
            </svg>
            <ul class="chart-legend">{legend}</ul>
        </figure>
    }
}

/// A horizontal bar filling `fraction` (0..=1) of its track, for tables of sizes.
#[component]
pub fn BarTrack(fraction: f64, class: &'static str) -> impl IntoView {
    let percent = if fraction.is_finite() { (fraction * 100.0).clamp(0.0, 100.0) } else { 0.0 };
    view! {
        <span class="bar-track" aria-hidden="true">
            <span class=format!("bar-fill {class}") style=format!("width: {percent:.2}%")></span>
        </span>
    }
}
