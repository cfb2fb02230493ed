//! What the backward view says about a row's Jacobian: its heading, the cells of its picture and the
//! table of the same row at every score scale, as text and numbers the page binds.

use super::ScoreScale;
use super::jacobian::{JacobianFacts, RowJacobian};

/// One cell of the Jacobian's picture: row `i`, column `j` within the visible keys, and the keys'
/// positions in the text (what the key table and the caption say).
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub i: usize,
    pub j: usize,
    pub key_i: u32,
    pub key_j: u32,
    pub value: f64,
    pub color: String,
}

/// The largest |entry| any softmax Jacobian has: p(1 − p) and p_i·p_j are at most 1/4. The picture's
/// colours are on this fixed scale, so a nearly one-hot row looks as empty as its Jacobian is.
pub const JACOBIAN_BOUND: f64 = 0.25;

/// The picture's cells, coloured by sign and size: positive (the diagonal) red, negative blue, white
/// at zero, full colour at [`JACOBIAN_BOUND`].
pub fn cells(jacobian: &[f64], keys: &[u32]) -> Vec<Cell> {
    let n = keys.len().max(1);
    jacobian
        .iter()
        .enumerate()
        .map(|(k, &value)| {
            let (i, j) = (k / n, k % n);
            let color = diverging_color(value, JACOBIAN_BOUND);
            Cell {
                i,
                j,
                key_i: keys.get(i).copied().unwrap_or(0),
                key_j: keys.get(j).copied().unwrap_or(0),
                value,
                color,
            }
        })
        .collect()
}

/// White at 0, towards red (+) or blue (−) as |value| nears `largest`.
pub fn diverging_color(value: f64, largest: f64) -> String {
    let t = if largest > 0.0 { (value.abs() / largest).min(1.0) } else { 0.0 };
    let (r, g, b) = if value >= 0.0 { (202.0, 64.0, 44.0) } else { (33.0, 102.0, 172.0) };
    let mix = |c: f64| (255.0 + (c - 255.0) * t).round() as u8;
    format!("rgb({},{},{})", mix(r), mix(g), mix(b))
}

/// The heading: which row of which head.
pub fn heading(r: &RowJacobian) -> String {
    let designed = r.designed.map_or(String::new(), |d| format!(" (a designed head, {d})"));
    format!(
        "∂p/∂s for query row {} (“{}”) of head {}{designed}: {} keys visible",
        r.row,
        r.row_token,
        r.head,
        r.keys.len()
    )
}

/// Under the picture: what its rows, columns and colours are.
pub fn picture_caption(r: &RowJacobian) -> String {
    let keys = match (r.keys.first(), r.keys.last()) {
        (Some(first), Some(last)) => format!("keys {first} to {last}"),
        _ => "no keys".into(),
    };
    format!(
        "Row i, column j: ∂p_i/∂s_j over the visible {keys}, as listed below. Red above zero, blue below, \
         full colour at ±1/4 (the largest any softmax Jacobian reaches); white is zero."
    )
}

/// The facts line under the picture.
pub fn facts_line(r: &RowJacobian) -> String {
    let f = &r.facts;
    let row_sum =
        r.largest_row_sum.map_or(String::new(), |s| format!(" Largest |row sum|: {s:.1e} (zero but for rounding)."));
    format!(
        "Top probability {:.3}, entropy {:.3} of at most {:.3} bits; trace 1 − Σp² = {:.4}, Frobenius norm {:.4}, \
         largest |entry| {:.4}.{row_sum}",
        f.top_prob,
        f.entropy_bits,
        (f.visible_keys.max(1) as f64).log2(),
        f.trace,
        f.frobenius,
        f.largest_entry
    )
}

/// What the picture leaves out, when the row sees too many keys to draw.
pub fn undrawn_note(r: &RowJacobian) -> Option<String> {
    r.jacobian.is_none().then(|| {
        format!(
            "This row sees {} keys; the picture is drawn for rows of at most {} (pick an earlier row, a \
             window or a shorter text). The figures beside it cover every key.",
            r.keys.len(),
            super::jacobian::MAX_DRAWN_KEYS
        )
    })
}

/// A row of the scale table.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleRow {
    pub id: &'static str,
    pub label: String,
    pub chosen: bool,
    pub cells: [String; 4],
    pub trace: f64,
}

