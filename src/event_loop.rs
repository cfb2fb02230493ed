//! Letting the browser in: work that runs long on the page's one thread pauses here between pieces,
//! so input and drawing go on meanwhile (the CPU reference, the explorer's inputs, GPU uploads).

/// Longest stretch of work between two pauses of [`breathe`]: well under the 50 ms a task may take
/// before the browser calls it long.
pub const MAX_HOLD_MS: f64 = 12.0;

/// Lets the browser run other tasks (input, rendering) before continuing; natively, nothing to wait for.
pub async fn yield_now() {
    #[cfg(target_arch = "wasm32")]
    {
        let promise = js_sys::Promise::new(&mut |resolve, _| match web_sys::window() {
            Some(w) => {
                let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
            }
            // No window (a worker): nothing to let in, so go on at once.
            None => {
                let _ = resolve.call0(&wasm_bindgen::JsValue::NULL);
            }
        });
        let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
        last_pause::mark();
    }
}

/// Yields as [`yield_now`] does, but only when the page has been held for [`MAX_HOLD_MS`] since the last
/// pause: a timer yield costs a few ms (browsers clamp nested timers to 4 ms), too much to pay per piece.
pub async fn breathe() {
    #[cfg(target_arch = "wasm32")]
    if last_pause::elapsed_ms() >= MAX_HOLD_MS {
        yield_now().await;
    }
}

/// Tells [`breathe`] that the caller just resumed after waiting for the browser (a GPU read-back, say):
/// the thread was free meanwhile, so the hold counts from now, and the work that follows is not made
/// to pay for a yield at once.
pub fn resumed() {
    #[cfg(target_arch = "wasm32")]
    last_pause::mark();
}

/// Runs the tasks already queued (effects of the signals just set: a heatmap's drawing) before
/// continuing, without giving the browser a frame; natively, nothing to wait for.
pub async fn micro_yield() {
    #[cfg(target_arch = "wasm32")]
    {
        let resolved = js_sys::Promise::resolve(&wasm_bindgen::JsValue::NULL);
        let _ = wasm_bindgen_futures::JsFuture::from(resolved).await;
    }
}

/// Milliseconds on a clock that only moves forward: the page's `performance.now()`, natively the
/// time since the first call. What a job's timings are measured with.
pub fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        last_pause::now_ms()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1000.0
    }
}

#[cfg(target_arch = "wasm32")]
mod last_pause {
    use std::cell::Cell;

    thread_local! {
        static AT_MS: Cell<f64> = const { Cell::new(0.0) };
    }

    pub fn now_ms() -> f64 {
        web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
    }

    pub fn mark() {
        AT_MS.with(|at| at.set(now_ms()));
    }

    pub fn elapsed_ms() -> f64 {
        now_ms() - AT_MS.with(Cell::get)
    }
}
