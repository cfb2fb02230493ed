//! The training text: the prose and code of five books of the Rust documentation, extracted from the
//! HTML that `rustup component add rust-docs` installs (mdBook output), in a fixed order.
//!
//! Which pages count: every `*.html` page of a book, in sorted path order, except the all-in-one
//! `print.html`, mdBook's `toc.html` and `404.html`, redirect stubs (`<meta http-equiv="refresh">`),
//! pages without `<main>` (rustdoc-made stubs for renamed chapters of the Book),
//! the Book's `first-edition/`, `second-edition/` and `2018-edition/` folders (pages that only say the
//! old edition is no longer shipped) and Rust by Example's translations (`es/`, `ja/`, `ko/`, `zh/`):
//! the corpus is English.
//!
//! What is kept of a page: the text inside `<main>`. Block elements (paragraphs, headings, list items,
//! table rows, ...) become lines; runs of white space inside a line collapse to one space; code blocks
//! (`<pre>`) are kept verbatim, less trailing spaces, and less the lines mdBook hides from readers
//! (`<span class="boring">`, e.g. a `fn main() {` wrapper). Scripts, styles, buttons and navigation
//! are dropped.

use std::path::{Path, PathBuf};

use ego_tree::NodeRef;
use scraper::{Html, Node, Selector};

/// The books, in the order they appear in the corpus.
pub const BOOKS: [&str; 5] = ["book", "reference", "rust-by-example", "cargo", "nomicon"];

/// Folders that hold no current English text of their book.
const SKIPPED_DIRS: [&str; 7] = [
    "book/first-edition",
    "book/second-edition",
    "book/2018-edition",
    "rust-by-example/es",
    "rust-by-example/ja",
    "rust-by-example/ko",
    "rust-by-example/zh",
];

/// mdBook's generated pages that are not chapters.
const SKIPPED_FILES: [&str; 3] = ["print.html", "toc.html", "404.html"];

/// The separator between documents in the corpus files, also the tokenizer's one special token.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Every `HELD_OUT_EVERY`-th document (1-based: the 20th, 40th, ...) of the sorted list is held out.
pub const HELD_OUT_EVERY: usize = 20;

/// One chapter: where it came from (relative to the docs' `html/` folder) and its text.
#[derive(Debug, Clone)]
pub struct Document {
    pub source: String,
    pub text: String,
}

impl Document {
    /// Whether the document belongs to the held-out split, by its index in the corpus order.
    pub fn is_held_out(index: usize) -> bool {
        (index + 1).is_multiple_of(HELD_OUT_EVERY)
    }
}