/// The same row at each scale, then a flat row over the same keys (the largest trace and entropy).
pub fn scale_rows(r: &RowJacobian) -> Vec<ScaleRow> {
    let row = |id, label: String, chosen, f: &JacobianFacts| ScaleRow {
        id,
        label,
        chosen,
        cells: [
            format!("{:.3}", f.top_prob),
            format!("{:.3}", f.entropy_bits),
            format!("{:.4}", f.trace),
            format!("{:.4}", f.frobenius),
        ],
        trace: f.trace,
    };
    let mut rows: Vec<ScaleRow> = r
        .by_scale
        .iter()
        .map(|(s, f)| {
            let label = format!("{} = {:.4}", s.label(), s.factor(r.head_dim));
            row(s.id(), label, *s == r.scale, f)
        })
        .collect();
    rows.push(row("flat", "a flat row (every visible key equal: the largest trace)".into(), false, &r.flat));
    rows
}

/// What the view computes, said beside it: synthetic weights always, and when the explorer shows real
/// weights (`real_weights`: the trained model or a dropped checkpoint), that this view does not.
pub fn weights_note(real_weights: bool) -> String {
    let synthetic = "Synthetic weights: seeded random projections in this model's real layout (the explorer's \
                     heads, designed teaching heads included unless turned off), the text cut into words or \
                     characters as the explorer's Tokens control says, and every number in f64 from the f32 projections.";
    if real_weights {
        format!(
            "{synthetic} The heatmaps view shows this model's real weights and its own tokens; the Jacobian and \
             the check do not run them, so their rows are not the heatmaps' rows. The panel “Gradients on the \
             model” below runs the trained model's."
        )
    } else {
        synthetic.into()
    }
}

/// The choices of the scale select, the link's one selected.
pub fn scale_choices(chosen: ScoreScale) -> Vec<(&'static str, &'static str, bool)> {
    ScoreScale::ALL.iter().map(|&s| (s.id(), s.label(), s == chosen)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::backward::jacobian::row_jacobian;
    use crate::views::registry::Settings;

    #[test]
    fn colours_by_hand() {
        assert_eq!(diverging_color(0.0, 0.25), "rgb(255,255,255)");
        assert_eq!(diverging_color(0.25, 0.25), "rgb(202,64,44)");
        assert_eq!(diverging_color(-0.25, 0.25), "rgb(33,102,172)");
        // Halfway: 255 + (202 − 255) / 2 = 228.5 → 229 (rounded half away from zero).
        assert_eq!(diverging_color(0.125, 0.25), "rgb(229,160,150)");
        assert_eq!(diverging_color(0.3, 0.0), "rgb(255,255,255)");
    }

    #[test]
    fn the_table_lists_every_scale_then_the_flat_row() {
        let (settings, _) = Settings::from_query("jscale=one");
        let r = row_jacobian(&settings, &settings.resolved_model()).unwrap();
        let rows = scale_rows(&r);
        let ids: Vec<&str> = rows.iter().map(|r| r.id).collect();
        assert_eq!(ids, ["inv-d", "inv-sqrt-d", "one", "flat"]);
        assert_eq!(rows.iter().filter(|r| r.chosen).map(|r| r.id).collect::<Vec<_>>(), ["one"]);
        // Llama 3 8B's heads are 128 wide: 1/√128 = 0.0884.
        assert_eq!(rows[1].label, "1/√d (attention's) = 0.0884");
        let n = r.keys.len();
        let drawn = cells(r.jacobian.as_ref().unwrap(), &r.keys);
        assert_eq!(drawn.len(), n * n);
        assert_eq!((drawn[n + 2].i, drawn[n + 2].j, drawn[n + 2].key_i, drawn[n + 2].key_j), (1, 2, 1, 2));
        assert!(
            weights_note(true).ends_with("The panel “Gradients on the model” below runs the trained model's.")
                && !weights_note(false).contains("heatmaps'")
        );
        assert!(heading(&r).starts_with(&format!("∂p/∂s for query row {} (“.”) of head 0 (a designed head", n - 1)));
        assert!(
            picture_caption(&r)
                .starts_with(&format!("Row i, column j: ∂p_i/∂s_j over the visible keys 0 to {}", n - 1))
        );
        assert!(facts_line(&r).contains("Largest |row sum|"), "{}", facts_line(&r));
        assert_eq!(undrawn_note(&r), None);
    }
}
