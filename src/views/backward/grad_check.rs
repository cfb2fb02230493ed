//! The gradient check's request and words: the explorer's head and its KV group, sent through
//! attention's backward on the engine and compared with the f64 twin
//! ([`crate::live_attention::gradient_check`]).

use crate::attention::layer_inputs::LayerLayout;
use crate::gpu::flash_backward_io::BACKWARD_MAX_HEAD_DIM;
use crate::live_attention::{GradCheck, Request};
use crate::model::Model;
use crate::views::heatmaps::request::{Screen, build_request};
use crate::views::registry::Settings;

/// The request and head the check runs: the Jacobian's head (the enlarged one, else the first shown),
/// at the explorer's exact sizes.
pub fn grad_request(settings: &Settings, model: &Model) -> Result<(Request, u32), String> {
    let layout = LayerLayout::of(model, settings.model.layer);
    let screen = Screen { width_css_px: 1024.0, device_pixel_ratio: 1.0 };
    let request = build_request(&settings.input, &settings.explorer, layout, screen)?;
    if !request.exact() {
        return Err("The gradient check runs on inputs the explorer draws exactly: shorten the text.".into());
    }
    let head = request.shown_head(settings.explorer.focus).ok_or("No head is shown.")?;
    Ok((request, head))
}

/// What the check says above its table.
pub fn grad_heading(c: &GradCheck) -> String {
    let heads: Vec<String> = c.heads.iter().map(u32::to_string).collect();
    let twin_note = format!(
        "the twin on the CPU (this page has no WebGPU, or the heads are wider than the backward kernels' \
         {BACKWARD_MAX_HEAD_DIM}), so the check compares the twin with itself"
    );
    let tier = if c.on_gpu {
        "the GPU's FlashAttention-2 backward (P recomputed tile by tile from the forward's log-sum-exp, no n × n matrix)"
    } else {
        &twin_note
    };
    format!(
        "dQ, dK and dV of query heads {} and their shared KV head {} (the seeded weights the Jacobian above uses), over \
         the first {} queries and {} keys of the text (what the twin checks in a moment on this page), for a seeded dO, \
         from {tier}, against the f64 twin.",
        heads.join(", "),
        c.kv_head,
        c.tokens.0,
        c.tokens.1
    )
}

/// The shared head's gradient as the sum over its group, in words.
pub fn group_sum_line(c: &GradCheck) -> String {
    format!(
        "KV head {} is read by {} query heads, so its dK and dV are the sums of what each sends back: computed \
         head by head and added, they differ from the engine's group gradient by {:.1e} (relative).",
        c.kv_head,
        c.heads.len(),
        c.group_sum_error
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::live_attention::gradients::TensorCheck;

    fn check(on_gpu: bool) -> GradCheck {
        let tensors = vec![TensorCheck { tensor: "dq", rel_error: 1e-7, largest: 0.5 }];
        GradCheck { kv_head: 1, heads: vec![4, 5, 6, 7], tensors, group_sum_error: 2.5e-8, tokens: (9, 9), on_gpu }
    }

    #[test]
    fn the_check_names_its_group_tier_and_sum() {
        assert!(
            grad_heading(&check(true))
                .starts_with("dQ, dK and dV of query heads 4, 5, 6, 7 and their shared KV head 1")
        );
        assert!(grad_heading(&check(false)).contains(
            "the twin on the CPU (this page has no WebGPU, or the heads are wider than the backward kernels' 1024)"
        ));
        assert!(grad_heading(&check(true)).contains("over the first 9 queries and 9 keys of the text"));
        assert!(
            group_sum_line(&check(true)).contains("read by 4 query heads")
                && group_sum_line(&check(true)).contains("2.5e-8")
        );
    }

    #[test]
    fn the_request_is_the_explorers_head() {
        let (settings, _) = Settings::from_query("focus=5");
        let (req, head) = grad_request(&settings, preset("llama-3-8b").unwrap()).unwrap();
        assert_eq!((head, req.layout.kv_head(head)), (5, 1));
        let (long, _) = Settings::from_query("n=4096");
        assert!(grad_request(&long, preset("llama-3-8b").unwrap()).unwrap_err().contains("shorten"));
    }
}
