//! Mechanical proofreading of the lessons, for the kinds of slips a fact-check found (issue 36):
//! (a) a context past the model's own, unmentioned; (b) a figure followed by its own unit, or by a
//! unit of the wrong number ("1 bytes"); (c) step-through tables named by number, which drift when
//! a table is added; (d) "the next lesson" pointing anywhere but forward. Each rule is a function
//! tried on a sample here, then run over every step of every lesson.

use super::figures::{self, Figure};
use super::format::Step;
use super::markup::{self, Node};
use super::walk::{figure_names, step_state};
use super::{Lesson, catalogue};
use crate::model::Model;
use crate::views::registry::Settings;

/// Text and figures in reading order, line breaks as spaces.
#[derive(Debug, PartialEq)]
enum LessonPart {
    Text(String),
    Figure(String),
}

fn pieces(nodes: &[Node]) -> Vec<LessonPart> {
    fn walk(nodes: &[Node], out: &mut Vec<LessonPart>) {
        for node in nodes {
            let text = match node {
                Node::Text(t) | Node::Code(t) => t.clone(),
                Node::Break => " ".into(),
                Node::Figure(name) => {
                    out.push(LessonPart::Figure(name.clone()));
                    continue;
                }
                Node::Element(_, children) => {
                    walk(children, out);
                    // A block ends a run of text: nothing after it follows a figure inside it.
                    out.push(LessonPart::Text("\n".into()));
                    continue;
                }
                Node::Rule => "\n".into(),
            };
            match out.last_mut() {
                Some(LessonPart::Text(prev)) => prev.push_str(&text),
                _ => out.push(LessonPart::Text(text)),
            }
        }
    }
    let mut out = Vec::new();
    walk(nodes, &mut out);
    out
}

/// Words that name a unit a figure may already carry in its text.
const UNIT_WORDS: [&str; 14] =
    ["token", "tokens", "byte", "bytes", "bit", "bits", "FLOP", "FLOPs", "KB", "MB", "GB", "KiB", "MiB", "GiB"];
/// Words whose number must agree with a plain figure before them: (singular, plural).
const COUNTED_WORDS: [(&str, &str); 6] = [
    ("byte", "bytes"),
    ("token", "tokens"),
    ("bit", "bits"),
    ("layer", "layers"),
    ("head", "heads"),
    ("page", "pages"),
];

/// (b): every figure of `nodes` (valued by `value_of`) followed by a unit it already writes, or by a
/// counted word of the wrong number ("1 bytes", "2 byte").
fn unit_slips(nodes: &[Node], value_of: &dyn Fn(&str) -> Option<Figure>) -> Vec<String> {
    let pieces = pieces(nodes);
    let mut slips = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let (LessonPart::Figure(name), Some(LessonPart::Text(after))) = (piece, pieces.get(i + 1)) else { continue };
        let Some(figure) = value_of(name) else { continue };
        if !after.starts_with([' ', '\u{a0}']) {
            continue;
        }
        let word: String = after.trim_start().chars().take_while(|c| c.is_alphanumeric()).collect();
        let has_unit = figure.text.chars().any(char::is_alphabetic) || figure.text.ends_with(['×', '%']);
        if has_unit && UNIT_WORDS.contains(&word.as_str()) {
            slips.push(format!("{{{name}}} already writes its unit (\"{}\"), then \"{word}\"", figure.text));
        }
        for (one, many) in COUNTED_WORDS {
            if !has_unit && ((figure.value == 1.0 && word == many) || (figure.value != 1.0 && word == one)) {
                slips.push(format!("{{{name}}} is {} here, then \"{word}\"", figure.text));
            }
        }
    }
    slips
}

/// (c): "table 6", "Tables 7 and 8": a table named by its number.
fn numbered_tables(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices("table") {
        let rest = &lower[at + "table".len()..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        if rest.strip_prefix(' ').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) {
            found.push(lower.get(at..(at + 10).min(lower.len())).unwrap_or("table").to_string());
        }
    }
    found
}

