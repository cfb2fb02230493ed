//! What a view shows before its feature has landed: a plain statement, never fake content.

use leptos::prelude::*;

use crate::state::View;

#[component]
pub fn PendingView(view: View) -> impl IntoView {
    let what = match view {
        View::Kv => "KV-cache growth against context length, per layer type, with a live decode loop on the GPU",
        View::Compare => {
            "memory of the same model as MHA, GQA, MQA, MLA, sliding window, hybrid and shared-KV variants"
        }
        View::Lesson => "step-by-step lessons from tokens to FlashAttention tiling and modern KV-cache designs",
        View::Bench => "timings of the tiled attention kernel against the naive one on this GPU",
        View::Heatmaps => "attention heatmaps",
    };
    view! {
        <section class="pending" data-testid="pending-view">
            <h2>{view.title()}</h2>
            <p>"Not built yet. This view will show " {what} "."</p>
            <p>"Everything on the Heatmaps tab already runs on your GPU."</p>
        </section>
    }
}
