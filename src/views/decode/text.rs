//! Every text the decode panel shows, and the cells of its page grids.

use super::check::CHECK_EVERY_TOKENS;
use super::snapshot::{PageView, PagesView, PoolView, RunState, Snapshot};
use crate::model::decode_demo::{PROMPT_TOKENS, demo_layers, run_tokens};
use crate::model::limits::KERNEL_MAX_HEAD_DIM;
use crate::model::paging::PAGE_TOKENS;
use crate::model::units::{bytes_text, count_of, format_thousands};
use crate::model::{LayerKind, Model};
use crate::views::layer_kinds::{keeps_text, recurrent_layers};

/// What the animation does with this model, and which of its windows are too long to recycle here.
pub fn intro_text(model: &Model) -> String {
    let run = run_tokens(model);
    let intro = format!(
        "Request A reads a {PROMPT_TOKENS}-token prompt and generates up to {run} tokens. When it has 88, request B arrives \
         with the same prompt: its page table points at A's pages that hold the prompt, the partly filled last one \
         too, so nothing is computed or copied for them; the first time B writes into that page it gets its own \
         copy (copy-on-write). Then both generate in turns. Every token writes its K and V rows into a page of one \
         pool kept on the GPU and runs the paged decode kernel, which reads K and V through the request's page \
         table, one layer of each type with the model's KV heads, head size and mask. A request with all its \
         tokens ends and its pages go back to the pool. The values are seeded noise (no trained weights are \
         loaded); the shapes are real."
    );
    let long_windows: Vec<String> = demo_layers(model, KERNEL_MAX_HEAD_DIM)
        .iter()
        .filter_map(|l| match l.kind {
            LayerKind::Sliding { window_tokens: w } | LayerKind::Chunked { chunk_tokens: w } if w + 96 > run => {
                Some(format!(
                    "its {} window of {} tokens is longer than this run, so no page is recycled here",
                    l.kind.noun(),
                    format_thousands(w.into())
                ))
            }
            _ => None,
        })
        .collect();
    if long_windows.is_empty() { intro } else { format!("{intro} Note: {}.", long_windows.join("; ")) }
}

/// For a model with layers without softmax attention, what the demo leaves out (it pages the
/// attention layers' caches only), or, with no attention layer at all, why it does not start.
pub fn recurrent_note(model: &Model) -> Option<String> {
    let r = recurrent_layers(model)?;
    let attention = model.attention_layers();
    Some(if attention == 0 {
        format!(
            "{} has no attention layer, so there is no KV cache to page and the demo does not start: its {} {} \
             instead.",
            model.name,
            r.words,
            keeps_text(&r)
        )
    } else {
        format!(
            "The demo runs the {} only; the {} {}, not simulated here.",
            count_of(attention.into(), "attention layer"),
            r.words,
            keeps_text(&r)
        )
    })
}

/// Whether the demo has anything to run: a layer that keeps a KV cache of its own.
pub fn can_run(model: &Model) -> bool {
    !demo_layers(model, KERNEL_MAX_HEAD_DIM).is_empty()
}

pub fn start_label(state: RunState) -> &'static str {
    if state == RunState::Idle { "Start decoding" } else { "Restart" }
}

/// `running · request A: 12 of 256 tokens · Request B: not arrived yet`.
pub fn status_text(snap: &Snapshot) -> String {
    let b_line = match snap.b_tokens {
        Some(b) => format!("Request B: {b} tokens ({} shared with A, not recomputed)", snap.shared_tokens),
        None => "Request B: not arrived yet".to_string(),
    };
    format!("{} · request A: {} of {} tokens · {b_line}", snap.state.name(), snap.a_tokens, snap.run_tokens)
}

/// Request B's tokens for a script to read: 0 before it arrives.
pub fn b_tokens_value(snap: &Snapshot) -> String {
    snap.b_tokens.unwrap_or(0).to_string()
}

pub fn buffers_text(snap: &Snapshot) -> String {
    format!(
        "This demo's K/V pools hold {} (f32, one layer per type, room for both requests). {} kernel launches, {:.2} ms each on average.",
        bytes_text(snap.demo_buffer_bytes.into()),
        snap.kernel_steps,
        snap.average_kernel_ms()
    )
}

/// The pool as it stands: pages in use and their bytes, shared pages, fragmentation, copies.
pub fn pool_text(pool: &PoolView) -> String {
    let slots = pool.live_pages * PAGE_TOKENS;
    let empty = if slots > 0 {
        format!(" ({:.1} % of their slots)", pool.empty_slots as f64 * 100.0 / slots as f64)
    } else {
        String::new()
    };
    format!(
        "Pool in use: {} of {} pages, {} of K and V (f32); {} shared by both requests; {} empty {} in pages in use{empty}; {} copied on write.",
        pool.live_pages,
        pool.capacity_pages,
        bytes_text(pool.used_bytes.into()),
        count_of(pool.shared_pages.into(), "page"),
        pool.empty_slots,
        if pool.empty_slots == 1 { "slot" } else { "slots" },
        count_of(pool.copied_pages.into(), "page"),
    )
}

