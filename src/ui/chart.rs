//! Small hand-written SVG charts: a line chart with reference lines and a moving marker, and a bar
//! track. No chart library: the data and geometry come from [`crate::views::chart`], this file only
//! draws. All labels are text nodes.

use leptos::prelude::*;

use crate::views::chart::{
    AXIS_Y, HEIGHT, LEFT, LineChartData, RIGHT, TOP, WIDTH, bar_percent, label_side, path_d, v_label_y, x_px, y_px,
};

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
    let lines = data
        .series
        .iter()
        .map(|s| view! { <path class=format!("series {}", s.class) d=path_d(&data, &s.points)><title>{s.label.clone()}</title></path> })
        .collect_view();
    let legend = data
        .series
        .iter()
        .map(|s| view! { <li><span class=format!("swatch {}", s.class)></span>{s.label.clone()}</li> })
        .collect_view();
    let moving = move || {
        marker.get().map(|(x, y, label)| {
            let (cx, cy) = (x_px(&x_scale, x), y_px(&y_scale, y));
            let (anchor, dx) = label_side(cx, 8.0);
            view! {
                <circle class="marker" cx=cx cy=cy r="5"/>
                <text class="marker-label" x=cx + dx y=cy - 8.0 text-anchor=anchor>{label}</text>
            }
        })
    };
    view! {
        <figure class="line-chart" data-testid=testid>
            <svg viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img" aria-label=data.description.clone()>
                {y_grid(&data)}
                {x_ticks(&data)}
                <line class="axis" x1=LEFT x2=WIDTH - RIGHT y1=AXIS_Y y2=AXIS_Y/>
                <line class="axis" x1=LEFT x2=LEFT y1=TOP y2=AXIS_Y/>
                {lines}
                {h_lines(&data)}
                {v_lines(&data)}
                {moving}
                <text class="axis-title" x=(LEFT + WIDTH - RIGHT) / 2.0 y=HEIGHT - 6.0 text-anchor="middle">{data.x_title.clone()}</text>
                <text class="axis-title" x="14" y=(TOP + AXIS_Y) / 2.0 text-anchor="middle"
                    transform=format!("rotate(-90 14 {})", (TOP + AXIS_Y) / 2.0)>{data.y_title.clone()}</text>
            </svg>
            <ul class="chart-legend">{legend}</ul>
        </figure>
    }
}

/// The horizontal grid lines with their value labels.
fn y_grid(data: &LineChartData) -> impl IntoView + use<> {
    data.y_ticks
        .iter()
        .map(|(v, label)| {
            let y = y_px(&data.y, *v);
            view! {
                <line class="grid" x1=LEFT x2=WIDTH - RIGHT y1=y y2=y/>
                <text class="tick" x=LEFT - 6.0 y=y + 4.0 text-anchor="end">{label.clone()}</text>
            }
        })
        .collect_view()
}

/// The vertical grid lines with their labels under the axis.
fn x_ticks(data: &LineChartData) -> impl IntoView + use<> {
    data.x_ticks
        .iter()
        .map(|(v, label)| {
            let x = x_px(&data.x, *v);
            view! {
                <line class="grid" x1=x x2=x y1=TOP y2=AXIS_Y/>
                <text class="tick" x=x y=AXIS_Y + 16.0 text-anchor="middle">{label.clone()}</text>
            }
        })
        .collect_view()
}

/// Horizontal reference lines (a budget, a limit), labelled at the right.
fn h_lines(data: &LineChartData) -> impl IntoView + use<> {
    data.h_lines
        .iter()
        .map(|l| {
            let y = y_px(&data.y, l.value);
            view! {
                <line class=format!("ref {}", l.class) x1=LEFT x2=WIDTH - RIGHT y1=y y2=y/>
                <text class=format!("ref-label {}", l.class) x=WIDTH - RIGHT - 4.0 y=y - 5.0 text-anchor="end">{l.label.clone()}</text>
            }
        })
        .collect_view()
}

/// Vertical reference lines, their labels staggered so neighbours do not overlap.
fn v_lines(data: &LineChartData) -> impl IntoView + use<> {
    data.v_lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let x = x_px(&data.x, l.value);
            let (anchor, dx) = label_side(x, 4.0);
            view! {
                <line class=format!("ref {}", l.class) x1=x x2=x y1=TOP y2=AXIS_Y/>
                <text class=format!("ref-label {}", l.class) x=x + dx y=v_label_y(i) text-anchor=anchor>{l.label.clone()}</text>
            }
        })
        .collect_view()
}

/// A horizontal bar filling `fraction` (0..=1) of its track, for tables of sizes.
#[component]
pub fn BarTrack(fraction: f64, class: &'static str) -> impl IntoView {
    let percent = bar_percent(fraction);
    view! {
        <span class="bar-track" aria-hidden="true">
            <span class=format!("bar-fill {class}") style=format!("width: {percent:.2}%")></span>
        </span>
    }
}
