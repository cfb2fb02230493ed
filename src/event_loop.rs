//! Letting the browser in: work that runs long on the page's one thread pauses here between pieces,
//! so input and drawing go on meanwhile (the CPU reference, the explorer's inputs, GPU uploads).

/// Lets the browser run other tasks (input, rendering) before continuing; natively, nothing to wait for.
pub async fn yield_now() {
    #[cfg(target_arch = "wasm32")]
    {
        let promise = js_sys::Promise::new(&mut |resolve, _| {
            if let Some(w) = web_sys::window() {
                let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
            }
        });
        let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    }
}