/// (d): in lesson number `index` (from 0) of the course `titles`, a sentence that speaks of the next
/// lesson(s) must name, in quotes, only lessons after it, and one that speaks of earlier or previous
/// lessons only lessons before it; each must name at least one.
fn misdirected_references(text: &str, index: usize, titles: &[&str]) -> Vec<String> {
    let mut wrong = Vec::new();
    for sentence in sentences(text) {
        let lower = sentence.to_lowercase();
        let forward = lower.contains("next lesson");
        let backward = lower.contains("earlier lesson") || lower.contains("previous lesson");
        if !forward && !backward {
            continue;
        }
        let named: Vec<usize> =
            (0..titles.len()).filter(|&i| i != index && sentence.contains(&format!("\"{}\"", titles[i]))).collect();
        let in_order = named.iter().all(|&i| if forward { i > index } else { i < index });
        if named.is_empty() || !in_order {
            wrong.push(sentence.trim().to_string());
        }
    }
    wrong
}

/// Sentences of `text`: split after `.`, `?` or `!` followed by a space or a line's end.
fn sentences(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.last_mut().unwrap().push(c);
        if matches!(c, '.' | '?' | '!' | '\n') && chars.peek().is_none_or(|n| n.is_whitespace()) {
            out.push(String::new());
        }
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

/// (a): the step shows a context past the model's own without naming the model's context figure.
fn past_context_unnamed(step: &Step, state: &Settings, model: &Model) -> bool {
    let own = model.max_position_embeddings;
    let shows_ctx = matches!(step.view.as_str(), "kv" | "compare");
    let names = figure_names(step);
    shows_ctx
        && own > 0
        && state.kv.ctx_tokens > own
        && !names.iter().any(|n| n == "max_positions" || n == "model_max_tokens")
}

/// The step's prose: text, question, hint and explanation, figures as placeholders.
fn step_text(step: &Step) -> String {
    let mut text: String = pieces(&step.body)
        .into_iter()
        .map(|p| match p {
            LessonPart::Text(t) => t,
            LessonPart::Figure(name) => format!("{{{name}}}"),
        })
        .collect();
    if let Some(check) = &step.check {
        for part in [&check.question, &check.hint, &check.explain] {
            text.push('\n');
            text.push_str(part);
        }
    }
    text
}

fn every_step() -> impl Iterator<Item = (usize, &'static Lesson, usize, &'static Step)> {
    catalogue()
        .iter()
        .enumerate()
        .flat_map(|(l, lesson)| lesson.steps.iter().enumerate().map(move |(s, step)| (l, lesson, s + 1, step)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure_at(query: &str) -> impl Fn(&str) -> Option<Figure> {
        let (state, _) = Settings::from_query(query);
        let model = state.resolved_model();
        move |name| figures::figure(name, &state, &model)
    }

    #[test]
    fn a_figure_and_its_own_unit_are_refused() {
        let at = figure_at("model=llama-3-8b&ctx=131072&dtype=fp8");
        let slips = |md: &str| unit_slips(&markup::parse(md), &at);
        // ctx_tokens writes "131,072 tokens"; dtype_bytes at FP8 is 1.
        assert_eq!(slips("{ctx_tokens} tokens in the cache").len(), 1);
        assert_eq!(slips("{ctx_tokens}\ntokens in the cache").len(), 1, "across a line break");
        assert_eq!(slips("each number takes {dtype_bytes} bytes").len(), 1);
        assert_eq!(slips("{kv_total_bytes} bytes").len(), 1);
        assert!(slips("{ctx_tokens} in the cache, {dtype_bytes} byte each, {kv_bytes_per_token} per token").is_empty());
        assert!(slips("{ctx_tokens}. Tokens are").is_empty(), "only a unit that follows directly");
        let fp16 = figure_at("model=llama-3-8b&dtype=fp16");
        assert_eq!(unit_slips(&markup::parse("{dtype_bytes} byte"), &fp16).len(), 1, "2 byte");
        assert!(unit_slips(&markup::parse("{dtype_bytes} bytes"), &fp16).is_empty());
    }

    #[test]
    fn tables_named_by_number_are_found() {
        assert_eq!(numbered_tables("Table 6 of the step-through"), vec!["table 6 of"]);
        assert_eq!(numbered_tables("tables 7 and 8").len(), 1);
        assert!(numbered_tables("the table \"Scores Q·Kᵀ\", a tablet, 6 tables").is_empty());
    }

    #[test]
    fn the_next_lesson_must_be_named_and_ahead() {
        let titles = ["One", "Two", "Three"];
        assert!(misdirected_references("The next lesson, \"Two\", shows why.", 0, &titles).is_empty());
        assert_eq!(misdirected_references("The next lesson shows why.", 0, &titles).len(), 1, "unnamed");
        assert_eq!(misdirected_references("A smaller cache: the next lessons (\"One\").", 1, &titles).len(), 1);
        assert!(misdirected_references("As the earlier lessons \"One\" and \"Two\" showed.", 2, &titles).is_empty());
        assert_eq!(misdirected_references("As the earlier lesson \"Three\" showed.", 1, &titles).len(), 1);
        assert!(misdirected_references("Nothing here. Or here?", 1, &titles).is_empty());
    }

    #[test]
    fn a_context_past_the_models_is_caught_unless_named() {
        let step = |view: &str, text: &str| {
            let md =
                format!("# T\n\ngoal\n\n## S\n\n```set\nview: {view}\nmodel: llama-3-8b\nctx: 131072\n```\n\n{text}\n");
            super::super::format::parse_lesson("01-t.md", &md).unwrap().steps.remove(0)
        };
        let judge = |s: &Step| {
            let (state, _) = step_state(s);
            past_context_unnamed(s, &state, &state.resolved_model())
        };
        assert!(judge(&step("kv", "The cache holds {kv_total_bytes}.")));
        assert!(judge(&step("compare", "The cache holds {kv_total_bytes}.")));
        assert!(!judge(&step("kv", "Past its context of {max_positions}.")));
        assert!(!judge(&step("heatmaps", "Heads.")), "the explorer does not show the context");
    }

    #[test]
    fn every_lesson_passes_the_proofreading() {
        let titles: Vec<&str> = catalogue().iter().map(|l| l.title.as_str()).collect();
        let mut problems = Vec::new();
        for (index, lesson, n, step) in every_step() {
            let at = format!("{} step {n}", lesson.id);
            let (state, _) = step_state(step);
            let model = state.resolved_model();
            if past_context_unnamed(step, &state, &model) {
                problems.push(format!(
                    "{at}: ctx {} is past {}'s context ({}) and the text does not name {{max_positions}}",
                    state.kv.ctx_tokens, model.name, model.max_position_embeddings
                ));
            }
            let value_of = |name: &str| figures::figure(name, &state, &model);
            let mut nodes = step.body.clone();
            nodes.extend(step.check.iter().flat_map(|c| c.explain_nodes()));
            problems.extend(unit_slips(&nodes, &value_of).into_iter().map(|s| format!("{at}: {s}")));
            let text = step_text(step);
            problems.extend(numbered_tables(&text).into_iter().map(|t| format!("{at}: \"{t}…\": name the table")));
            let wrong = misdirected_references(&text, index, &titles);
            problems.extend(wrong.into_iter().map(|s| format!("{at}: \"{s}\" names no lesson in that direction")));
            if let Some(check) = &step.check {
                for part in [&check.question, &check.hint] {
                    // Questions and hints are shown as written: a placeholder there is never filled.
                    let names = markup::figure_names(&markup::split_figures(part));
                    problems.extend(names.iter().map(|f| format!("{at}: {{{f}}} in a question or hint")));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
