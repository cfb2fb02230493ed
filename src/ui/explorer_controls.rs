//! The explorer's controls: model, layer, input (typed text, generated sequence, cross-attention),
//! tokens, mask override with window and chunk, seed, heads, pooling, colour scale, teaching heads,
//! tile grid, step-through, copy link and exports. Every control writes the app state (and so the URL).

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::browser;
use super::model_picker::ModelSelect;
use super::user_checkpoint;
use crate::attention::pooled::Pool;
use crate::attention::tokens::TokenMode;
use crate::colormap::ColorScale;
use crate::model::Mask;
use crate::model::Model;
use crate::state::AppState;
use crate::ui::params::{edit, set_param};
use crate::views::heatmaps::controls::{
    copy_label, generated_count, heads_field, input_choices, mask_change, mask_choice, mask_label, text_label,
    token_label,
};
use crate::views::heatmaps::input_mode::{DEFAULT_GENERATED_TOKENS, InputMode};
use crate::views::heatmaps::params::{MAX_GENERATED, MAX_TEXT_CHARS};
use crate::views::link::on_off;

#[component]
pub fn ExplorerControls(
    state: RwSignal<AppState>,
    model: Memo<Model>,
    on_export_png: Callback<()>,
    on_export_head: Callback<()>,
) -> impl IntoView {
    let n_layers = move || model.with(Model::n_layers);
    // Real weights read their own tokens under their own masks, all exact: the controls for the
    // synthetic layouts' inputs, masks, pooling and designed heads are left out while they are shown.
    let synthetic = Signal::derive(move || state.with(|s| !user_checkpoint::shows_real_weights(&s.model)));

    view! {
        <form class="controls explorer-controls" on:submit=|ev| ev.prevent_default() data-testid="explorer-controls">
            <label>
                "Model"
                <ModelSelect state/>
            </label>
            <label>
                "Layer"
                <input type="number" min="0" data-testid="layer-input"
                    prop:max=move || n_layers().saturating_sub(1)
                    prop:value=move || state.with(|s| s.model.layer)
                    on:input=move |ev| { let _ = set_param(state, "layer", &event_target_value(&ev)); }/>
            </label>
            <InputControls state=state synthetic=synthetic/>
            <Show when=move || synthetic.get()>
                <MaskControls state=state/>
            </Show>
            <label>
                "Seed"
                <input type="number" min="0" data-testid="seed-input"
                    prop:value=move || state.with(|s| s.input.seed.to_string())
                    on:input=move |ev| { let _ = set_param(state, "seed", &event_target_value(&ev)); }/>
            </label>
            <HeadsField state=state/>
            <Show when=move || synthetic.get()>
            <label>
                "Pooling"
                <select data-testid="pool-select" on:change=move |ev| {
                    let _ = set_param(state, "pool", &event_target_value(&ev));
                }>
                    {[Pool::Max, Pool::Mean].into_iter().map(|p| view! {
                        <option value=p.name() selected=move || state.with(|s| s.explorer.pool == p)>{p.name()}</option>
                    }).collect_view()}
                </select>
            </label>
            </Show>
            <label>
                "Colour"
                <select data-testid="scale-select" on:change=move |ev| {
                    let _ = set_param(state, "scale", &event_target_value(&ev));
                }>
                    {[ColorScale::Linear, ColorScale::Log].into_iter().map(|c| view! {
                        <option value=c.name() selected=move || state.with(|s| s.explorer.scale == c)>{c.name()}</option>
                    }).collect_view()}
                </select>
            </label>
            <Toggles state=state synthetic=synthetic/>
            <Actions on_export_png=on_export_png on_export_head=on_export_head/>
        </form>
    }
}

