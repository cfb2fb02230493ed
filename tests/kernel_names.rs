//! One name per kernel: every kernel in `gpu::kernels::KERNELS` is `shaders/<name>.wgsl`, owned by
//! `src/gpu/<name>.rs`, with its CPU twin `src/cpu/<name>.rs` (or a stated reason), and binds what its
//! WGSL declares. Native, no GPU needed: it reads the files and the shader text.

use std::path::Path;

use attention_lab::gpu::kernel::CpuTwin;
use attention_lab::gpu::kernels::KERNELS;
use attention_lab::gpu::launch::Binding;
use attention_lab::gpu::shader_text;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_kernel_has_its_shader_owner_and_twin_under_one_name() {
    for k in KERNELS {
        let shader = root().join(format!("shaders/{}.wgsl", k.name));
        let text = std::fs::read_to_string(&shader).unwrap_or_else(|e| panic!("{}: {e}", shader.display()));
        assert_eq!(text, k.source, "{}: SOURCE is not shaders/{}.wgsl", k.name, k.name);
        assert!(root().join(format!("src/gpu/{}.rs", k.name)).exists(), "no src/gpu/{}.rs", k.name);
        assert!(text.contains(&format!("fn {}(", k.entry_point)), "{}: no entry point {}", k.name, k.entry_point);
        match k.cpu_twin {
            CpuTwin::Named => {
                let twin = std::fs::read_to_string(root().join(format!("src/cpu/{}.rs", k.name)))
                    .unwrap_or_else(|e| panic!("{}'s twin src/cpu/{}.rs: {e}", k.name, k.name));
                assert!(twin.contains(&format!("pub fn {}(", k.name)), "src/cpu/{}.rs has no fn {}", k.name, k.name);
            }
            CpuTwin::FormOf(other) => assert!(
                KERNELS.iter().any(|o| o.name == other && o.cpu_twin == CpuTwin::Named),
                "{} is a form of {other}, which has no twin",
                k.name
            ),
            CpuTwin::Skipped(reason) => assert!(!reason.is_empty(), "{}: a skipped twin says why", k.name),
        }
    }
}

#[test]
fn every_shader_is_a_listed_kernel() {
    let mut names: Vec<String> = std::fs::read_dir(root().join("shaders"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".wgsl").map(str::to_owned))
        .collect();
    names.sort();
    for name in names {
        assert!(KERNELS.iter().any(|k| k.name == name), "shaders/{name}.wgsl is in no KERNELS entry");
    }
}

/// The `@group(0)` bindings a shader declares (includes pasted in), in `@binding` order.
fn declared(source: &str) -> Vec<Binding> {
    let mut found: Vec<(u32, Binding)> = shader_text::with_includes(source)
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("@group(0) @binding(")?;
            let (index, rest) = rest.split_once(')')?;
            let kind = if rest.contains("var<uniform>") {
                Binding::Uniform
            } else if rest.contains("read_write>") {
                Binding::ReadWrite
            } else {
                Binding::ReadOnly
            };
            Some((index.parse().unwrap(), kind))
        })
        .collect();
    found.sort_by_key(|&(i, _)| i);
    assert!(found.iter().enumerate().all(|(i, &(b, _))| b == i as u32), "bindings 0, 1, 2... in {found:?}");
    found.into_iter().map(|(_, b)| b).collect()
}

#[test]
fn every_kernel_binds_what_its_shader_declares() {
    for k in KERNELS {
        let declared = declared(k.source);
        // An entry point may bind the first few (rope's merge_heads); one kernel of each shader binds all.
        assert_eq!(k.bindings, &declared[..k.bindings.len().min(declared.len())], "{} {}", k.name, k.entry_point);
        let widest = KERNELS.iter().filter(|o| o.name == k.name).map(|o| o.bindings.len()).max();
        assert_eq!(widest, Some(declared.len()), "{}: no kernel binds all its bindings", k.name);
    }
}

/// Every "Keep in sync with `Name` in src/path.rs" note of a shader (or include) names a file that
/// defines `Name` (`Type::method`: the method), and that file names the shader back: both sides say it.
#[test]
fn every_keep_in_sync_note_points_at_a_file_that_points_back() {
    let mut shaders: Vec<_> = ["shaders", "shaders/include"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    shaders.sort();
    let mut notes = 0;
    for shader in shaders {
        let text = std::fs::read_to_string(&shader).unwrap();
        let file_name = shader.file_name().unwrap().to_str().unwrap();
        for (_, rest) in text.match_indices("Keep in sync with `").map(|(i, _)| ((), &text[i + 19..])) {
            let Some((name, rest)) = rest.split_once('`') else { continue };
            let Some(path) = rest.strip_prefix(" in ").and_then(|r| r.split([' ', '\n', ',']).next()) else {
                continue;
            };
            let path = path.trim_end_matches('.');
            let rust = std::fs::read_to_string(root().join(path))
                .unwrap_or_else(|e| panic!("{file_name}: keep in sync with `{name}` in {path}: {e}"));
            let item = name.rsplit("::").next().unwrap();
            let defined = ["struct", "enum", "const", "fn"].iter().any(|kw| rust.contains(&format!("{kw} {item}")));
            assert!(defined, "{file_name}: {path} defines no `{name}`");
            assert!(rust.contains(file_name), "{path} does not name {file_name} back (for `{name}`)");
            notes += 1;
        }
    }
    assert!(notes >= 12, "found only {notes} notes: the check must see the code it guards");
}

/// The forward kernels' traced build (`src/gpu/flash_trace.rs`, in no KERNELS entry: no shader of its
/// own) binds what the traced text declares, one binding more than the kernels as shipped.
#[test]
fn the_traced_forward_binds_what_its_traced_text_declares() {
    use attention_lab::gpu::flash_trace::FLASH_TRACE_BINDINGS;
    for name in ["flash_attention", "flash_attention_subgroup"] {
        let shipped = KERNELS.iter().find(|k| k.name == name).expect("a forward kernel");
        assert_eq!(declared(&shader_text::traced(shipped.source)), FLASH_TRACE_BINDINGS, "{name}");
        assert_eq!(shipped.bindings, &FLASH_TRACE_BINDINGS[..6], "{name}");
    }
}