/// The chapter pages of one book, sorted by path (byte order), before stub detection.
pub fn list_pages(html_root: &Path, book: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut pages = Vec::new();
    collect(html_root, &html_root.join(book), &mut pages)?;
    pages.sort();
    Ok(pages)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let rel = relative(root, &path);
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&rel.as_str()) {
                collect(root, &path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "html")
            && !path.file_name().is_some_and(|n| SKIPPED_FILES.iter().any(|s| n == *s))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// `path` relative to `root`, with `/` separators.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Every document of the five books, in corpus order.
pub fn extract_all(html_root: &Path) -> std::io::Result<Vec<Document>> {
    let mut docs = Vec::new();
    for book in BOOKS {
        for page in list_pages(html_root, book)? {
            let html = std::fs::read_to_string(&page)?;
            if let Some(text) = extract(&html) {
                docs.push(Document { source: relative(html_root, &page), text });
            }
        }
    }
    Ok(docs)
}

/// The text of one mdBook page; `None` for a redirect stub or a page without text in `<main>`.
pub fn extract(html: &str) -> Option<String> {
    let doc = Html::parse_document(html);
    let refresh = Selector::parse(r#"meta[http-equiv="refresh"]"#).ok()?;
    if doc.select(&refresh).next().is_some() {
        return None;
    }
    let main = Selector::parse("main").ok()?;
    let main = doc.select(&main).next()?;
    let mut out = TextBuilder::default();
    out.walk(*main);
    let text = out.finish();
    (!text.is_empty()).then_some(text)
}

const DROPPED: [&str; 8] = ["script", "style", "nav", "button", "noscript", "svg", "template", "img"];
const BLOCKS: [&str; 25] = [
    "p",
    "div",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "section",
    "header",
    "footer",
    "hr",
];

/// Lines of text built while walking the DOM.
#[derive(Default)]
struct TextBuilder {
    lines: Vec<String>,
    /// The line being built from inline text; its white space is already collapsed.
    line: String,
}

impl TextBuilder {
    fn walk(&mut self, node: NodeRef<'_, Node>) {
        match node.value() {
            Node::Text(t) => self.inline(t),
            Node::Element(e) => {
                let name = e.name();
                if DROPPED.contains(&name) || e.has_class("boring", scraper::CaseSensitivity::CaseSensitive) {
                    return;
                }
                match name {
                    "pre" => {
                        self.flush();
                        let mut code = String::new();
                        verbatim(node, &mut code);
                        let code: Vec<&str> = code.lines().map(str::trim_end).collect();
                        let first = code.iter().position(|l| !l.is_empty());
                        let last = code.iter().rposition(|l| !l.is_empty());
                        if let (Some(a), Some(b)) = (first, last) {
                            self.lines.push(code[a..=b].join("\n"));
                        }
                    }
                    "br" => self.flush(),
                    "td" | "th" => {
                        if !self.line.trim().is_empty() {
                            self.line.truncate(self.line.trim_end().len());
                            self.line.push_str(" | ");
                        }
                        self.children(node);
                    }
                    _ if BLOCKS.contains(&name) => {
                        self.flush();
                        if name == "li" {
                            self.line.push_str("- ");
                        }
                        self.children(node);
                        self.flush();
                    }
                    _ => self.children(node),
                }
            }
            _ => {}
        }
    }

    fn children(&mut self, node: NodeRef<'_, Node>) {
        for child in node.children() {
            self.walk(child);
        }
    }

    /// Appends inline text, collapsing runs of white space to one space.
    fn inline(&mut self, text: &str) {
        for (i, word) in text.split_whitespace().enumerate() {
            let space_before = i > 0 || text.starts_with(char::is_whitespace);
            if space_before && !self.line.is_empty() && !self.line.ends_with(' ') {
                self.line.push(' ');
            }
            self.line.push_str(word);
        }
        if text.ends_with(char::is_whitespace) && !self.line.is_empty() && !self.line.ends_with(' ') {
            self.line.push(' ');
        }
    }

    /// Ends the current line, unless it holds nothing but a list marker (a `<p>` inside an `<li>`).
    fn flush(&mut self) {
        let line = self.line.trim();
        if line.is_empty() || line == "-" {
            return;
        }
        self.lines.push(line.to_string());
        self.line.clear();
    }

    fn finish(mut self) -> String {
        self.line = self.line.trim().to_string();
        if self.line == "-" {
            self.line.clear();
        }
        self.flush();
        self.lines.join("\n")
    }
}

/// The text of a code block as written, without the lines mdBook hides.
fn verbatim(node: NodeRef<'_, Node>, out: &mut String) {
    for child in node.children() {
        match child.value() {
            Node::Text(t) => out.push_str(t),
            Node::Element(e) if e.has_class("boring", scraper::CaseSensitivity::CaseSensitive) => {}
            Node::Element(e) if DROPPED.contains(&e.name()) => {}
            Node::Element(_) => verbatim(child, out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r##"<!DOCTYPE html><html><head><title>T</title><script>var x = 1;</script></head>
<body><nav class="sidebar"><ol><li>Contents</li></ol></nav>
<main>
  <h1 id="ownership"><a class="header" href="#ownership">What   Is
  Ownership?</a></h1>
  <p>Each value in Rust has an <em>owner</em>.   There can
     only be one owner at a time.</p>
  <ul><li><p>First rule</p></li><li>Second <code>rule</code></li></ul>
  <pre class="playground"><code class="language-rust"><span class="boring">fn main() {
</span>    let s = String::from("hello");   
    println!("{s}");
<span class="boring">}</span></code></pre>
  <table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
  <button class="clip-button">copy</button>
</main>
<nav class="nav-wrapper"><a href="next.html">Next</a></nav>
</body></html>"##;

    #[test]
    fn extracts_prose_lists_code_and_tables() {
        let text = extract(PAGE).unwrap();
        let expected = "What Is Ownership?\n\
            Each value in Rust has an owner. There can only be one owner at a time.\n\
            - First rule\n\
            - Second rule\n    \
            let s = String::from(\"hello\");\n    \
            println!(\"{s}\");\n\
            Name | Value\n\
            a | 1";
        assert_eq!(text, expected);
    }

    #[test]
    fn skips_redirect_stubs() {
        let stub = r#"<html><head><meta http-equiv="refresh" content="0; URL=./x.html"></head>
            <body><main><p>Redirecting to x</p></main></body></html>"#;
        assert_eq!(extract(stub), None);
    }

    #[test]
    fn holds_out_every_twentieth_document() {
        let held: Vec<usize> = (0..60).filter(|&i| Document::is_held_out(i)).collect();
        assert_eq!(held, [19, 39, 59]);
    }
}
