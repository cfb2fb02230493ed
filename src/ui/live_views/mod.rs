//! Each view's component, one file each, named after its folder in `views/`: the page's tab and a
//! lesson step showing a live view both build it here, so a new view is its file, its `mod` line and
//! one arm in [`live_view`] (the compiler asks for the arm once the registry lists the view).

use leptos::prelude::*;

mod backward;
mod bench;
mod compare;
mod distance;
mod heatmaps;
pub(super) mod kv;
mod memory;
mod mla;

use super::engine_signal::EngineSignal;
use crate::model::Model;
use crate::state::{AppState, View};
use backward::BackwardView;
use bench::BenchView;
use compare::CompareView;
use distance::DistanceView;
use heatmaps::HeatmapsView;
use kv::KvView;
use memory::MemoryView;
use mla::MlaView;

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
        View::Distance => view! { <DistanceView state=state model=model engine=engine/> }.into_any(),
        View::Lesson => return None,
    })
}
