//! The shape of `src/`, checked: which file refers to which, from their own paths.
//!
//! A file refers to another when its non-test code names an item the other defines: through `use`, a
//! qualified path (`crate::catalog::presets::preset`), or a path inside a macro call (`view!`, `format!`).
//! A path that reaches an item through a `pub use` counts as a reference to the file that defines it.
//! Declaring a module (`mod x;`) is not a reference. Code under `#[cfg(test)]` is left out.
//!
//! The rules: the graph has no cycle; the floors of the house refer only to their own floor or
//! those below (`LAYERS`: event loop < model < catalog < attention < cpu < lm < gpu < engine < live attention <
//! views < app state < ui), so the platform-free floors never name the views or the UI, and the live-
//! attention service never names its clients; only `main.rs` and `lib.rs` reach into `src/ui/` from
//! outside it; `views` never refers to `state.rs`, in its tests neither (the state is built from the
//! views' list, not the other way); and the app state's fields are private, so `ui` writes it only
//! through the link's parsers and named transitions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::Visit;

/// A module path inside the library crate, `[]` being the crate root.
type ModPath = Vec<String>;

/// One source file: its module path and what it defines, re-exports and refers to.
struct SourceFile {
    rel: String,
    module: ModPath,
    /// Which crate `crate::` means here: the library, or a binary (`main.rs`, `bin/*`).
    in_library: bool,
    /// Declared `#[cfg(test)] mod x;`: a whole test module in a file of its own.
    test_only: bool,
    ast: syn::File,
}

/// The library's modules: path -> file, and each file's own item names and `pub use` re-exports.
struct Crate {
    files: Vec<SourceFile>,
    module_file: BTreeMap<ModPath, usize>,
    defined: Vec<BTreeSet<String>>,
    reexports: Vec<BTreeMap<String, Vec<String>>>,
}

