//! Each view's component, in one place: the page's tab and a lesson step showing a live view both
//! build it here, so a new view adds one arm (the compiler asks for it once it is in the registry).

use leptos::prelude::*;

use super::backward_view::BackwardView;
use super::bench_view::BenchView;
use super::compare_view::CompareView;
use super::engine_signal::EngineSignal;
use super::heatmaps_view::HeatmapsView;
use super::kv_view::KvView;
use super::memory_view::MemoryView;
use super::mla_view::MlaView;
use crate::model::Model;
use crate::state::{AppState, View};

/// The component of `view`; `None` for the lessons, which show the others (the page builds them).
pub fn live_view(view: View, state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> Option<AnyView> {
    Some(match view {
        View::Heatmaps => view! { <HeatmapsView state=state model=model engine=engine/> }.into_any(),
        View::Kv => view! { <KvView state=state model=model engine=engine/> }.into_any(),
        View::Compare => view! { <CompareView state=state model=model/> }.into_any(),
        View::Bench => view! { <BenchView state=state engine=engine/> }.into_any(),
        View::Backward => view! { <BackwardView state=state model=model engine=engine/> }.into_any(),
        View::Memory => view! { <MemoryView state=state engine=engine/> }.into_any(),
        View::Mla => view! { <MlaView state=state engine=engine/> }.into_any(),
        View::Lesson => return None,
    })
}
