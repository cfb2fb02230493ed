//! A lesson's Markdown as a small tree the page turns into DOM nodes one by one: nothing is ever
//! handed to the browser as HTML. Raw HTML in a lesson shows as text, links keep only relative and
//! http(s) targets, and `{name}` in text becomes a live figure the page computes.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag};

/// One node of rendered lesson text.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Text(String),
    /// Inline code.
    Code(String),
    /// A live figure: `{name}` in the text, filled by the model arithmetic.
    Figure(String),
    Break,
    Rule,
    Element(Element, Vec<Node>),
}

/// The elements a lesson can use. Anything else Markdown offers keeps its children only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Element {
    Paragraph,
    /// Level 3 to 6 (levels 1 and 2 are the lesson's and the steps' titles).
    Heading(u8),
    Quote,
    CodeBlock,
    /// Ordered lists carry their first number.
    List(Option<u64>),
    Item,
    Emphasis,
    Strong,
    Strikethrough,
    /// A link to a relative or http(s) target, checked by [`safe_href`].
    Link(String),
    /// A container for children whose own element is not rendered (images show their alt text).
    Span,
}

/// Whether a link target may be followed: relative (`?view=kv`, `#part`, `other/page`) or http(s).
/// Everything with another scheme (`javascript:`, `data:`, `file:`...) is refused.
pub fn safe_href(href: &str) -> bool {
    let href = href.trim();
    let lower = href.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return true;
    }
    // A scheme is letters, digits, `+`, `-` or `.` before the first `:`, ahead of any `/`, `?` or `#`.
    let before_special = href.split(['/', '?', '#']).next().unwrap_or("");
    !before_special.contains(':') && !href.starts_with("//") && !href.contains('\\')
}

/// Parses lesson Markdown into nodes.
pub fn parse(markdown: &str) -> Vec<Node> {
    let mut builder = Builder { stack: vec![(Element::Span, Vec::new())] };
    for event in Parser::new(markdown) {
        builder.event(event);
    }
    while builder.stack.len() > 1 {
        builder.close();
    }
    builder.stack.pop().map(|(_, nodes)| nodes).unwrap_or_default()
}

/// Deepest nesting of elements kept (quotes in lists in quotes...); lessons use a handful.
const MAX_NESTING: usize = 32;

struct Builder {
    stack: Vec<(Element, Vec<Node>)>,
}

impl Builder {
    fn event(&mut self, event: Event<'_>) {
        match event {
            // Past MAX_NESTING an element keeps its children only: the tree's depth stays bounded,
            // so walking, rendering and dropping it cannot overflow the stack (300,000 `>` did).
            Event::Start(_) if self.stack.len() > MAX_NESTING => self.stack.push((Element::Span, Vec::new())),
            Event::Start(tag) => self.stack.push((element_of(tag), Vec::new())),
            Event::End(_) => self.close(),
            Event::Text(text) if self.in_code_block() => self.push(Node::Text(text.into_string())),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => self.push(Node::Code(code.into_string())),
            // Raw HTML is shown as the text it is.
            Event::Html(html) | Event::InlineHtml(html) => self.push(Node::Text(html.into_string())),
            Event::SoftBreak => self.push(Node::Text(" ".into())),
            Event::HardBreak => self.push(Node::Break),
            Event::Rule => self.push(Node::Rule),
            // Footnotes, task markers and maths are not part of the lesson format.
            _ => {}
        }
    }

    fn in_code_block(&self) -> bool {
        self.stack.last().is_some_and(|(e, _)| *e == Element::CodeBlock)
    }

    fn push(&mut self, node: Node) {
        let Some((_, children)) = self.stack.last_mut() else { return };
        match (children.last_mut(), node) {
            (Some(Node::Text(prev)), Node::Text(next)) => prev.push_str(&next),
            (_, node) => children.push(node),
        }
    }

    fn close(&mut self) {
        if self.stack.len() < 2 {
            return;
        }
        let Some((element, children)) = self.stack.pop() else { return };
        match element {
            Element::Span => children.into_iter().for_each(|c| self.push(c)),
            _ => self.push(Node::Element(element, children)),
        }
    }

