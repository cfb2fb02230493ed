//! The compare view: the chosen model re-expressed as each KV-saving variant, with exact bytes and
//! the ratio to MHA at the chosen context and dtype, the same at every dtype, the attention
//! parameters each variant keeps or saves, and where the prefill FLOPs go.

use leptos::prelude::*;

use super::chart::BarTrack;
use super::model_picker::{KeyFigures, ModelPicker};
use crate::model::describe::variant_label;
use crate::model::flops::{crossover_tokens, model_prefill_flops};
use crate::model::params::attn_params_total;
use crate::model::units::{format_bytes, format_params, format_thousands};
use crate::model::variants::mha_baseline;
use crate::model::{
    DType, LayerKind, Mask, Model, Variant, VariantFigures, apply_variant, compare_variants, kv_total_bytes,
    standard_variants,
};
use crate::state::AppState;
use crate::views::model_figures::bytes_text;

/// The variants shown: the link's list, or the standard set for the model.
fn chosen_variants(s: &AppState, base: &Model) -> Vec<Variant> {
    s.compare.variants.clone().unwrap_or_else(|| standard_variants(base))
}

#[component]
pub fn CompareView(state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    view! {
        <section class="compare-view">
            <ModelPicker state=state model=model/>
            <KeyFigures state=state model=model/>
            <Knobs state=state/>
            <Bars state=state/>
            <DtypeMatrix state=state/>
            <ParamDeltas state=state/>
            <Flops state=state/>
        </section>
    }
}

/// Replaces the variant of the same family in the list (or appends it).
fn set_variant(state: RwSignal<AppState>, v: Variant) {
    state.update(|s| {
        let base = s.resolved_model();
        let mut list = chosen_variants(s, &base);
        let same_family = |a: &Variant| std::mem::discriminant(a) == std::mem::discriminant(&v);
        match list.iter_mut().find(|x| same_family(x)) {
            Some(slot) => *slot = v,
            None => list.push(v),
        }
        s.compare.variants = Some(list);
    });
}

