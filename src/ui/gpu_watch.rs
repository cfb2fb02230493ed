//! Keeps the page computing when its GPU device is lost or faulted (out of memory, say): a watch
//! notices it, starts a new adapter and device (a bounded number of times, as `GpuRecovery` decides), and hands the views the
//! new engine, which makes them compute again; past the bound the CPU reference takes over.

use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::Closure;

use super::engine_signal::EngineSignal;
use crate::engine::{BackendChoice, Engine};
use crate::views::gpu_recovery::{GpuRecovery, Recovery};
use crate::views::link::Notice;

/// How often the watch looks at the device (a loss is reported asynchronously by the browser).
const WATCH_EVERY: Duration = Duration::from_millis(500);

/// Starts the watch; it stops with the app.
pub fn watch_for_lost_gpu(engine: EngineSignal, notices: RwSignal<Vec<Notice>>, backend: BackendChoice) {
    let recovery = StoredValue::new(GpuRecovery::default());
    let restarting = StoredValue::new(false);
    let check = move || {
        let broken = engine.try_with_untracked(|e| e.as_ref().and_then(|e| e.broken())).flatten();
        let Some(why) = broken.filter(|_| !restarting.get_value()) else { return };
        restarting.set_value(true);
        let Some(action) = recovery.try_update_value(GpuRecovery::on_lost) else { return };
        spawn_local(async move {
            let next = match action {
                Recovery::Restart { .. } => Engine::start(backend).await,
                Recovery::UseCpu => Engine::Cpu { reason: GpuRecovery::cpu_reason() },
            };
            notices.try_update(|n| n.push(Notice(GpuRecovery::notice(action, &why))));
            engine.try_set(Some(Rc::new(next)));
            restarting.try_set_value(false);
        });
    };
    if let Ok(handle) = set_interval_with_handle(check, WATCH_EVERY) {
        on_cleanup(move || handle.clear());
    }
}

/// The `hooks` test switch ([`super::browser::test_switch`]): `window.attentionLabLoseGpu()` destroys the device, as a driver reset would, and
/// `window.attentionLabGpuOutOfMemory()` makes the next GPU job fail as out of memory, so browser tests
/// can check the page recovers from each.
pub fn install_test_hooks(engine: EngineSignal) {
    install_hook("attentionLabLoseGpu", move || engine.with_untracked(|e| e.as_ref().map(|e| e.lose_device())));
    install_hook("attentionLabGpuOutOfMemory", move || {
        engine.with_untracked(|e| e.as_ref().map(|e| e.simulate_out_of_memory()))
    });
}

fn install_hook(name: &str, hook: impl Fn() -> Option<()> + 'static) {
    let hook = Closure::<dyn Fn()>::new(move || _ = hook());
    if let Some(window) = web_sys::window() {
        let _ = js_sys::Reflect::set(&window, &name.into(), hook.as_ref().unchecked_ref());
    }
    // The hook lives as long as the page.
    hook.forget();
}
