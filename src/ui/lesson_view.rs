//! The lessons: an index of cards, then one step at a time with its text (built node by node from the
//! lesson's Markdown, never as HTML), its live figures, its check, and the live view it configures.

use leptos::prelude::*;
use wasm_bindgen::JsCast as _;

use super::browser;
use super::engine_signal::EngineSignal;
use super::live_views::kv::KvView;
use super::live_views::live_view;
use crate::model::Model;
use crate::state::{AppState, View};
use crate::views::lesson::check::{Answer, Check, Expected, Verdict};
use crate::views::lesson::figures::figure;
use crate::views::lesson::markup::{Element, Node};
use crate::views::lesson::progress::CourseProgress;
use crate::views::lesson::weights::lesson_sources;
use crate::views::lesson::{Lesson, catalogue, highlight};

#[component]
pub fn LessonView(state: RwSignal<AppState>, model: Memo<Model>, engine: EngineSignal) -> impl IntoView {
    let place = Memo::new(move |_| state.with(|s| s.lesson.current()));
    let progress = RwSignal::new(CourseProgress::parse(&browser::stored(PROGRESS_KEY).unwrap_or_default()));
    Effect::new(move |_| {
        if let Some((lesson, step)) = place.get() {
            progress.update(|p| p.mark(&lesson.id, step));
            browser::store(PROGRESS_KEY, &progress.with_untracked(CourseProgress::to_text));
        }
    });
    let go = move |lesson: &Lesson, step: u32| {
        if (1..=lesson.steps.len() as u32).contains(&step) {
            state.set(AppState::at_step(&lesson.id, step));
        }
    };
    // Arrow keys turn the pages, except where arrows already mean something: form controls and the
    // enlarged head.
    let keys = window_event_listener(leptos::ev::keydown, move |ev| {
        let Some((lesson, step)) = place.try_get_untracked().flatten() else { return };
        let target = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok());
        let busy = target.is_some_and(|t| {
            matches!(t.tag_name().as_str(), "INPUT" | "SELECT" | "TEXTAREA" | "BUTTON")
                || t.closest("[data-testid=focus-panel]").ok().flatten().is_some()
        });
        if busy || ev.alt_key() || ev.ctrl_key() || ev.meta_key() {
            return;
        }
        match ev.key().as_str() {
            "ArrowRight" => go(lesson, step + 1),
            "ArrowLeft" => go(lesson, step.saturating_sub(1)),
            _ => {}
        }
    });
    // The view comes and goes with the tab: its listener must go with it.
    on_cleanup(move || keys.remove());
    move || match place.get() {
        None => view! { <LessonIndex state=state progress=progress/> }.into_any(),
        Some((lesson, step)) => {
            view! { <LessonStep state=state model=model engine=engine lesson=lesson step=step/> }.into_any()
        }
    }
}

/// Where the steps seen are kept in the browser.
const PROGRESS_KEY: &str = "attention-lab.lesson-progress";

#[component]
fn LessonIndex(state: RwSignal<AppState>, progress: RwSignal<CourseProgress>) -> impl IntoView {
    view! {
        <section class="lessons" data-testid="lesson-index">
            <h2>"Lessons"</h2>
            <p class="explain">"Each lesson walks through one idea on the live views: change anything, the text's figures follow. \
                Each card says what its numbers come from: the real weights of the model trained here, synthetic \
                weights or inputs drawn from a seed, or a layout's arithmetic alone."</p>
            <ul class="lesson-cards">
                {catalogue().iter().map(|lesson| {
                    let id = lesson.id.clone();
                    let steps = lesson.steps.len() as u32;
                    let sources = lesson_sources(lesson);
                    let source_ids = sources.iter().map(|s| s.id()).collect::<Vec<_>>().join(" ");
                    let source_text = sources.iter().map(|s| s.label()).collect::<Vec<_>>().join(" · ");
                    let seen = {
                        let id = id.clone();
                        Signal::derive(move || progress.with(|p| p.seen(&id, steps)))
                    };
                    view! {
                        <li class="lesson-card">
                            <button type="button" data-testid="lesson-link" data-lesson=lesson.id.clone()
                                on:click=move |_| state.set(AppState::at_step(&id, 1))>
                                <strong>{lesson.title.clone()}</strong>
                                <span>{lesson.goal.clone()}</span>
                                <small data-testid="lesson-weights" data-sources=source_ids>{source_text}</small>
                                <small data-testid="lesson-progress" data-seen=seen>
                                    {move || format!("{steps} steps · {} seen", seen.get())}
                                </small>
                            </button>
                        </li>
                    }
                }).collect_view()}
            </ul>
            <button type="button" data-testid="lesson-progress-clear" on:click=move |_| {
                progress.set(CourseProgress::default());
                browser::store(PROGRESS_KEY, "");
            }>"Forget which steps I have seen"</button>
        </section>
    }
}

