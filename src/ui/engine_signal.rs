//! The engine as the components share it: started once by the app, read by every view.

use std::rc::Rc;

use leptos::prelude::*;

use crate::engine::Engine;

/// The engine once started; `None` while the GPU is being opened.
pub type EngineSignal = RwSignal<Option<Rc<Engine>>, LocalStorage>;

/// Says whether the job holding it is still its view's newest, so an older one can stop early.
#[derive(Clone, Copy)]
pub struct Wanted {
    newest: StoredValue<u64>,
    this: u64,
}

impl Wanted {
    pub fn get(&self) -> bool {
        self.newest.try_get_value() == Some(self.this)
    }
}

/// A view's engine job, run again whenever `ask` (read tracked) or the engine changes: the result
/// clears while it runs, and only the newest run's result is kept.
pub fn newest_job<A, T, F>(
    engine: EngineSignal,
    ask: impl Fn() -> A + 'static,
    job: impl Fn(Rc<Engine>, A, Wanted) -> F + 'static,
) -> RwSignal<Option<T>>
where
    A: 'static,
    T: Send + Sync + 'static,
    F: Future<Output = T> + 'static,
{
    let result = RwSignal::new(None);
    let newest = StoredValue::new(0u64);
    Effect::new(move |_| {
        let asked = ask();
        let Some(engine) = engine.get() else { return };
        let this = newest.get_value() + 1;
        newest.set_value(this);
        result.set(None);
        let wanted = Wanted { newest, this };
        let run = job(engine, asked, wanted);
        leptos::task::spawn_local(async move {
            let out = run.await;
            if wanted.get() {
                result.try_set(Some(out));
            }
        });
    });
    result
}