/// The parameters of the parameterised variants: GQA groups, window, hybrid ratio, MLA rank, sharing.
#[component]
fn Knobs(state: RwSignal<AppState>) -> impl IntoView {
    let find = move |pick: fn(&Variant) -> Option<u64>, fallback: u64| {
        state.with(|s| {
            let base = s.resolved_model();
            chosen_variants(s, &base).iter().find_map(pick).unwrap_or(fallback)
        })
    };
    let gqa = move || find(|v| if let Variant::Gqa { groups } = v { Some(u64::from(*groups)) } else { None }, 8);
    let window =
        move || find(|v| if let Variant::Sliding { window_tokens } = v { Some(*window_tokens) } else { None }, 4096);
    let ratio = move || {
        find(
            |v| {
                if let Variant::Hybrid { local_per_global, .. } = v { Some(u64::from(*local_per_global)) } else { None }
            },
            5,
        )
    };
    let hybrid_w =
        move || find(|v| if let Variant::Hybrid { window_tokens, .. } = v { Some(*window_tokens) } else { None }, 1024);
    let rank = move || {
        find(|v| if let Variant::Mla { kv_lora_rank, .. } = v { Some(u64::from(*kv_lora_rank)) } else { None }, 512)
    };
    let rope =
        move || find(|v| if let Variant::Mla { rope_dim, .. } = v { Some(u64::from(*rope_dim)) } else { None }, 64);
    let share = move || {
        find(|v| if let Variant::CrossLayer { group_size } = v { Some(u64::from(*group_size)) } else { None }, 2)
    };
    let divisors = move || {
        let h = state.with(|s| s.resolved_model().n_q_heads);
        (1..h).filter(|g| h % g == 0).collect::<Vec<u32>>()
    };
    let num = |ev: &leptos::ev::Event| event_target_value(ev).trim().parse::<u64>().ok().filter(|&n| n >= 1);
    let small =
        |ev: &leptos::ev::Event| event_target_value(ev).trim().parse::<u32>().ok().filter(|n| (1..=4096).contains(n));
    view! {
        <form class="controls knobs" on:submit=|ev| ev.prevent_default()>
            <label>
                "GQA: KV heads"
                <select data-testid="gqa-groups" on:change=move |ev| {
                    if let Ok(g) = event_target_value(&ev).parse::<u32>() { set_variant(state, Variant::Gqa { groups: g }) }
                }>
                    {move || divisors().into_iter().map(|g| view! {
                        <option value=g selected=move || gqa() == u64::from(g)>{g}</option>
                    }).collect_view()}
                </select>
            </label>
            <label>
                "Sliding window W"
                <input type="number" min="1" data-testid="window-tokens" prop:value=move || window().to_string()
                    on:change=move |ev| { if let Some(w) = num(&ev) { set_variant(state, Variant::Sliding { window_tokens: w }) } }/>
            </label>
            <label>
                "Hybrid r (sliding per global)"
                <input type="number" min="1" data-testid="hybrid-ratio" prop:value=move || ratio().to_string()
                    on:change=move |ev| { if let Some(r) = small(&ev) { set_variant(state, Variant::Hybrid { local_per_global: r, window_tokens: hybrid_w() }) } }/>
            </label>
            <label>
                "Hybrid window"
                <input type="number" min="1" data-testid="hybrid-window" prop:value=move || hybrid_w().to_string()
                    on:change=move |ev| { if let Some(w) = num(&ev) { set_variant(state, Variant::Hybrid { local_per_global: ratio() as u32, window_tokens: w }) } }/>
            </label>
            <label>
                "MLA latent rank"
                <input type="number" min="1" data-testid="mla-rank" prop:value=move || rank().to_string()
                    on:change=move |ev| { if let Some(r) = num(&ev) { set_variant(state, Variant::Mla { kv_lora_rank: r.min(1 << 20) as u32, rope_dim: rope() as u32 }) } }/>
            </label>
            <label>
                "MLA RoPE dims"
                <input type="number" min="0" data-testid="mla-rope" prop:value=move || rope().to_string()
                    on:change=move |ev| {
                        if let Ok(r) = event_target_value(&ev).trim().parse::<u32>() && r <= 4096 {
                            set_variant(state, Variant::Mla { kv_lora_rank: rank() as u32, rope_dim: r })
                        }
                    }/>
            </label>
            <label>
                "Layers sharing a cache"
                <input type="number" min="1" data-testid="share-group" prop:value=move || share().to_string()
                    on:change=move |ev| { if let Some(g) = small(&ev) { set_variant(state, Variant::CrossLayer { group_size: g }) } }/>
            </label>
            <button type="button" class="chip" data-testid="variants-reset" on:click=move |_| state.update(|s| s.compare.variants = None)>
                "Standard set"
            </button>
        </form>
    }
}

/// Rows of the comparison at the chosen context and dtype, or an explanation.
fn rows(s: &AppState) -> (Model, Result<Vec<VariantFigures>, String>) {
    let base = s.resolved_model();
    let variants = chosen_variants(s, &base);
    let rows = compare_variants(&base, &variants, s.kv.ctx_tokens, s.kv.dtype).map_err(|e| e.to_string());
    (base, rows)
}

/// Variants listed but impossible for this model (e.g. 5 groups of 32 heads), with why.
fn skipped(s: &AppState, base: &Model) -> Vec<String> {
    chosen_variants(s, base)
        .into_iter()
        .filter_map(|v| apply_variant(base, v).err().map(|e| format!("{}: {e}", variant_label(v, base))))
        .collect()
}