    /// Text with `{name}` placeholders split out as figures.
    fn text(&mut self, text: &str) {
        for piece in split_figures(text) {
            self.push(piece);
        }
    }
}

fn element_of(tag: Tag<'_>) -> Element {
    match tag {
        Tag::Paragraph => Element::Paragraph,
        Tag::Heading { level, .. } => Element::Heading(match level {
            HeadingLevel::H1 | HeadingLevel::H2 | HeadingLevel::H3 => 3,
            HeadingLevel::H4 => 4,
            HeadingLevel::H5 => 5,
            HeadingLevel::H6 => 6,
        }),
        Tag::BlockQuote(_) => Element::Quote,
        Tag::CodeBlock(CodeBlockKind::Indented | CodeBlockKind::Fenced(_)) => Element::CodeBlock,
        Tag::List(first) => Element::List(first),
        Tag::Item => Element::Item,
        Tag::Emphasis => Element::Emphasis,
        Tag::Strong => Element::Strong,
        Tag::Strikethrough => Element::Strikethrough,
        Tag::Link { dest_url, .. } if safe_href(&dest_url) => Element::Link(dest_url.trim().to_string()),
        _ => Element::Span,
    }
}

/// Splits `the cache holds {kv_total_bytes} here` into text, a figure and text. Only
/// `{lower_snake_case}` is a placeholder; other braces stay as written.
pub fn split_figures(text: &str) -> Vec<Node> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        // A name is at most MAX_FIGURE_NAME bytes: look no further for its `}` (searching the whole
        // rest after every `{` is quadratic in a text of unclosed braces).
        let name_len = after
            .bytes()
            .take(MAX_FIGURE_NAME + 1)
            .position(|b| b == b'}')
            .filter(|&len| is_figure_name(&after[..len]));
        match name_len {
            Some(len) => {
                if open > 0 {
                    out.push(Node::Text(rest[..open].to_string()));
                }
                out.push(Node::Figure(after[..len].to_string()));
                rest = &after[len + 1..];
            }
            None => {
                out.push(Node::Text(rest[..=open].to_string()));
                rest = after;
            }
        }
    }
    if !rest.is_empty() {
        out.push(Node::Text(rest.to_string()));
    }
    merge_text(out)
}

/// Longest figure name, in bytes.
const MAX_FIGURE_NAME: usize = 40;

fn is_figure_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FIGURE_NAME
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn merge_text(nodes: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::with_capacity(nodes.len());
    for node in nodes {
        match (out.last_mut(), node) {
            (Some(Node::Text(prev)), Node::Text(next)) => prev.push_str(&next),
            (_, node) => out.push(node),
        }
    }
    out
}

/// Every figure name used in `nodes`, in order of first use.
pub fn figure_names(nodes: &[Node]) -> Vec<String> {
    let mut names = Vec::new();
    walk(nodes, &mut |node| {
        if let Node::Figure(name) = node
            && !names.contains(name)
        {
            names.push(name.clone());
        }
    });
    names
}

fn walk(nodes: &[Node], visit: &mut impl FnMut(&Node)) {
    for node in nodes {
        visit(node);
        if let Node::Element(_, children) = node {
            walk(children, visit);
        }
    }
}