#[component]
fn LessonStep(
    state: RwSignal<AppState>,
    model: Memo<Model>,
    engine: EngineSignal,
    lesson: &'static Lesson,
    step: u32,
) -> impl IntoView {
    let count = lesson.steps.len() as u32;
    let written = &lesson.steps[step as usize - 1];
    let shown = written.view.parse::<View>().unwrap_or(View::Kv);
    let full_view_href = move || {
        state.with(|s| {
            let mut full = s.clone();
            full.show_view(shown);
            format!("?{}", full.to_query())
        })
    };
    let live_view = live_view(shown, state, model, engine)
        .unwrap_or_else(|| view! { <KvView state=state model=model engine=engine/> }.into_any());
    let highlight_style = highlight::style_text(written.highlight.as_deref());
    let showing = browser::show_page_style(&highlight_style);
    on_cleanup(move || browser::clear_page_style(showing));
    view! {
        // The rules the page adopted, as text (the lesson walk reads them).
        <div hidden data-testid="lesson-highlight">{highlight_style}</div>
        <section class="lesson" data-testid="lesson-step" data-lesson=lesson.id.clone() data-step=step>
            <nav class="lesson-nav" aria-label="Lesson steps">
                <button type="button" data-testid="lesson-index-link" on:click=move |_| state.update(AppState::show_lesson_index)>
                    "All lessons"
                </button>
                <span class="where">{format!("{} · step {step} of {count}", lesson.title)}</span>
                <button type="button" data-testid="lesson-prev" disabled={step <= 1}
                    on:click=move |_| state.set(AppState::at_step(&lesson.id, step - 1))>"← Previous"</button>
                <button type="button" data-testid="lesson-next" disabled={step >= count}
                    on:click=move |_| state.set(AppState::at_step(&lesson.id, step + 1))>"Next →"</button>
            </nav>
            <h2>{written.title.clone()}</h2>
            <div class="lesson-text">{render_nodes(&written.body, state, model)}</div>
            {written.check.clone().map(|check| view! { <CheckBox check=check state=state model=model/> })}
            <p class="lesson-actions">
                <button type="button" data-testid="lesson-reset" on:click=move |_| state.set(AppState::at_step(&lesson.id, step))>
                    "Reset this step"
                </button>
                <a data-testid="lesson-open-view" href=full_view_href>"Open this in the full view"</a>
            </p>
        </section>
        {live_view}
    }
}

/// Lesson text as DOM nodes, one by one.
fn render_nodes(nodes: &[Node], state: RwSignal<AppState>, model: Memo<Model>) -> Vec<AnyView> {
    nodes.iter().map(|node| render_node(node, state, model)).collect()
}

fn render_node(node: &Node, state: RwSignal<AppState>, model: Memo<Model>) -> AnyView {
    match node {
        Node::Text(text) => text.clone().into_any(),
        Node::Code(code) => view! { <code>{code.clone()}</code> }.into_any(),
        Node::Figure(name) => view! { <LiveFigure name=name.clone() state=state model=model/> }.into_any(),
        Node::Break => view! { <br/> }.into_any(),
        Node::Rule => view! { <hr/> }.into_any(),
        Node::Element(element, children) => {
            let children = render_nodes(children, state, model);
            match element {
                Element::Paragraph => view! { <p>{children}</p> }.into_any(),
                Element::Heading(_) => view! { <h3>{children}</h3> }.into_any(),
                Element::Quote => view! { <blockquote>{children}</blockquote> }.into_any(),
                Element::CodeBlock => view! { <pre><code>{children}</code></pre> }.into_any(),
                Element::List(Some(start)) => view! { <ol start=*start>{children}</ol> }.into_any(),
                Element::List(None) => view! { <ul>{children}</ul> }.into_any(),
                Element::Item => view! { <li>{children}</li> }.into_any(),
                Element::Emphasis => view! { <em>{children}</em> }.into_any(),
                Element::Strong => view! { <strong>{children}</strong> }.into_any(),
                Element::Strikethrough => view! { <s>{children}</s> }.into_any(),
                Element::Link(href) => view! { <a href=href.clone() rel="noopener">{children}</a> }.into_any(),
                Element::Span => view! { <span>{children}</span> }.into_any(),
            }
        }
    }
}

