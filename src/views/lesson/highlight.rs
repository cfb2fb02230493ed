//! What a step points at in its view: a head, a query row, a layer of the strip, a line of the KV
//! chart or a named panel. A step's `highlight:` line is parsed into these typed values and turned
//! into style rules here, so the page's style rules are made only of numbers and names from fixed
//! lists, never of the lesson's own characters.

use std::fmt;

use crate::views::registry::View;

/// Lines of the KV chart that a step can point at (their class in the chart).
pub const CHART_LINES: [&str; 4] = ["total", "budget", "ctx", "fit"];

/// Panels (by `data-testid`) that a step can point at, and the view that shows each.
pub const ELEMENTS: [(&str, View); 24] = [
    ("step-through", View::Heatmaps),
    ("step-online", View::Heatmaps),
    ("flash-trace", View::Heatmaps),
    ("decode-panel", View::Kv),
    ("tile-stats", View::Heatmaps),
    ("tile-overlay", View::Heatmaps),
    ("layer-strip", View::Heatmaps),
    ("layer-summary", View::Heatmaps),
    ("budget-fit", View::Kv),
    ("budget-at-ctx", View::Kv),
    ("budget-sequences", View::Kv),
    ("kv-breakdown-row", View::Kv),
    ("kv-group", View::Heatmaps),
    ("gqa-groups", View::Compare),
    ("flops-row", View::Compare),
    ("decode-cost", View::Compare),
    ("params-row", View::Compare),
    ("variant-row", View::Compare),
    ("trained-variants", View::Compare),
    ("dtype-cell", View::Compare),
    ("page-grid", View::Kv),
    ("bench-row", View::Bench),
    ("softmax-jacobian", View::Backward),
    ("grad-model-panel", View::Backward),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Highlight {
    /// The heatmap of query head `n`.
    Head(u32),
    /// Query row `n` (counting from 0) in every heatmap.
    Row(u32),
    /// Layer `n` of the layer strip.
    Layer(u32),
    /// A line of the KV chart (one of [`CHART_LINES`]).
    Line(&'static str),
    /// A panel (one of [`ELEMENTS`]).
    Element(&'static str),
}

/// Panels whose test id other elements share, and what picks out the ones a step means: the compare
/// view's bars, not the rows of the trained variants' table, which DESIGN.md names `variant-row` too.
const NARROWED: [(&str, &str); 1] = [("variant-row", "[data-variant]")];

/// Largest head, row or layer number a highlight may name (larger ones are typos).
const MAX_INDEX: u32 = 65_535;

impl Highlight {
    /// Reads one highlight such as `head 3`, `row 0`, `layer 5`, `line budget`, `element tile-stats`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (what, arg) = text.trim().split_once(' ').ok_or_else(|| format!("\"{text}\" needs a kind and a value"))?;
        let arg = arg.trim();
        let index = || match arg.parse::<u32>() {
            Ok(n) if n <= MAX_INDEX => Ok(n),
            _ => Err(format!("\"{arg}\" is not a number from 0 to {MAX_INDEX}")),
        };
        let listed = |list: &mut dyn Iterator<Item = &'static str>| {
            let list: Vec<&'static str> = list.collect();
            list.iter()
                .copied()
                .find(|&name| name == arg)
                .ok_or_else(|| format!("\"{arg}\" is not one of {}", list.join(", ")))
        };
        match what {
            "head" => index().map(Highlight::Head),
            "row" => index().map(Highlight::Row),
            "layer" => index().map(Highlight::Layer),
            "line" => listed(&mut CHART_LINES.into_iter()).map(Highlight::Line),
            "element" => listed(&mut ELEMENTS.iter().map(|(name, _)| *name)).map(Highlight::Element),
            _ => Err(format!("\"{what}\" is not head, row, layer, line or element")),
        }
    }

    /// Reads a comma-separated list, such as `head 2, row 4`.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, String> {
        text.split(',').filter(|part| !part.trim().is_empty()).map(Highlight::parse).collect()
    }

    /// The style rules that mark it (the lesson view adopts them as a stylesheet of the page).
    pub fn css(self) -> String {
        let mark = "outline: 3px solid var(--accent); outline-offset: 2px;";
        match self {
            Highlight::Head(n) => format!("[data-testid=\"head-heatmap\"][data-head=\"{n}\"] {{ {mark} }}"),
            Highlight::Row(n) => format!(
                "[data-testid=\"head-heatmap\"] .hm-plot::after {{ content: \"\"; position: absolute; left: 0; right: 0; \
                 top: calc(var(--cell) * {n}); height: var(--cell); outline: 2px solid var(--accent); pointer-events: none; }}\n\
                 [data-testid=\"head-heatmap\"] .hm-ylabels > :nth-child({}) {{ color: var(--accent); font-weight: 700; }}",
                n + 1
            ),
            Highlight::Layer(n) => format!("[data-testid=\"layer-cell\"][data-layer=\"{n}\"] {{ {mark} }}"),
            Highlight::Line(class) => format!(
                ".line-chart .series.{class}, .line-chart .ref.{class} {{ stroke-width: 5; }}\n\
                 .line-chart .ref-label.{class} {{ font-weight: 700; }}"
            ),
            Highlight::Element(testid) => {
                let narrower = NARROWED.iter().find(|(name, _)| *name == testid).map_or("", |(_, only)| only);
                format!("[data-testid=\"{testid}\"]{narrower} {{ {mark} }}")
            }
        }
    }
}