/// The plain text of `nodes` (figures as their placeholder), for titles and tests.
pub fn plain_text(nodes: &[Node]) -> String {
    let mut out = String::new();
    walk(nodes, &mut |node| match node {
        Node::Text(t) | Node::Code(t) => out.push_str(t),
        Node::Figure(name) => {
            out.push('{');
            out.push_str(name);
            out.push('}');
        }
        Node::Break => out.push(' '),
        _ => {}
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Node {
        Node::Text(s.into())
    }

    #[test]
    fn paragraphs_emphasis_and_figures() {
        let nodes = parse("The cache holds **{kv_total_bytes}** at {ctx_tokens} tokens.");
        let expected = vec![Node::Element(
            Element::Paragraph,
            vec![
                text("The cache holds "),
                Node::Element(Element::Strong, vec![Node::Figure("kv_total_bytes".into())]),
                text(" at "),
                Node::Figure("ctx_tokens".into()),
                text(" tokens."),
            ],
        )];
        assert_eq!(nodes, expected);
        assert_eq!(figure_names(&nodes), vec!["kv_total_bytes", "ctx_tokens"]);
    }

    #[test]
    fn braces_that_are_not_placeholders_stay_text() {
        assert_eq!(split_figures("a {B} {} {x y} {ok}"), vec![text("a {B} {} {x y} "), Node::Figure("ok".into())]);
        assert_eq!(split_figures("{"), vec![text("{")]);
        assert_eq!(split_figures("}{a}"), vec![text("}"), Node::Figure("a".into())]);
        // The longest name is a figure, one byte longer is text.
        let (longest, too_long) = ("n".repeat(MAX_FIGURE_NAME), "n".repeat(MAX_FIGURE_NAME + 1));
        assert_eq!(split_figures(&format!("{{{longest}}}")), vec![Node::Figure(longest)]);
        assert_eq!(split_figures(&format!("{{{too_long}}}")), vec![text(&format!("{{{too_long}}}"))]);
        // 400,000 unclosed braces before a figure: each looks a name's length ahead, not to the end.
        let braces = "{".repeat(400_000);
        assert_eq!(split_figures(&format!("{braces}{{a}}")), vec![text(&braces), Node::Figure("a".into())]);
    }

    #[test]
    fn nesting_is_bounded_and_deeper_elements_keep_only_their_text() {
        fn depth(nodes: &[Node]) -> usize {
            nodes.iter().map(|n| if let Node::Element(_, c) = n { 1 + depth(c) } else { 0 }).max().unwrap_or(0)
        }
        let nodes = parse(&format!("{}deep", ">".repeat(300_000)));
        assert!(depth(&nodes) <= MAX_NESTING + 1, "{}", depth(&nodes));
        assert_eq!(plain_text(&nodes), "deep");
        let nodes = parse("> > quoted *twice*");
        assert_eq!(depth(&nodes), 4, "{nodes:?}");
    }

    #[test]
    fn raw_html_is_text_and_never_markup() {
        let nodes = parse("Hello <script>alert(1)</script> and\n\n<div onclick=\"x()\">block</div>\n");
        let all = plain_text(&nodes);
        assert!(all.contains("<script>") && all.contains("<div onclick"), "{all}");
        let mut elements = Vec::new();
        walk(&nodes, &mut |n| {
            if let Node::Element(e, _) = n {
                elements.push(e.clone());
            }
        });
        assert!(elements.iter().all(|e| *e == Element::Paragraph), "{elements:?}");
    }

    #[test]
    fn only_relative_and_http_links_survive() {
        for (href, ok) in [
            ("?view=kv&ctx=8192", true),
            ("#step", true),
            ("other/page", true),
            ("https://arxiv.org/abs/2205.14135", true),
            ("HTTP://example.com", true),
            ("javascript:alert(1)", false),
            (" JavaScript:alert(1)", false),
            ("data:text/html,hi", false),
            ("vbscript:x", false),
            ("//evil.example/x", false),
            ("file:///etc/passwd", false),
        ] {
            assert_eq!(safe_href(href), ok, "{href}");
        }
        let nodes = parse("[ok](?view=kv) and [bad](javascript:alert(1))");
        let Node::Element(Element::Paragraph, children) = &nodes[0] else { panic!("{nodes:?}") };
        assert_eq!(children[0], Node::Element(Element::Link("?view=kv".into()), vec![text("ok")]));
        // The refused link keeps its words, without a target.
        assert_eq!(children[1], text(" and bad"));
    }

    #[test]
    fn lists_code_and_headings() {
        let nodes = parse("### Why\n\n1. one `q·k`\n2. two\n\n```\nraw {not_a_figure}\n```\n");
        assert_eq!(nodes[0], Node::Element(Element::Heading(3), vec![text("Why")]));
        let Node::Element(Element::List(Some(1)), items) = &nodes[1] else { panic!("{nodes:?}") };
        assert_eq!(items.len(), 2);
        assert_eq!(nodes[2], Node::Element(Element::CodeBlock, vec![text("raw {not_a_figure}\n")]));
    }
}