/// Where the queries come from: the input select, the texts, the generated length and the tokens.
#[component]
fn InputControls(state: RwSignal<AppState>, synthetic: Signal<bool>) -> impl IntoView {
    let mode = move || state.with(|s| InputMode::of(s));
    let set_mode = move |m: InputMode| {
        if let Some(changes) = state.try_with_untracked(|s| m.changes(s)) {
            let _ = edit(state, &changes);
        }
    };
    view! {
        <label>
            "Input"
            <select data-testid="input-mode" on:change=move |ev| set_mode(InputMode::from_id(&event_target_value(&ev)))>
                {move || input_choices(synthetic.get())
                    .into_iter()
                    .map(|(m, label)| view! { <option value=m.id() selected=move || mode() == m>{label}</option> })
                    .collect_view()}
            </select>
        </label>
        <Show when=move || mode() != InputMode::Generated>
            <label class="wide">
                {move || text_label(mode())}
                // A text area: code and generated text keep their line breaks.
                <textarea data-testid="text-input" rows="2" maxlength=MAX_TEXT_CHARS
                    prop:value=move || state.with(|s| s.input.text.clone())
                    on:input=move |ev| { let _ = edit(state, &[("text", Some(&event_target_value(&ev)))]); }></textarea>
            </label>
        </Show>
        <Show when=move || mode() == InputMode::Cross>
            <label class="wide">
                "Keys and values from (encoder text)"
                <input type="text" data-testid="src-input" maxlength=MAX_TEXT_CHARS
                    prop:value=move || state.with(|s| s.explorer.src.clone().unwrap_or_default())
                    on:input=move |ev| { let _ = edit(state, &[("src", Some(&event_target_value(&ev)))]); }/>
            </label>
        </Show>
        <Show when=move || mode() == InputMode::Generated>
            <label>
                "Tokens (n)"
                <input type="number" min="1" max=MAX_GENERATED data-testid="n-input"
                    prop:value=move || state.with(|s| s.input.seq_tokens.unwrap_or(DEFAULT_GENERATED_TOKENS))
                    on:change=move |ev| { if let Some(n) = generated_count(&event_target_value(&ev)) { let _ = set_param(state, "n", &n.to_string()); } }/>
            </label>
        </Show>
        <Show when=move || mode() != InputMode::Generated && synthetic.get()>
            <label>
                "Tokens"
                <select data-testid="tok-select" on:change=move |ev| {
                    let _ = set_param(state, "tok", &event_target_value(&ev));
                }>
                    {TokenMode::ALL.into_iter().map(|t| view! {
                        <option value=t.name() selected=move || state.with(|s| s.explorer.tok == t)>{token_label(t)}</option>
                    }).collect_view()}
                </select>
            </label>
        </Show>
    }
}

/// The mask override, with the window or chunk it needs.
/// The mask select, with the window or chunk size of the kind chosen (the distance view's too).
#[component]
pub(crate) fn MaskControls(state: RwSignal<AppState>) -> impl IntoView {
    let mode = move || state.with(|s| InputMode::of(s));
    let mask_value = move || state.with(|s| mask_choice(&s.input));
    view! {
        <label>
            "Mask"
            <select data-testid="mask-select" prop:disabled=move || mode() == InputMode::Cross on:change=move |ev| {
                // "layer": each layer's own mask, which is a link without `mask`.
                let v = event_target_value(&ev);
                let _ = edit(state, &[("mask", mask_change(&v))]);
            }>
                <option value="layer" selected=move || mask_value() == "layer">"the layer's own"</option>
                {Mask::KIND_NAMES.into_iter().map(|kind| {
                    view! { <option value=kind selected=move || mask_value() == kind>{mask_label(kind)}</option> }
                }).collect_view()}
            </select>
        </label>
        <Show when=move || mask_value() == "sliding">
            <MaskSize state=state key="window" label="Window" value=|s: &AppState| s.input.window_tokens()/>
        </Show>
        <Show when=move || mask_value() == "chunked">
            <MaskSize state=state key="chunk" label="Chunk" value=|s: &AppState| s.input.chunk_tokens()/>
        </Show>
    }
}