pub fn check_text(max_diff: Option<f32>) -> String {
    match max_diff {
        Some(d) => format!(
            "Checked against the f64 CPU reference every {CHECK_EVERY_TOKENS} tokens: largest difference {d:.2e}."
        ),
        None => {
            format!("The kernel's output is checked against the f64 CPU reference every {CHECK_EVERY_TOKENS} tokens.")
        }
    }
}

/// The largest difference for a script to read: `none` before the first check.
pub fn max_diff_value(max_diff: Option<f32>) -> String {
    max_diff.map_or_else(|| "none".into(), |d| format!("{d:e}"))
}

/// `2 × sliding layers (window 1,024): 9 pages live, 2 shared, 40 recycled`.
pub fn grid_heading(layer: &PagesView) -> String {
    let title = match layer.kind {
        LayerKind::Global => "global layers".to_string(),
        LayerKind::Sliding { window_tokens } => {
            format!("sliding layers (window {})", format_thousands(window_tokens.into()))
        }
        LayerKind::Chunked { chunk_tokens } => {
            format!("chunked layers (chunk {})", format_thousands(chunk_tokens.into()))
        }
        kind => format!("{} layers", kind.noun()),
    };
    format!(
        "{} × {title}: {} pages live, {} shared, {} recycled",
        layer.storing_layers, layer.live_pages, layer.shared_pages, layer.recycled_pages
    )
}

pub fn grid_label(layer: &PagesView) -> String {
    format!("{} pages of {PAGE_TOKENS} tokens", layer.pages.len())
}

/// Why the kernel runs fewer dims than the model's heads have, when it does.
pub fn narrowed_text(layer: &PagesView) -> Option<String> {
    layer.narrowed.map(|(model_dim, run_dim)| {
        format!(" The kernel runs {run_dim} of the model's {model_dim} dims per head (its maximum).")
    })
}

/// One page of a grid as drawn: its classes (owner, and `reused`), its fill and its tooltip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageCell {
    pub class: String,
    pub style: String,
    pub title: String,
}