/// The bars: whole cache at the context, exact bytes, ratio to MHA.
#[component]
fn Bars(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <section class="panel">
            <h3>{move || state.with(|s| format!("KV cache at {} tokens, {}", format_thousands(s.kv.ctx_tokens.into()), s.kv.dtype.label()))}</h3>
            {move || state.with(|s| {
                let (base, rows) = rows(s);
                let rows = match rows {
                    Ok(r) => r,
                    Err(e) => return view! { <p class="status error">{e}</p> }.into_any(),
                };
                let max = rows.iter().map(|r| r.kv_total_bytes).max().unwrap_or(1).max(1);
                let bars = rows.iter().map(|r| {
                    let fraction = r.kv_total_bytes as f64 / max as f64;
                    let ratio = if r.variant == Variant::Mha { "the baseline".to_string() } else { format!("{:.4} × MHA", r.ratio_to_mha) };
                    view! {
                        <li class="bar-row" data-testid="variant-row" data-variant=r.variant.to_string()
                            data-bytes=r.kv_total_bytes.to_string() data-bytes-per-token=r.kv_bytes_per_token.to_string()
                            data-ratio=format!("{}", r.ratio_to_mha)>
                            <span class="bar-label">{variant_label(r.variant, &base)}</span>
                            <BarTrack fraction=fraction class=if r.variant == Variant::AsPublished { "published" } else { "variant" }/>
                            <span class="bar-value">
                                {bytes_text(r.kv_total_bytes)}
                                <small>{format!(" · {ratio} · {} B per token", format_thousands(r.kv_bytes_per_token))}</small>
                            </span>
                        </li>
                    }
                }).collect_view();
                let skipped = skipped(s, &base);
                view! {
                    <ul class="bars">{bars}</ul>
                    {(!skipped.is_empty()).then(|| view! {
                        <p class="status" data-testid="variants-skipped">"Not shown: " {skipped.join("; ")}</p>
                    })}
                }.into_any()
            })}
            <p class="explain">
                "Every variant starts from the same plain MHA form of the model (all layers global, one KV head per "
                "query head, its head dimension) and applies one technique, so each bar isolates one idea; "
                "\"As published\" is the real model with all of its techniques combined. Bars share one linear scale."
            </p>
        </section>
    }
}

/// The same comparison at every dtype: exact bytes in each cell.
#[component]
fn DtypeMatrix(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <section class="panel">
            <h3>{move || state.with(|s| format!("At every dtype ({} tokens)", format_thousands(s.kv.ctx_tokens.into())))}</h3>
            <div class="table-scroll">
                <table class="data matrix">
                    <thead><tr>
                        <th scope="col">"Variant"</th>
                        {DType::ALL.into_iter().map(|d| view! { <th scope="col">{format!("{} ({} bits)", d.label(), d.bits())}</th> }).collect_view()}
                    </tr></thead>
                    <tbody>
                        {move || state.with(|s| {
                            let base = s.resolved_model();
                            chosen_variants(s, &base).into_iter().filter_map(|v| apply_variant(&base, v).ok().map(|m| (v, m))).map(|(v, m)| {
                                let cells = DType::ALL.into_iter().map(|d| {
                                    let bytes = kv_total_bytes(&m, s.kv.ctx_tokens, d).ok();
                                    let chosen = d == s.kv.dtype;
                                    view! {
                                        <td class="num" class:chosen=chosen data-testid="dtype-cell" data-variant=v.to_string() data-dtype=d.url_name()
                                            data-value=bytes.map_or_else(|| "overflow".into(), |b| b.to_string())
                                            title=bytes.map(|b| format!("{} bytes", format_thousands(b))).unwrap_or_default()>
                                            {bytes.map_or_else(|| "overflow".into(), format_bytes)}
                                        </td>
                                    }
                                }).collect_view();
                                view! { <tr><th scope="row">{variant_label(v, &base)}</th>{cells}</tr> }
                            }).collect_view()
                        })}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

/// Attention weights of the whole model per variant, and the change against MHA.
#[component]
fn ParamDeltas(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <section class="panel">
            <h3>"Attention parameters (whole model)"</h3>
            {move || state.with(|s| {
                let (base, rows) = rows(s);
                let Ok(rows) = rows else { return ().into_any() };
                let mha = attn_params_total(&mha_baseline(&base));
                let body = rows.iter().map(|r| {
                    let delta = r.attn_params_delta_vs_mha;
                    let sign = if delta < 0 { "−" } else if delta > 0 { "+" } else { "±" };
                    let pct = if mha > 0 { delta as f64 / mha as f64 * 100.0 } else { 0.0 };
                    view! {
                        <tr data-testid="params-row" data-variant=r.variant.to_string() data-value=r.attn_params_total.to_string() data-delta=delta.to_string()>
                            <th scope="row">{variant_label(r.variant, &base)}</th>
                            <td class="num">{format!("{} ({})", format_thousands(r.attn_params_total), format_params(r.attn_params_total))}</td>
                            <td class="num">{format!("{sign}{} ({pct:+.1}%)", format_thousands(delta.unsigned_abs()))}</td>
                        </tr>
                    }
                }).collect_view();
                view! {
                    <div class="table-scroll">
                        <table class="data">
                            <thead><tr><th scope="col">"Variant"</th><th scope="col">"Attention parameters"</th><th scope="col">"Change against MHA"</th></tr></thead>
                            <tbody>{body}</tbody>
                        </table>
                    </div>
                    <p class="explain">
                        "GQA and MQA shrink the K and V projections with the cache (Q and O stay); K = V drops the V "
                        "projection; MLA trades K/V projections for a down- and up-projection through the latent. Sliding "
                        "windows, hybrids and cross-layer sharing save memory without changing a single weight."
                    </p>
                }.into_any()
            })}
        </section>
    }
}