/// The heads field: written to the link once it parses, with the parser's complaint beside it if not.
#[component]
fn HeadsField(state: RwSignal<AppState>) -> impl IntoView {
    let heads_text = RwSignal::new(state.with_untracked(|s| s.explorer.heads.to_param()));
    let heads_error = RwSignal::new(None::<String>);
    view! {
        <label>
            "Heads"
            <input type="text" data-testid="heads-input" placeholder="all, or 0-3,8" size="8"
                prop:value=move || heads_text.get()
                on:change=move |ev| {
                    match heads_field(&event_target_value(&ev)) {
                        Ok(sel) => {
                            heads_error.set(None);
                            heads_text.set(sel.to_param());
                            let _ = set_param(state, "heads", &sel.to_param());
                        }
                        Err(e) => heads_error.set(Some(e)),
                    }
                }/>
            {move || heads_error.get().map(|e| view! { <small class="field-error" role="alert">{e}</small> })}
        </label>
    }
}

/// The on/off settings: teaching heads, kernel tiles, step-through, head mixing, RoPE frequencies.
#[component]
fn Toggles(state: RwSignal<AppState>, synthetic: Signal<bool>) -> impl IntoView {
    view! {
        <fieldset class="toggles">
            <Show when=move || synthetic.get()>
            <label class="check"><input type="checkbox" data-testid="teach-toggle"
                prop:checked=move || state.with(|s| s.explorer.teach)
                on:change=move |ev| { let on = event_target_checked(&ev); let _ = set_param(state, "teach", &on_off(on)); }/>"teaching heads"</label>
            </Show>
            <label class="check"><input type="checkbox" data-testid="tiles-toggle"
                prop:checked=move || state.with(|s| s.explorer.tiles)
                on:change=move |ev| { let on = event_target_checked(&ev); let _ = set_param(state, "tiles", &on_off(on)); }/>"kernel tiles"</label>
            <Show when=move || synthetic.get()>
            <label class="check"><input type="checkbox" data-testid="steps-toggle"
                prop:checked=move || state.with(|s| s.explorer.steps)
                on:change=move |ev| { let on = event_target_checked(&ev); let _ = set_param(state, "steps", &on_off(on)); }/>"step-through"</label>
            <label class="check"><input type="checkbox" data-testid="mix-toggle"
                prop:checked=move || state.with(|s| s.explorer.mix.is_some())
                on:change=move |ev| { let on = event_target_checked(&ev); let _ = edit(state, &[("mix", on.then_some("last"))]); }/>"head mixing (W_O)"</label>
            </Show>
            <label class="check"><input type="checkbox" data-testid="rope-toggle"
                prop:checked=move || state.with(|s| s.explorer.rope)
                on:change=move |ev| { let on = event_target_checked(&ev); let _ = set_param(state, "rope", &on_off(on)); }/>"RoPE frequencies"</label>
        </fieldset>
    }
}

/// Copy link, and the exports.
#[component]
fn Actions(on_export_png: Callback<()>, on_export_head: Callback<()>) -> impl IntoView {
    let copied = RwSignal::new(None::<bool>);
    view! {
        <div class="actions">
            <button type="button" class="copy" data-testid="copy-link" on:click=move |_| {
                spawn_local(async move { copied.try_set(Some(browser::copy_to_clipboard(&browser::current_href()).await)); });
            }>
                {move || copy_label(copied.get())}
            </button>
            <button type="button" class="secondary" data-testid="export-png" on:click=move |_| on_export_png.run(())>"PNG"</button>
            <button type="button" class="secondary" data-testid="export-npy" on:click=move |_| on_export_head.run(())>"Head .npz"</button>
        </div>
    }
}

/// The sliding window's or the chunk's size (`key` is `window` or `chunk`, its input `<key>-input`).
#[component]
fn MaskSize(
    state: RwSignal<AppState>,
    key: &'static str,
    label: &'static str,
    value: fn(&AppState) -> u64,
) -> impl IntoView {
    view! {
        <label>
            {label}
            <input type="number" min="1" data-testid=format!("{key}-input")
                prop:value=move || state.with(value)
                on:input=move |ev| { let _ = set_param(state, key, &event_target_value(&ev)); }/>
        </label>
    }
}