#[test]
fn src_has_no_import_cycle_and_layers_point_one_way() {
    let krate = Crate::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let edges = krate.edges();
    let mut problems = Vec::new();

    for cycle in cycles(&edges) {
        problems.push(format!("files that refer to each other in a loop: {}", cycle.join(", ")));
    }
    for (from, targets) in &edges {
        for to in targets {
            let into_ui = to.starts_with("ui/") && !from.starts_with("ui/");
            if into_ui && from != "main.rs" && from != "lib.rs" {
                problems.push(format!("{from} reaches into the UI ({to}); only main.rs and lib.rs may"));
            }
            if from.starts_with("views/") && to == "state.rs" {
                problems.push(format!("{from} refers to the app state; views read `views::registry::Settings`"));
            }
            let pure = ["model/", "catalog/", "attention/", "cpu/", "gpu/", "lm/"].iter().any(|p| from.starts_with(p));
            if pure && (to.starts_with("ui/") || to.starts_with("views/")) {
                problems.push(format!("{from} (platform-free) refers to {to}"));
            }
            let below_service = pure || from == "engine.rs" || from == "event_loop.rs";
            if below_service && to.starts_with("live_attention/") {
                problems.push(format!("{from} (below live attention) refers to {to}"));
            }
            if let (Some(low), Some(high)) = (layer_rank(from), layer_rank(to))
                && low < high
            {
                problems.push(format!("{from} refers up the floors to {to} (LAYERS, lowest first: {LAYERS:?})"));
            }
            let upward = to.starts_with("ui/") || to.starts_with("views/") || to == "state.rs";
            if from.starts_with("live_attention/") && upward {
                problems.push(format!("{from} (live attention, below the views) refers to {to}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check must see the code it guards: a few references every version of the app has.
    assert!(edges.get("main.rs").is_some_and(|t| t.contains("ui/mod.rs")), "{edges:#?}");
    assert!(edges.values().flatten().any(|t| t.starts_with("model/")), "{edges:#?}");
    let service_uses_the_engine = edges.get("live_attention/batch.rs").is_some_and(|t| t.contains("engine.rs"));
    assert!(service_uses_the_engine, "{edges:#?}");
}

/// The floors of the house, lowest first, each the files whose paths start so: a file refers only to
/// its own floor or those below. The page's pause (`event_loop.rs`) is the basement: every floor that
/// works long may call it. The engine's floor holds its jobs of the paged pool (`paged_decode.rs`).
const LAYERS: [&[&str]; 12] = [
    &["event_loop.rs"],
    &["model/"],
    &["catalog/"],
    &["attention/"],
    &["cpu/"],
    &["lm/"],
    &["gpu/"],
    &["engine.rs", "paged_decode.rs"],
    &["live_attention/"],
    &["views/"],
    &["state.rs"],
    &["ui/"],
];

fn layer_rank(file: &str) -> Option<usize> {
    LAYERS.iter().position(|floor| floor.iter().any(|prefix| file.starts_with(prefix)))
}

#[test]
fn views_do_not_name_the_app_state_even_in_their_tests() {
    let krate = Crate::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let with_tests = krate.references(true);
    let views: Vec<&String> = with_tests.keys().filter(|f| f.starts_with("views/")).collect();
    assert!(views.len() > 20, "the check must see the views: {views:?}");
    let naming: Vec<&String> = views.into_iter().filter(|f| with_tests[*f].contains("state.rs")).collect();
    assert!(naming.is_empty(), "views that refer to the app state (test code included): {naming:?}");
    // The check must see test code: with it, more references than without.
    let count = |graph: &BTreeMap<String, BTreeSet<String>>| graph.values().map(BTreeSet::len).sum::<usize>();
    assert!(count(&with_tests) > count(&krate.edges()));
}

#[test]
fn the_app_state_is_written_only_through_its_own_methods() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::read(&src);
    let state = krate.files.iter().find(|f| f.rel == "state.rs").expect("src/state.rs");
    let app_state = state.ast.items.iter().find_map(|item| match item {
        syn::Item::Struct(s) if s.ident == "AppState" => Some(s),
        _ => None,
    });
    let app_state = app_state.expect("state.rs defines AppState");
    let public: Vec<String> = app_state
        .fields
        .iter()
        .filter(|f| !matches!(f.vis, syn::Visibility::Inherited))
        .map(|f| f.ident.as_ref().map_or("?".into(), ToString::to_string))
        .collect();
    assert!(app_state.fields.len() >= 3 && public.is_empty(), "public fields of AppState: {public:?}");
    // Reading through `Deref` is the point; nothing may hand out the fields mutably again.
    let mut problems = Vec::new();
    for file in &krate.files {
        for item in &file.ast.items {
            let syn::Item::Impl(imp) = item else { continue };
            let syn::Type::Path(ty) = imp.self_ty.as_ref() else { continue };
            if ty.path.segments.last().is_none_or(|s| s.ident != "AppState") {
                continue;
            }
            match &imp.trait_ {
                Some((t, _)) => {
                    let name = t.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
                    if ["DerefMut", "AsMut", "BorrowMut", "IndexMut"].contains(&name.as_str()) {
                        problems.push(format!("{}: impl {name} for AppState", file.rel));
                    }
                }
                None => problems.extend(imp.items.iter().filter_map(|it| match it {
                    syn::ImplItem::Fn(f)
                        if !matches!(f.vis, syn::Visibility::Inherited)
                            && f.sig.output.to_token_stream().to_string().contains("& mut") =>
                    {
                        Some(format!("{}: AppState::{} returns a mutable reference", file.rel, f.sig.ident))
                    }
                    _ => None,
                })),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut paths = Vec::new();
        collect_rs_files(src, &mut paths);
        let test_only = test_only_files(src, &paths);
        let mut files = Vec::new();
        for path in paths {
            let rel = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&path).unwrap();
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let in_library = !(rel == "main.rs" || rel.starts_with("bin/"));
            let test_only = test_only.contains(&rel);
            files.push(SourceFile { module: module_path(&rel), rel, in_library, test_only, ast });
        }
        let module_file =
            files.iter().enumerate().filter(|(_, f)| f.in_library).map(|(i, f)| (f.module.clone(), i)).collect();
        let defined = files.iter().map(|f| defined_names(&f.ast.items)).collect();
        let reexports = files.iter().map(public_reexports).collect();
        Crate { files, module_file, defined, reexports }
    }

    /// file -> the files its non-test code refers to (itself left out).
    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.references(false)
    }

    /// file -> the files it refers to, test code included when `with_tests` (itself left out).
    fn references(&self, with_tests: bool) -> BTreeMap<String, BTreeSet<String>> {
        let mut out = BTreeMap::new();
        for (i, file) in self.files.iter().enumerate().filter(|(_, f)| with_tests || !f.test_only) {
            let mut paths = PathCollector { with_tests, ..Default::default() };
            for item in &file.ast.items {
                if with_tests || !is_test_only(item_attrs(item)) {
                    paths.visit_item(item);
                }
            }
            let aliases = local_aliases(file);
            let mut targets = BTreeSet::new();
            for path in paths.uses.iter().chain(&paths.paths) {
                let Some(absolute) = self.absolute(file, path, &aliases) else { continue };
                if let Some(target) = self.resolve(&absolute, 0)
                    && target != i
                {
                    targets.insert(self.files[target].rel.clone());
                }
            }
            out.insert(file.rel.clone(), targets);
        }
        out
    }

    /// `path` as seen from `file`, made absolute within the library, or `None` for other crates.
    fn absolute(
        &self,
        file: &SourceFile,
        path: &[String],
        aliases: &BTreeMap<String, Vec<String>>,
    ) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" if file.in_library => vec![],
            "attention_lab" => vec![],
            "self" => file.module.clone(),
            "super" => {
                let mut m = file.module.clone();
                let mut rest = rest;
                m.pop()?;
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop()?;
                    rest = &rest[1..];
                }
                return Some(m.into_iter().chain(rest.iter().cloned()).collect());
            }
            name if aliases.contains_key(name) && path.len() > 1 => {
                let expanded: Vec<String> = aliases[name].iter().chain(rest).cloned().collect();
                return self.absolute(file, &expanded, &BTreeMap::new());
            }
            name if file.in_library && self.module_file.contains_key(&child(&file.module, name)) => {
                child(&file.module, name)
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file defining what `path` (absolute) names; a `pub use` is followed to its source.
    fn resolve(&self, path: &[String], depth: usize) -> Option<usize> {
        if depth > 16 {
            return None;
        }
        let mut module: ModPath = vec![];
        let mut file = *self.module_file.get(&module)?;
        for segment in path {
            let next = child(&module, segment);
            if let Some(&f) = self.module_file.get(&next) {
                module = next;
                file = f;
                continue;
            }
            if self.defined[file].contains(segment) {
                return Some(file);
            }
            if let Some(target) = self.reexports[file].get(segment) {
                let target = self.absolute(&self.files[file], target, &BTreeMap::new())?;
                return self.resolve(&target, depth + 1).or(Some(file));
            }
            return Some(file);
        }
        Some(file)
    }
}

fn child(module: &[String], name: &str) -> ModPath {
    module.iter().cloned().chain([name.to_string()]).collect()
}

fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `model/kv_cache.rs` -> `["model", "kv_cache"]`; `model/mod.rs` -> `["model"]`; `lib.rs` -> `[]`.
fn module_path(rel: &str) -> ModPath {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Files declared as `#[cfg(test)] mod name;` (whole test modules kept beside the code).
fn test_only_files(src: &Path, paths: &[PathBuf]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for path in paths {
        let rel = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
        let Ok(ast) = syn::parse_file(&std::fs::read_to_string(path).unwrap()) else { continue };
        let dir = match rel.rsplit_once('/') {
            Some((d, "mod.rs")) => format!("{d}/"),
            Some((d, f)) => format!("{d}/{}/", f.trim_end_matches(".rs")),
            None if rel == "lib.rs" || rel == "main.rs" => String::new(),
            None => format!("{}/", rel.trim_end_matches(".rs")),
        };
        for item in &ast.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && is_test_only(&m.attrs)
            {
                out.insert(format!("{dir}{}.rs", m.ident));
                out.insert(format!("{dir}{}/mod.rs", m.ident));
            }
        }
    }
    out
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().replace(' ', "").contains("(test)"))
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        Fn(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        Type(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Names of the items a file defines at its top level (where other files' paths end).
fn defined_names(items: &[syn::Item]) -> BTreeSet<String> {
    use syn::Item::*;
    items
        .iter()
        .filter_map(|item| match item {
            Const(i) => Some(i.ident.to_string()),
            Enum(i) => Some(i.ident.to_string()),
            Fn(i) => Some(i.sig.ident.to_string()),
            Mod(i) if i.content.is_some() => Some(i.ident.to_string()),
            Static(i) => Some(i.ident.to_string()),
            Struct(i) => Some(i.ident.to_string()),
            Trait(i) => Some(i.ident.to_string()),
            Type(i) => Some(i.ident.to_string()),
            Macro(i) => i.ident.as_ref().map(ToString::to_string),
            _ => None,
        })
        .collect()
}

/// `pub use a::b::C;` -> `C -> [a, b, C]` (also `as` renames and groups).
fn public_reexports(file: &SourceFile) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for item in &file.ast.items {
        if let syn::Item::Use(u) = item
            && matches!(u.vis, syn::Visibility::Public(_) | syn::Visibility::Restricted(_))
        {
            for (name, path) in flatten_use(&u.tree, vec![]) {
                out.insert(name, path);
            }
        }
    }
    out
}

/// A file's `use` names that stand for a path: `use crate::catalog::presets;` makes `presets::x` a path.
fn local_aliases(file: &SourceFile) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for item in &file.ast.items {
        if let syn::Item::Use(u) = item
            && !is_test_only(&u.attrs)
        {
            out.extend(flatten_use(&u.tree, vec![]));
        }
    }
    out
}

/// Every (local name, full path) a use tree brings in; `self` in a group names the group's module.
fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>) -> Vec<(String, Vec<String>)> {
    match tree {
        syn::UseTree::Path(p) => flatten_use(&p.tree, push(&prefix, &p.ident.to_string())),
        syn::UseTree::Name(n) if n.ident == "self" => {
            prefix.last().map(|last| vec![(last.clone(), prefix.clone())]).unwrap_or_default()
        }
        syn::UseTree::Name(n) => vec![(n.ident.to_string(), push(&prefix, &n.ident.to_string()))],
        syn::UseTree::Rename(r) => vec![(r.rename.to_string(), push(&prefix, &r.ident.to_string()))],
        syn::UseTree::Glob(_) => vec![],
        syn::UseTree::Group(g) => g.items.iter().flat_map(|t| flatten_use(t, prefix.clone())).collect(),
    }
}

fn push(prefix: &[String], segment: &str) -> Vec<String> {
    prefix.iter().cloned().chain([segment.to_string()]).collect()
}

/// The paths a file's code names: full `use` paths, and paths in code, types and macro bodies.
#[derive(Default)]
struct PathCollector {
    uses: Vec<Vec<String>>,
    paths: Vec<Vec<String>>,
    /// Whether code under `#[cfg(test)]` counts too.
    with_tests: bool,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        use_paths(&u.tree, vec![], &mut self.uses);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if self.with_tests || !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if self.with_tests || !is_test_only(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    /// `pub(super)` names a module but refers to nothing in it.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.paths.push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        macro_paths(m.tokens.clone(), &mut self.paths);
    }
}

/// Like [`flatten_use`], but every path (a glob names its module).
fn use_paths(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => use_paths(&p.tree, push(&prefix, &p.ident.to_string()), out),
        syn::UseTree::Name(n) if n.ident == "self" => out.push(prefix),
        syn::UseTree::Name(n) => out.push(push(&prefix, &n.ident.to_string())),
        syn::UseTree::Rename(r) => out.push(push(&prefix, &r.ident.to_string())),
        syn::UseTree::Glob(_) => out.push(prefix),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix.clone(), out)),
    }
}

/// `a::b::c` sequences of identifiers in a macro's tokens (and in nested groups).
fn macro_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => macro_paths(g.stream(), out),
            TokenTree::Ident(first) => {
                let mut path = vec![first.to_string()];
                let mut j = i + 1;
                while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) =
                    (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    path.push(next.to_string());
                    j += 3;
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j - 1;
            }
            _ => {}
        }
        i += 1;
    }
}

/// Groups of files that refer to each other in a loop (each file reaches every other of its group).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach: BTreeMap<&String, BTreeSet<&String>> = edges.keys().map(|n| (n, reachable(n, edges))).collect();
    let mut grouped = BTreeSet::new();
    let mut out = Vec::new();
    for (node, from_node) in &reach {
        if grouped.contains(*node) || !from_node.contains(node) {
            continue;
        }
        let group: Vec<String> =
            from_node.iter().filter(|other| reach[*other].contains(node)).map(|n| n.to_string()).collect();
        grouped.extend(group.iter().cloned());
        out.push(group);
    }
    out
}

/// Every file reachable from `start` by one or more references.
fn reachable<'a>(start: &String, edges: &'a BTreeMap<String, BTreeSet<String>>) -> BTreeSet<&'a String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&String> = edges.get(start).into_iter().flatten().collect();
    while let Some(n) = todo.pop() {
        if seen.insert(n) {
            todo.extend(edges.get(n).into_iter().flatten());
        }
    }
    seen
}

#[test]
fn the_cycle_finder_finds_cycles_and_only_cycles() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    assert_eq!(
        cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d")])),
        vec![vec!["a", "b", "c"], vec!["d", "e"]]
    );
}