impl PageCell {
    pub fn of(page: PageView) -> Self {
        let owner = match page.owners {
            0 => "free",
            1 => "own-a",
            2 => "own-b",
            _ => "shared",
        };
        let PageView { filled_tokens: filled, reuses, .. } = page;
        PageCell {
            class: format!("page {owner}{}", if reuses > 0 { " reused" } else { "" }),
            style: format!("--fill: {}%", filled * 100 / PAGE_TOKENS),
            title: format!("{filled}/{PAGE_TOKENS} tokens, reused {reuses}×"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn the_intro_notes_windows_longer_than_the_run() {
        let llama = intro_text(preset("llama-3-8b").unwrap());
        assert!(llama.starts_with("Request A reads a 40-token prompt and generates up to 256 tokens."));
        assert!(llama.contains("runs the paged decode kernel, which reads K and V through the request's page table"));
        assert!(!llama.contains("Note:"));
        let scout = intro_text(preset("llama-4-scout").unwrap());
        assert!(scout.ends_with(
            " Note: its chunked window of 8,192 tokens is longer than this run, so no page is recycled here."
        ));
    }

    #[test]
    fn hybrids_run_their_attention_layers_only() {
        use crate::model::encoding::decode_model;
        assert_eq!(recurrent_note(preset("llama-3-8b").unwrap()), None);
        assert!(can_run(preset("llama-3-8b").unwrap()));
        // Jamba-like: 4 attention and 28 Mamba layers of (32,768 + 262,144) elements x 2 B = 589,824 B
        // each: 28 x 589,824 = 16,515,072 B.
        let jamba = decode_model(
            "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144",
        )
        .unwrap();
        assert!(can_run(&jamba));
        assert_eq!(
            recurrent_note(&jamba).as_deref(),
            Some(
                "The demo runs the 4 attention layers only; the 28 state-space layers keep a constant state \
                 of 16,515,072 bytes = 16.52 MB (15.75 MiB) per sequence, not simulated here."
            )
        );
        let demo: Vec<LayerKind> = demo_layers(&jamba, KERNEL_MAX_HEAD_DIM).iter().map(|l| l.kind).collect();
        assert_eq!(demo, [LayerKind::Global]);
        // Falcon-H1's shape: Mamba-2 beside attention in each of 4 layers, 4 x 589,824 = 2,359,296 B.
        let falcon = decode_model("L4.d4096.h32.kv8.hd128.bas.ssm32768-262144-2-2-100000000.ctx4096").unwrap();
        assert_eq!(
            recurrent_note(&falcon).as_deref(),
            Some(
                "The demo runs the 4 attention layers only; the state-space mixers beside its 4 attention \
                 layers keep a constant state of 2,359,296 bytes = 2.36 MB (2.25 MiB) per sequence, not simulated here."
            )
        );
        // A pure Mamba: 64 x (20,480 + 81,920) x 2 B = 13,107,200 B, nothing to page.
        let mut mamba =
            decode_model("L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048").unwrap();
        mamba.name = "Mamba".into();
        assert!(!can_run(&mamba));
        assert_eq!(
            recurrent_note(&mamba).as_deref(),
            Some(
                "Mamba has no attention layer, so there is no KV cache to page and the demo does not start: its 64 \
                 state-space layers keep a constant state of 13,107,200 bytes = 13.11 MB (12.50 MiB) per \
                 sequence instead."
            )
        );
    }

    #[test]
    fn counters_before_and_after_b_arrives() {
        let mut snap = Snapshot::idle(256);
        assert_eq!(start_label(snap.state), "Start decoding");
        assert_eq!(status_text(&snap), "idle · request A: 0 of 256 tokens · Request B: not arrived yet");
        assert_eq!(b_tokens_value(&snap), "0");
        (snap.state, snap.a_tokens, snap.b_tokens, snap.shared_tokens) = (RunState::Running, 90, Some(34), 32);
        assert_eq!(start_label(snap.state), "Restart");
        assert_eq!(
            status_text(&snap),
            "running · request A: 90 of 256 tokens · Request B: 34 tokens (32 shared with A, not recomputed)"
        );
        assert_eq!(b_tokens_value(&snap), "34");
        (snap.demo_buffer_bytes, snap.kernel_steps, snap.kernel_ms_total) = (2048, 4, 1.0);
        assert_eq!(
            buffers_text(&snap),
            "This demo's K/V pools hold 2,048 bytes = 2.05 KB (2.00 KiB) (f32, one layer per type, room for both \
             requests). 4 kernel launches, 0.25 ms each on average."
        );
        // 3 pages in use of 32 (3 x 131,072 B); 48 slots, 8 empty: 16.7 %.
        let pool = PoolView {
            used_bytes: 393_216,
            live_pages: 3,
            shared_pages: 2,
            capacity_pages: 32,
            empty_slots: 8,
            copied_pages: 1,
        };
        assert_eq!(
            pool_text(&pool),
            "Pool in use: 3 of 32 pages, 393,216 bytes = 393.22 KB (384.00 KiB) of K and V (f32); 2 pages shared by \
             both requests; 8 empty slots in pages in use (16.7 % of their slots); 1 page copied on write."
        );
        assert_eq!(
            pool_text(&PoolView::default()),
            "Pool in use: 0 of 0 pages, 0 bytes of K and V (f32); 0 pages shared by both requests; 0 empty slots in \
             pages in use; 0 pages copied on write."
        );
    }

    #[test]
    fn the_check_reads_none_until_the_first_comparison() {
        assert_eq!(max_diff_value(None), "none");
        assert_eq!(max_diff_value(Some(1.5e-7)), "1.5e-7");
        assert!(check_text(None).starts_with("The kernel's output is checked"));
        assert_eq!(
            check_text(Some(1.5e-7)),
            "Checked against the f64 CPU reference every 64 tokens: largest difference 1.50e-7."
        );
    }

    #[test]
    fn grids_name_their_kind_and_draw_each_page() {
        let layer = PagesView {
            kind: LayerKind::Sliding { window_tokens: 1024 },
            storing_layers: 52,
            pages: vec![
                PageView { owners: 3, filled_tokens: 16, reuses: 0 },
                PageView { owners: 2, filled_tokens: 4, reuses: 1 },
                PageView { owners: 0, filled_tokens: 16, reuses: 2 },
            ],
            live_pages: 2,
            shared_pages: 1,
            recycled_pages: 3,
            narrowed: Some((512, 256)),
        };
        assert_eq!(grid_heading(&layer), "52 × sliding layers (window 1,024): 2 pages live, 1 shared, 3 recycled");
        assert_eq!(grid_label(&layer), "3 pages of 16 tokens");
        assert_eq!(
            narrowed_text(&layer).as_deref(),
            Some(" The kernel runs 256 of the model's 512 dims per head (its maximum).")
        );
        let cells: Vec<PageCell> = layer.pages.iter().copied().map(PageCell::of).collect();
        let classes: Vec<&str> = cells.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(classes, ["page shared", "page own-b reused", "page free reused"]);
        assert_eq!((cells[1].style.as_str(), cells[1].title.as_str()), ("--fill: 25%", "4/16 tokens, reused 1×"));
    }
}
