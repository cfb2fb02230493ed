//! The variants trained here (`views::compare::trained_variants`): held-out loss over seeds beside
//! the cache each needs.

use leptos::prelude::*;

use crate::views::compare::trained_variants::{TrainedVariant, TrainedVariants, findings, trained_variants};

#[component]
pub fn TrainedVariantsPanel() -> impl IntoView {
    view! {
        <section class="panel" data-testid="trained-variants">
            <h3>"What sharing K/V costs, measured on models trained here"</h3>
            {match trained_variants() {
                Ok(t) => view! { <Measured t/> }.into_any(),
                Err(why) => view! { <p class="status error">{why}</p> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn Measured(t: TrainedVariants) -> impl IntoView {
    let found = findings(&t);
    view! {
        <p class="explain">
            "Small models with the layout of Attention Lab tiny, whichever model the view above shows, that differ "
            "only in attention, trained by this project's training crate on its "
            "corpus with one recipe ("{t.recipe.clone()}"), each scored on the whole held-out text (loss in nats per token, lower is better). These are real "
            "runs, not synthetic figures; they are compared with each other, not with the shipped model, which "
            "trained longer. KV bytes per token are in f16 over the 4 layers."
        </p>
        <div class="table-scroll">
            <table class="data">
                <thead><tr>
                    <th scope="col">"Attention"</th><th scope="col">"Parameters"</th>
                    <th scope="col">"KV bytes per token"</th><th scope="col">"Held-out loss (mean)"</th>
                    <th scope="col">"Lowest to highest"</th><th scope="col">"Seeds"</th>
                </tr></thead>
                <tbody>{t.rows.into_iter().map(|r| view! { <Row r/> }).collect_view()}</tbody>
            </table>
        </div>
        <ul class="explain" data-testid="trained-variant-findings">
            {found.into_iter().map(|f| view! { <li>{f}</li> }).collect_view()}
        </ul>
    }
}

#[component]
fn Row(r: TrainedVariant) -> impl IntoView {
    let cells = r.cells();
    view! {
        <tr data-testid="variant-row" data-attn=r.attn.clone() data-loss=r.mean().to_string()
            data-spread=r.spread().to_string() data-kv-bytes=r.kv_bytes_per_token.to_string()>
            {cells.into_iter().map(|c| view! { <td>{c}</td> }).collect_view()}
        </tr>
    }
}
