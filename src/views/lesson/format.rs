//! The lesson file format, read from Markdown an author can edit:
//!
//! ````markdown
//! # Title of the lesson
//!
//! The one-line goal, shown on the lesson's card.
//!
//! ## Title of a step
//!
//! ```set
//! view: kv
//! model: llama-3-8b
//! ctx: 8192
//! highlight: layer 3
//! ```
//!
//! The step's text, with live figures such as {kv_total_bytes}.
//!
//! ```check
//! question: How many bytes does one token add to the cache?
//! answer: {kv_bytes_per_token}
//! hint: Two tensors (K and V) per layer, one vector per KV head.
//! explain: Each layer stores K and V for every KV head: 2 x layers x KV heads x head width x bytes.
//! ```
//! ````
//!
//! `set` lines are link parameters (`key: value`, the value as typed, not percent-coded), plus `view`
//! (the view the step shows) and `highlight`. Everything else in a step is its text.

use super::check::Check;
use super::markup::{self, Node};

/// One lesson, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Lesson {
    /// From the file name: `03-masks.md` is `masks`.
    pub id: String,
    pub title: String,
    pub goal: String,
    pub steps: Vec<Step>,
}

/// One step of a lesson.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub title: String,
    /// The id of the view the step shows (`heatmaps`, `kv`, `compare`, `bench`).
    pub view: String,
    /// Link parameters the step sets, in order, values as typed.
    pub params: Vec<(String, String)>,
    /// What to highlight in the view, as written (checked by [`super::highlight::Highlight`]).
    pub highlight: Option<String>,
    pub body: Vec<Node>,
    pub check: Option<Check>,
}

/// Parses one lesson file; `Err` names the first problem (the native test reads every lesson).
pub fn parse_lesson(file_name: &str, text: &str) -> Result<Lesson, String> {
    let id = lesson_id(file_name)?;
    let mut sections = split_headings(text).into_iter();
    let (title, intro) = match sections.next() {
        Some(Section { level: 1, title, body }) => (title, body),
        _ => return Err(format!("{file_name}: the file must start with a `# Title` line")),
    };
    let goal = markup::plain_text(&markup::parse(&intro)).trim().to_string();
    if goal.is_empty() {
        return Err(format!("{file_name}: a one-line goal must follow the title"));
    }
    let steps = sections
        .map(|s| match s.level {
            2 => parse_step(&s.title, &s.body).map_err(|e| format!("{file_name}, step \"{}\": {e}", s.title)),
            _ => Err(format!("{file_name}: only one `# Title`, then `## Step` sections")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if steps.is_empty() {
        return Err(format!("{file_name}: a lesson needs at least one `## Step`"));
    }
    Ok(Lesson { id, title, goal, steps })
}

/// What a view's links to its lessons need of a lesson: its id, title and each step's view, read
/// without parsing its Markdown (the links are built as the page mounts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LessonOutline {
    pub id: String,
    pub title: String,
    pub step_views: Vec<String>,
}

/// The outline of one lesson file, or `None` where [`parse_lesson`] would refuse its frame.
pub fn outline(file_name: &str, text: &str) -> Option<LessonOutline> {
    let id = lesson_id(file_name).ok()?;
    let mut sections = split_headings(text).into_iter();
    let title = match sections.next()? {
        Section { level: 1, title, .. } => title,
        _ => return None,
    };
    let step_views =
        sections.map(|s| (s.level == 2).then(|| step_view(&s.body)).flatten()).collect::<Option<Vec<_>>>()?;
    Some(LessonOutline { id, title, step_views })
}

/// The `view:` of a step's ```set block.
fn step_view(body: &str) -> Option<String> {
    let blocks = fenced_blocks(body);
    let set = blocks.iter().find(|b| b.info == "set")?;
    // The last `view:` line, as `parse_step` reads it.
    key_values(&set.text).ok()?.into_iter().rev().find_map(|(key, value)| (key == "view").then_some(value))
}

/// `07-kv-cache.md` → `kv-cache`: the order prefix and the extension go.
fn lesson_id(file_name: &str) -> Result<String, String> {
    let stem = file_name.strip_suffix(".md").ok_or_else(|| format!("{file_name}: lessons are .md files"))?;
    let id = stem.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start_matches('-');
    let valid = !id.is_empty() && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    valid.then(|| id.to_string()).ok_or_else(|| format!("{file_name}: the id \"{id}\" must be lowercase-with-dashes"))
}

struct Section {
    level: u8,
    title: String,
    body: String,
}

/// Splits at `# ` and `## ` lines outside fenced code: Markdown's own headings, read by line so each
/// step's text can be parsed on its own.
fn split_headings(text: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => fence = None,
            _ => {}
        }
        let heading = if fence.is_none() && marker.is_none() { heading_of(line) } else { None };
        match (heading, sections.last_mut()) {
            (Some((level, title)), _) => sections.push(Section { level, title, body: String::new() }),
            (None, Some(section)) => {
                section.body.push_str(line);
                section.body.push('\n');
            }
            // Text before the title: kept as an untitled section so the caller reports it.
            (None, None) if !line.trim().is_empty() => {
                sections.push(Section { level: 0, title: String::new(), body: format!("{line}\n") })
            }
            (None, None) => {}
        }
    }
    sections
}