impl fmt::Display for Highlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Highlight::Head(n) => write!(f, "head {n}"),
            Highlight::Row(n) => write!(f, "row {n}"),
            Highlight::Layer(n) => write!(f, "layer {n}"),
            Highlight::Line(name) => write!(f, "line {name}"),
            Highlight::Element(name) => write!(f, "element {name}"),
        }
    }
}

/// The view that shows panel `name`, if it is one of [`ELEMENTS`].
pub fn element_view(name: &str) -> Option<View> {
    ELEMENTS.iter().find(|(element, _)| *element == name).map(|(_, view)| *view)
}

/// The style text for a step's highlights (empty when there are none or they do not parse).
pub fn style_text(highlight: Option<&str>) -> String {
    let list = highlight.map(Highlight::parse_list).and_then(Result::ok).unwrap_or_default();
    list.iter().map(|h| h.css()).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_and_writes_back() {
        for text in ["head 3", "row 0", "layer 61", "line budget", "element tile-stats"] {
            assert_eq!(Highlight::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Highlight::parse_list("head 2, row 4").unwrap(), vec![Highlight::Head(2), Highlight::Row(4)]);
    }

    #[test]
    fn anything_else_is_refused_so_no_lesson_text_reaches_the_style() {
        for bad in ["head", "head -1", "head 99999999", "row x", "line }", "element body", "colour red", "head 1 }"] {
            assert!(Highlight::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(style_text(Some("head 1, line }")), "", "one bad entry drops the list");
        assert_eq!(style_text(None), "");
    }

    #[test]
    fn the_style_names_the_marked_element() {
        assert_eq!(
            Highlight::Head(2).css(),
            "[data-testid=\"head-heatmap\"][data-head=\"2\"] { outline: 3px solid var(--accent); outline-offset: 2px; }"
        );
        let row = Highlight::Row(4).css();
        assert!(row.contains("top: calc(var(--cell) * 4)") && row.contains(":nth-child(5)"), "{row}");
        assert!(Highlight::Layer(7).css().contains("[data-layer=\"7\"]"));
        assert!(Highlight::Line("fit").css().starts_with(".line-chart .series.fit, .line-chart .ref.fit"));
        assert!(Highlight::Element("bench-row").css().starts_with("[data-testid=\"bench-row\"] {"));
        // The compare view's bars, not the trained variants' rows that share their test id.
        assert!(Highlight::Element("variant-row").css().starts_with("[data-testid=\"variant-row\"][data-variant] {"));
    }
}
