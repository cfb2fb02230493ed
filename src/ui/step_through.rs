//! The focused head's arithmetic on a small example, step by step: `Q·Kᵀ`, the scale, the mask, the
//! softmax and `·V`, then the last row again as the tiled kernel computes it (online, a tile of keys at
//! a time), with the numbers at each step, checked against the CPU reference (and, where the
//! example is the top-left corner of the GPU's matrix, against the GPU's probabilities).

use std::sync::Arc;

use leptos::prelude::*;

use super::heatmap::HeadMap;
use crate::attention::layer_inputs::LayerInputs;
use crate::attention::tokens::display_token;
use crate::model::Mask;
use crate::views::heatmaps::entropy::{RowEntropy, SWEEP_KEYS, SWEEP_ROWS, entropy_sweep};
use crate::views::heatmaps::step_through::{EXAMPLE_KEYS_PER_TILE, Example, OnlineStep, StepChecks, Steps, online_row};

/// Columns of O shown.
const OUT_COLS: usize = 6;

fn fmt(x: f64) -> String {
    if x == f64::NEG_INFINITY { "−∞".into() } else { format!("{x:.3}") }
}

fn table(
    title: &str,
    what: &'static str,
    rows: &[String],
    cols: &[String],
    values: &[f64],
    n_cols: usize,
) -> impl IntoView + use<> {
    let head = cols.iter().map(|c| view! { <th scope="col">{c.clone()}</th> }).collect_view();
    let body = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let cells = values[i * n_cols..][..cols.len()]
                .iter()
                .map(|&v| view! { <td class="num">{fmt(v)}</td> })
                .collect_view();
            view! { <tr><th scope="row">{r.clone()}</th>{cells}</tr> }
        })
        .collect_view();
    let head = view! { <th></th>{head} };
    titled_table(what, title.to_string(), None, head, body)
}

/// One numbered step: its title, an optional note, and a table with a header row and a body.
fn titled_table<H: IntoView + 'static, B: IntoView + 'static>(
    what: &'static str,
    title: String,
    hint: Option<String>,
    head: H,
    body: B,
) -> impl IntoView + use<H, B> {
    view! {
        <div class="step" data-step=what>
            <h4>{title}</h4>
            {hint.map(|h| view! { <p class="hint">{h}</p> })}
            <div class="table-scroll"><table class="data steps-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>
        </div>
    }
}

/// Table cells of numbers with `decimals` decimals.
fn number_cells(values: &[f64], decimals: usize) -> impl IntoView + use<> {
    values.iter().map(|v| view! { <td class="num">{format!("{v:.decimals$}")}</td> }).collect_view()
}