/// A number from the model arithmetic for the current state, with its exact value in `data-value`.
#[component]
fn LiveFigure(name: String, state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let value = {
        let name = name.clone();
        Memo::new(move |_| model.with(|m| state.with(|s| figure(&name, s, m))))
    };
    let missing = format!("({name}: not defined here)");
    view! {
        <span class="live-figure" data-testid="live-figure" data-figure=name
            data-value=move || value.with(|f| f.as_ref().map(|f| f.exact.clone()))>
            {move || value.with(|f| f.as_ref().map_or_else(|| missing.clone(), |f| f.text.clone()))}
        </span>
    }
}

/// A question: the reader answers, gets a hint when wrong, and can reveal the app's answer.
#[component]
fn CheckBox(check: Check, state: RwSignal<AppState>, model: Memo<Model>) -> impl IntoView {
    let verdict = RwSignal::new(None::<Verdict>);
    let revealed = RwSignal::new(false);
    let typed = RwSignal::new(String::new());
    let expected = {
        let check = check.clone();
        Memo::new(move |_| match &check.answer {
            Answer::Number { expected: Expected::Literal(v), .. } => Some(*v),
            Answer::Number { expected: Expected::Figure(name), .. } => {
                model.with(|m| state.with(|s| figure(name, s, m))).map(|f| f.value)
            }
            Answer::Choice { .. } => None,
        })
    };
    let judge_typed = {
        let check = check.clone();
        move || {
            let result = match expected.get_untracked() {
                Some(value) => check.judge_number(&typed.get_untracked(), value),
                None => Verdict::Unreadable("this answer cannot be computed for these settings".into()),
            };
            revealed.update(|r| *r = *r || result == Verdict::Right);
            verdict.set(Some(result));
        }
    };
    let answer_text = {
        let check = check.clone();
        move || match &check.answer {
            Answer::Choice { options, correct } => options[*correct].clone(),
            Answer::Number { expected: Expected::Figure(name), .. } => model
                .with(|m| state.with(|s| figure(name, s, m)))
                .map_or_else(|| "not defined for these settings".into(), |f| f.text),
            Answer::Number { expected: Expected::Literal(v), .. } => v.to_string(),
        }
    };
    let explain = render_nodes(&check.explain_nodes(), state, model);
    view! {
        <aside class="check" data-testid="lesson-check">
            <p class="question"><strong>"Check your understanding: "</strong>{check.question.clone()}</p>
            <AnswerInput check=check.clone() typed=typed verdict=verdict revealed=revealed judge_typed=Callback::new(move |()| judge_typed())/>
            <p class="check-result" data-testid="check-result" data-verdict=move || verdict.with(|v| Verdict::id(v.as_ref()))>
                {move || verdict.get().map(Verdict::message)}
            </p>
            <button type="button" class="reveal" data-testid="check-reveal" on:click=move |_| revealed.set(true)
                hidden=move || revealed.get()>"Show the answer"</button>
            <div class="check-answer-shown" data-testid="check-answer" hidden=move || !revealed.get()>
                <p><strong>"Answer: "</strong>{answer_text}</p>
                <p>{explain}</p>
            </div>
        </aside>
    }
}

/// Where the reader answers: a number typed, or one of the choices.
#[component]
fn AnswerInput(
    check: Check,
    typed: RwSignal<String>,
    verdict: RwSignal<Option<Verdict>>,
    revealed: RwSignal<bool>,
    judge_typed: Callback<()>,
) -> impl IntoView {
    match check.answer.clone() {
        Answer::Number { .. } => view! {
            <form class="check-answer" on:submit=move |ev| { ev.prevent_default(); judge_typed.run(()); }>
                <input type="text" inputmode="decimal" data-testid="check-input" aria-label="Your answer"
                    prop:value=move || typed.get() on:input=move |ev| typed.set(event_target_value(&ev))/>
                <button type="submit" data-testid="check-submit">"Check"</button>
            </form>
        }
        .into_any(),
        Answer::Choice { options, .. } => view! {
            <div class="check-choices" role="group">
                {options.into_iter().enumerate().map(|(i, option)| {
                    let check = check.clone();
                    view! {
                        <button type="button" data-testid="check-choice" data-index=i on:click=move |_| {
                            let result = check.judge_choice(i);
                            revealed.update(|r| *r = *r || result == Verdict::Right);
                            verdict.set(Some(result));
                        }>{option}</button>
                    }
                }).collect_view()}
            </div>
        }
        .into_any(),
    }
}