fn heading_of(line: &str) -> Option<(u8, String)> {
    let (level, rest) =
        if let Some(rest) = line.strip_prefix("## ") { (2, rest) } else { (1, line.strip_prefix("# ")?) };
    Some((level, rest.trim().to_string()))
}

fn parse_step(title: &str, body: &str) -> Result<Step, String> {
    let blocks = fenced_blocks(body);
    let set = blocks.iter().find(|b| b.info == "set").ok_or("a step needs a ```set block")?;
    let mut view = None;
    let mut highlight = None;
    let mut params = Vec::new();
    for (key, value) in key_values(&set.text)? {
        match key.as_str() {
            "view" => view = Some(value),
            "highlight" => highlight = Some(value),
            _ => params.push((key, value)),
        }
    }
    let check = match blocks.iter().find(|b| b.info == "check") {
        Some(b) => Some(Check::parse(&key_values(&b.text)?)?),
        None => None,
    };
    let text: String = strip_blocks(body, &blocks);
    Ok(Step {
        title: title.to_string(),
        view: view.ok_or("the ```set block needs a `view:` line")?,
        params,
        highlight,
        body: markup::parse(&text),
        check,
    })
}

struct Block {
    info: String,
    text: String,
    /// Line range of the whole block, fences included.
    lines: (usize, usize),
}

/// The fenced blocks of a step whose info string is `set` or `check`.
fn fenced_blocks(body: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in body.lines().enumerate() {
        let trimmed = line.trim();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((info.trim().to_string(), i, String::new()));
                }
            }
            Some((info, start, text)) if trimmed == "```" => {
                if info == "set" || info == "check" {
                    blocks.push(Block { info, text, lines: (start, i) });
                }
            }
            Some((info, start, mut text)) => {
                text.push_str(line);
                text.push('\n');
                open = Some((info, start, text));
            }
        }
    }
    blocks
}

fn strip_blocks(body: &str, blocks: &[Block]) -> String {
    let inside = |i: usize| blocks.iter().any(|b| (b.lines.0..=b.lines.1).contains(&i));
    body.lines().enumerate().filter(|(i, _)| !inside(*i)).map(|(_, l)| format!("{l}\n")).collect()
}

/// `key: value` lines (blank lines skipped). Keys are lowercase words; values keep inner spaces.
pub fn key_values(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (key, value) = line.split_once(':').ok_or_else(|| format!("\"{line}\" is not a `key: value` line"))?;
            let key = key.trim();
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                return Err(format!("\"{key}\" is not a key"));
            }
            Ok((key.to_string(), value.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# Masks\n\nSee which keys a query may read.\n\n## Causal\n\n```set\nview: heatmaps\ntext: a b c\nmask: causal\nhighlight: head 0\n```\n\nA query reads **earlier** keys: {attended_pairs} pairs.\n\n```check\nquestion: How many pairs?\nanswer: {attended_pairs}\nhint: Count a triangle.\nexplain: 1 + 2 + 3.\n```\n\n## Sliding\n\n```set\nview: heatmaps\nmask: sliding\nwindow: 2\n```\n";

    #[test]
    fn a_lesson_by_hand() {
        let lesson = parse_lesson("03-masks.md", SAMPLE).unwrap();
        assert_eq!((lesson.id.as_str(), lesson.title.as_str()), ("masks", "Masks"));
        assert_eq!(lesson.goal, "See which keys a query may read.");
        assert_eq!(lesson.steps.len(), 2, "{:?}", lesson.steps);
        let causal = &lesson.steps[0];
        assert_eq!(causal.view, "heatmaps");
        assert_eq!(causal.params, vec![("text".into(), "a b c".into()), ("mask".into(), "causal".into())]);
        assert_eq!(causal.highlight.as_deref(), Some("head 0"));
        assert_eq!(markup::figure_names(&causal.body), vec!["attended_pairs"]);
        assert!(!markup::plain_text(&causal.body).contains("question"), "the check is not text");
        assert!(causal.check.is_some());
        assert_eq!(lesson.steps[1].params.len(), 2);
    }

    #[test]
    fn headings_inside_code_fences_are_text() {
        let text = "# T\n\ngoal\n\n## S\n\n```set\nview: kv\n```\n\n```\n## not a step\n```\n";
        let lesson = parse_lesson("1-t.md", text).unwrap();
        assert_eq!(lesson.steps.len(), 1);
        assert!(markup::plain_text(&lesson.steps[0].body).contains("## not a step"));
    }

    #[test]
    fn malformed_lessons_say_what_is_wrong() {
        for (name, text, why) in [
            ("a.txt", SAMPLE, "lessons are .md"),
            ("01-Bad Id.md", SAMPLE, "lowercase"),
            ("x.md", "no title\n", "must start"),
            ("x.md", "# T\n\n## S\n```set\nview: kv\n```\n", "goal"),
            ("x.md", "# T\n\ngoal\n", "at least one"),
            ("x.md", "# T\n\ngoal\n\n## S\n\ntext\n", "```set"),
            ("x.md", "# T\n\ngoal\n\n## S\n```set\nctx: 5\n```\n", "view:"),
            ("x.md", "# T\n\ngoal\n\n## S\n```set\nview kv\n```\n", "key: value"),
        ] {
            let err = parse_lesson(name, text).unwrap_err();
            assert!(err.contains(why), "{name}: {err}");
        }
    }
}