/// Column headers from their names.
fn headers(names: &[&'static str]) -> impl IntoView + use<> {
    names.iter().map(|&n| view! { <th scope="col">{n}</th> }).collect_view()
}

/// The step-through panel for query head `head` of `inputs` under `mask`; `gpu` is the head's map
/// when it holds exact probabilities.
#[component]
pub fn StepThrough(inputs: Arc<LayerInputs>, head: u32, mask: Mask, gpu: Option<Arc<HeadMap>>) -> impl IntoView {
    let example = Example::of(&inputs, head, mask);
    let s: Steps = example.steps();
    let (n_q, n_kv, d, scale) = (s.n_q, s.n_kv, s.d, example.scale);
    let small_mask = example.mask;
    let StepChecks { worst_reference: worst_ref, worst_gpu: gpu_check } =
        StepChecks::of(&example, &s, mask, gpu.as_deref());
    let rows: Vec<String> =
        example.q_tokens.iter().enumerate().map(|(i, t)| format!("{i} {}", display_token(t))).collect();
    let cols: Vec<String> =
        example.kv_tokens.iter().enumerate().map(|(j, t)| format!("{j} {}", display_token(t))).collect();
    let out_cols: Vec<String> = (0..d.min(OUT_COLS)).map(|c| format!("o{c}")).collect();
    let online = OnlineTable::of(&s, &example.v, &rows);
    let probs_attr = s.probs.iter().map(|p| (*p as f32).to_string()).collect::<Vec<_>>().join(",");
    let entropies: Vec<(String, RowEntropy)> =
        rows.iter().enumerate().filter_map(|(i, r)| RowEntropy::of(&s, i).map(|e| (r.clone(), e))).collect();
    view! {
        <details class="panel step-through" data-testid="step-through" data-rows=n_q data-cols=n_kv data-probs=probs_attr
            data-max-diff-reference=worst_ref data-max-diff-gpu=gpu_check.map(|w| w.to_string()) open>
            <summary>{format!("Step through head {head} on its first {n_q} tokens (d = {d})")}</summary>
            <p class="hint">
                "Each query row of Q meets each key row of K in a dot product; the scores are scaled by 1/√d = "
                {format!("{scale:.4}")} ", masked keys get −∞, each row goes through a softmax (rows sum to 1), "
                "and the output O is the probability-weighted average of the V rows. Computed here in f64."
            </p>
            {table("1. Scores Q·Kᵀ", "scores", &rows, &cols, &s.scores, n_kv)}
            {table(&format!("2. Scaled by 1/√{d}"), "scaled", &rows, &cols, &s.scaled, n_kv)}
            {table(&format!("3. Mask ({small_mask})"), "masked", &rows, &cols, &s.masked, n_kv)}
            {table("4. Softmax of each row: the attention probabilities", "softmax", &rows, &cols, &s.probs, n_kv)}
            {table(&format!("5. O = P·V (first {} of {d} columns)", d.min(OUT_COLS)), "output", &rows, &out_cols, &s.out, d)}
            {online.view()}
            <p class="hint" data-testid="step-check">
                {format!("CPU reference: largest difference in the probabilities {worst_ref:.1e}.")}
                {gpu_check.map(|w| format!(" The heatmap's probabilities (computed by the kernel) differ by at most {w:.1e}."))}
            </p>
            <RowEntropyTable rows=entropies d=d/>
            <EntropySweep/>
        </details>
    }
}

/// Step 6: the last query row again, computed the way the tiled kernel does, a tile of keys at a time.
struct OnlineTable {
    title: String,
    rows: Vec<String>,
    values: Vec<f64>,
    /// The last row's first output column, online (`o / l`), and as step 5 computed it.
    online_out: f64,
    whole_out: f64,
}

const ONLINE_COLUMNS: [&str; 5] =
    ["tile max", "running max m", "rescale exp(m_old − m_new)", "running sum l", "o0 before ÷ l"];

impl OnlineTable {
    fn of(s: &Steps, v: &[f32], row_labels: &[String]) -> Self {
        let row = s.n_q.saturating_sub(1);
        let tiles = online_row(s, v, row, 0, EXAMPLE_KEYS_PER_TILE);
        let rows = tiles.iter().map(|t| format!("keys {}–{}", t.first_key, t.end_key - 1)).collect();
        let values = tiles.iter().flat_map(|t| [t.tile_max, t.max, t.rescale, t.sum, t.out]).collect::<Vec<_>>();
        let online_out = tiles.last().map_or(0.0, OnlineStep::output);
        let label = row_labels.get(row).cloned().unwrap_or_default();
        Self {
            title: format!("6. Row {label} online, {EXAMPLE_KEYS_PER_TILE} keys at a time"),
            rows,
            values,
            online_out,
            whole_out: s.out.get(row * s.d).copied().unwrap_or(0.0),
        }
    }

    fn view(self) -> impl IntoView {
        let cols: Vec<String> = ONLINE_COLUMNS.iter().map(|c| c.to_string()).collect();
        view! {
            <div data-testid="step-online" data-out=self.online_out.to_string() data-whole-out=self.whole_out.to_string()>
                {table(&self.title, "online", &self.rows, &cols, &self.values, ONLINE_COLUMNS.len())}
                <p class="hint">
                    "The tiled kernel never holds a whole row of scores: it keeps a running max m, a running sum l of "
                    "exp(s − m) and an output o not yet divided by l. When a tile raises the max, l and o are first "
                    "multiplied by exp(m_old − m_new), so every term is again relative to the new max. After the last "
                    "tile, o0 / l = " {fmt(self.online_out)} ", the first column of O in step 5 ("
                    {fmt(self.whole_out)} ")."
                </p>
            </div>
        }
    }
}

/// How spread each row's softmax is, with the 1/√d scale and without it.
#[component]
fn RowEntropyTable(rows: Vec<(String, RowEntropy)>, d: usize) -> impl IntoView {
    let body = rows
        .into_iter()
        .enumerate()
        .map(|(i, (label, e))| {
            view! {
                <tr data-testid="row-entropy" data-row=i data-scaled=e.scaled_bits data-unscaled=e.unscaled_bits data-max=e.max_bits>
                    <th scope="row">{label}</th>
                    <td class="num">{e.visible_keys}</td>
                    {number_cells(&[e.scaled_bits, e.unscaled_bits, e.max_bits], 3)}
                </tr>
            }
        })
        .collect_view();
    let hint = format!(
        "0 bits: one key takes all the weight; log2(k) bits: k visible keys share it evenly. \"Unscaled\" is the \
         softmax of the raw scores, without the 1/√{d}: the sharper row attention would use without the scale."
    );
    let head = headers(&["query", "visible keys", "scaled", "unscaled", "max, log2(keys)"]);
    titled_table("entropy", "7. How spread each row is: its entropy, in bits".into(), Some(hint), head, body)
}

/// The synthetic sweep: raw scores spread as √d, and what that does to a row with and without the scale.
#[component]
fn EntropySweep() -> impl IntoView {
    let body = entropy_sweep()
        .iter()
        .map(|p| {
            view! {
                <tr data-testid="entropy-sweep-row" data-d=p.d data-spread=p.measured_spread data-scaled=p.scaled_bits data-unscaled=p.unscaled_bits>
                    <th scope="row">{p.d}</th>
                    {number_cells(&[p.expected_spread, p.measured_spread, p.scaled_bits, p.unscaled_bits], 2)}
                </tr>
            }
        })
        .collect_view();
    let hint = format!(
        "Synthetic, not this head: seeded random q and k whose entries have variance 1, {SWEEP_ROWS} rows of \
         {SWEEP_KEYS} keys per width (at most {:.0} bits). A raw score q·k sums d products, so its spread grows as \
         √d; scaled by 1/√d it stays near 1.",
        (SWEEP_KEYS as f64).log2()
    );
    let head = headers(&["d", "√d", "spread of q·k", "bits, scaled", "bits, unscaled"]);
    view! {
        <div data-testid="entropy-sweep">
            {titled_table("sweep", "8. Why 1/√d: wider heads, synthetic rows".into(), Some(hint), head, body)}
        </div>
    }
}