/// Where a prefill's FLOPs go, per variant, and where attention starts to dominate.
#[component]
fn Flops(state: RwSignal<AppState>) -> impl IntoView {
    view! {
        <section class="panel">
            <h3>{move || state.with(|s| format!("Prefill FLOPs for {} tokens", format_thousands(s.kv.ctx_tokens.into())))}</h3>
            {move || state.with(|s| {
                let base = s.resolved_model();
                let list: Vec<(Variant, Model)> = chosen_variants(s, &base).into_iter().filter_map(|v| apply_variant(&base, v).ok().map(|m| (v, m))).collect();
                let figures: Vec<_> = list.iter().map(|(v, m)| (*v, model_prefill_flops(m, s.kv.ctx_tokens))).collect();
                let max = figures.iter().map(|(_, f)| f.total()).max().unwrap_or(1).max(1) as f64;
                let body = figures.iter().map(|(v, f)| {
                    let total = f.total();
                    let share = |x: u128| if total == 0 { 0.0 } else { x as f64 / total as f64 * 100.0 };
                    view! {
                        <tr data-testid="flops-row" data-variant=v.to_string() data-projections=f.projections.to_string()
                            data-core=f.attention_core.to_string() data-ffn=f.ffn.to_string()>
                            <th scope="row">{variant_label(*v, &base)}</th>
                            <td class="num">{format!("{} ({:.0}%)", sci(f.projections), share(f.projections))}</td>
                            <td class="num">{format!("{} ({:.0}%)", sci(f.attention_core), share(f.attention_core))}</td>
                            <td class="num">{format!("{} ({:.0}%)", sci(f.ffn), share(f.ffn))}</td>
                            <td class="num">{sci(total)}<BarTrack fraction=total as f64 / max class="variant"/></td>
                        </tr>
                    }
                }).collect_view();
                let cross = crossover_line(&base);
                view! {
                    <div class="table-scroll">
                        <table class="data">
                            <thead><tr>
                                <th scope="col">"Variant"</th><th scope="col">"Q, K, V, O projections"</th>
                                <th scope="col">"Attention core (QKᵀ and PV)"</th><th scope="col">"FFN (active)"</th><th scope="col">"Total"</th>
                            </tr></thead>
                            <tbody>{body}</tbody>
                        </table>
                    </div>
                    <p class="explain" data-testid="crossover">{cross}</p>
                }
            })}
            <p class="explain">
                "A multiply-add counts as 2 FLOPs. The core counts only the (query, key) pairs each layer's mask lets "
                "through, exactly: causal halves it, a window caps it. MLA is counted in its plain form (K and V rebuilt "
                "per head). Embeddings, the LM head, norms and softmax are left out."
            </p>
        </section>
    }
}

/// `1.23e15` style, with the exact integer kept for `title`/data attributes by the caller.
fn sci(flops: u128) -> String {
    if flops < 1_000_000 { format_thousands(flops) } else { format!("{:.3e}", flops as f64) }
}

fn crossover_line(base: &Model) -> String {
    let kind = LayerKind::Global;
    match crossover_tokens(base, kind, Mask::Causal) {
        Some(n) => format!(
            "In a global layer of this model the attention core costs as much as the projections from {} tokens on \
             (causal); below that, the projections dominate and attention's memory, not its arithmetic, is the cost.",
            format_thousands(n.into())
        ),
        None => "In this model the attention core never catches up with the projections.".into(),
    }
}
