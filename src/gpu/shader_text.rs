//! Preparing WGSL text before it is compiled: shared pieces pasted in where a shader names them
//! (WGSL has no includes), compile-time constants written into `const` lines, and loops over those
//! constants written out in full ("unrolled").
//!
//! Why unroll by hand: CPU adapters (lavapipe, SwiftShader) keep a private array in registers only
//! while every index into it is a compile-time constant. An index that is a loop counter puts the
//! array in memory, where each access is a loop of scalar loads, one per SIMD lane, and their own
//! unrollers give up on loops as large as an attention step. Unrolling the text fixes the indices, and
//! made the forward kernel about 3x faster on lavapipe. GPUs get the unrolled text too: on an H100
//! (wgpu's Vulkan backend, measured with `bench`) the tiled matmul ran 7x and the flash forward 6-11x
//! slower with their loops kept, so their compiler did not do this for us (the forward kernel's
//! owner keeps its loops in the browser, where its long unrolled text's compile time is unmeasured,
//! but for a loaded model's narrow heads once their subgroup form is built).

use crate::lm::weight_plan::WeightFormat;

/// The files under `shaders/include/`, by name. Most hold declarations; those named for a part of a
/// kernel (`softmax_rows_start.wgsl`, say) hold statements, pasted inside the `main` of each kernel
/// that shares them, so the compiled code is exactly what each kernel had when it wrote them out.
const INCLUDES: [(&str, &str); 30] = [
    ("attention_io.wgsl", include_str!("../../shaders/include/attention_io.wgsl")),
    ("attention_masks.wgsl", include_str!("../../shaders/include/attention_masks.wgsl")),
    ("blocks.wgsl", include_str!("../../shaders/include/blocks.wgsl")),
    ("f16_bits.wgsl", include_str!("../../shaders/include/f16_bits.wgsl")),
    ("flash_backward_io.wgsl", include_str!("../../shaders/include/flash_backward_io.wgsl")),
    ("flash_backward_keys_end.wgsl", include_str!("../../shaders/include/flash_backward_keys_end.wgsl")),
    ("flash_backward_keys_start.wgsl", include_str!("../../shaders/include/flash_backward_keys_start.wgsl")),
    ("flash_backward_rows_end.wgsl", include_str!("../../shaders/include/flash_backward_rows_end.wgsl")),
    ("flash_backward_rows_start.wgsl", include_str!("../../shaders/include/flash_backward_rows_start.wgsl")),
    ("flash_constants.wgsl", include_str!("../../shaders/include/flash_constants.wgsl")),
    ("flash_io.wgsl", include_str!("../../shaders/include/flash_io.wgsl")),
    ("flash_keys.wgsl", include_str!("../../shaders/include/flash_keys.wgsl")),
    ("flash_rows_end.wgsl", include_str!("../../shaders/include/flash_rows_end.wgsl")),
    ("flash_rows_start.wgsl", include_str!("../../shaders/include/flash_rows_start.wgsl")),
    ("flash_softmax_step.wgsl", include_str!("../../shaders/include/flash_softmax_step.wgsl")),
    ("flash_trace_io.wgsl", include_str!("../../shaders/include/flash_trace_io.wgsl")),
    ("flash_trace_step.wgsl", include_str!("../../shaders/include/flash_trace_step.wgsl")),
    ("flash_subgroup_constants.wgsl", include_str!("../../shaders/include/flash_subgroup_constants.wgsl")),
    ("flash_subgroup_keys.wgsl", include_str!("../../shaders/include/flash_subgroup_keys.wgsl")),
    ("grid.wgsl", include_str!("../../shaders/include/grid.wgsl")),
    ("matmul_io.wgsl", include_str!("../../shaders/include/matmul_io.wgsl")),
    ("matmul_subgroup_y.wgsl", include_str!("../../shaders/include/matmul_subgroup_y.wgsl")),
    ("matmul_subgroup_y4.wgsl", include_str!("../../shaders/include/matmul_subgroup_y4.wgsl")),
    ("matmul_y.wgsl", include_str!("../../shaders/include/matmul_y.wgsl")),
    ("query_head_params.wgsl", include_str!("../../shaders/include/query_head_params.wgsl")),
    ("paged_rows.wgsl", include_str!("../../shaders/include/paged_rows.wgsl")),
    ("softmax_rows.wgsl", include_str!("../../shaders/include/softmax_rows.wgsl")),
    ("softmax_rows_start.wgsl", include_str!("../../shaders/include/softmax_rows_start.wgsl")),
    ("weights_bf16.wgsl", include_str!("../../shaders/include/weights_bf16.wgsl")),
    ("weights_f32.wgsl", include_str!("../../shaders/include/weights_f32.wgsl")),
];

/// `source` with each line `// #include NAME` replaced by the file `shaders/include/NAME`.
/// Panics on an unknown name (a shader bug).
pub fn with_includes(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 4096);
    for line in source.lines() {
        match line.trim().strip_prefix("// #include ") {
            Some(name) => {
                let (_, text) =
                    INCLUDES.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no shaders/include/{name}"));
                out.push_str(&with_includes(text)); // an include may name others
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// `source` with the weight matrix read in `format`: a kernel that pastes in `weights_f32.wgsl` gets
/// its bf16 twin instead (same binding, same `w4`).
pub fn with_weights(source: &str, format: WeightFormat) -> String {
    match format {
        WeightFormat::F32 => source.to_owned(),
        WeightFormat::Bf16 => {
            let line = "// #include weights_f32.wgsl";
            assert!(source.contains(line), "a kernel that reads weights names weights_f32.wgsl itself");
            source.replace(line, "// #include weights_bf16.wgsl")
        }
    }
}

/// The traced build of `source` (src/gpu/flash_trace.rs): each line `// #trace NAME` becomes
/// `// #include NAME`, so the trace's binding and its writes are pasted in. Everywhere else those
/// lines stay comments: the kernels as shipped compile exactly as before. Panics if `source` has no
/// such line (a kernel that cannot be traced).
pub fn traced(source: &str) -> String {
    // Includes first: a kernel's key loop may sit in an include (`flash_keys.wgsl`) with its mark.
    let source = with_includes(source);
    assert!(source.contains("// #trace "), "a traced kernel marks where its trace goes");
    let lines: Vec<String> = source
        .lines()
        .map(|line| match line.trim().strip_prefix("// #trace ") {
            Some(name) => format!("// #include {name}"),
            None => line.to_owned(),
        })
        .collect();
    lines.join("\n") + "\n"
}

/// `source` ready for a device with subgroups: browsers want the extension enabled first, while Naga
/// (native) rejects the directive but accepts the builtins without it.
pub fn for_subgroups(source: &str) -> String {
    if cfg!(target_arch = "wasm32") { format!("enable subgroups;\n{source}") } else { source.to_owned() }
}

/// `source` with the value of each `const NAME: u32 = ...;` line named in `constants` replaced.
/// Kernels whose private arrays are sized by a value (the head width, say) take it this way rather
/// than as an override: an override cannot size an array.
/// Panics if a name has no such line (a shader and its owner out of sync).
pub fn with_constants(source: &str, constants: &[(&str, u32)]) -> String {
    let mut out = String::with_capacity(source.len());
    let mut found = vec![false; constants.len()];
    for line in source.lines() {
        let hit = constants.iter().position(|(name, _)| line.starts_with(&format!("const {name}: u32 = ")));
        match hit {
            Some(idx) => {
                let (name, value) = constants[idx];
                out.push_str(&format!("const {name}: u32 = {value}u;"));
                found[idx] = true;
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    if let Some(idx) = found.iter().position(|f| !f) {
        panic!("shader has no `const {}: u32 = ...;` line to replace", constants[idx].0);
    }
    out
}

/// `source` with every loop written exactly as `for (var i = 0u; i < NAME; i++) {` on a line of its
/// own, NAME one of `counts`, replaced by NAME's value in copies of its body, each in a block that
/// starts `let i = <k>u;`. Nested loops unroll too. Other loops are left alone.
/// Panics on an unmatched brace or a `break`/`continue` in an unrolled body (a shader bug).
pub fn unroll_loops(source: &str, counts: &[(&str, u32)]) -> String {
    let mut lines: Vec<String> = source.lines().map(str::to_owned).collect();
    // Lines before the last loop unrolled hold no more loops to unroll: each search starts there (from
    // the top it made a page's warm-up of the row softmax hold the thread for tens of ms).
    let mut from = 0;
    while let Some((start, var, count)) =
        lines.iter().enumerate().skip(from).find_map(|(i, line)| unrollable(line, counts).map(|(v, c)| (i, v, c)))
    {
        from = start;
        let end = closing_line(&lines, start);
        let body = &lines[start + 1..end];
        assert!(
            !body.iter().any(|l| code_of(l).contains("break") || code_of(l).contains("continue")),
            "cannot unroll a loop over `{var}` that breaks or continues"
        );
        let indent: String = lines[start].chars().take_while(|c| c.is_whitespace()).collect();
        let mut copies = Vec::with_capacity((body.len() + 2) * count as usize);
        for k in 0..count {
            copies.push(format!("{indent}{{"));
            copies.push(format!("{indent}    let {var} = {k}u;"));
            copies.extend(body.iter().cloned());
            copies.push(format!("{indent}}}"));
        }
        lines.splice(start..=end, copies);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Unrolled `source` ([`unroll_loops`]) with each `subgroupShuffle(x, v)` whose lane `v` is the
/// variable of an unrolled loop (the last `let v = <k>u;` before it) written `subgroupBroadcast(x, <k>u)`:
/// the same value, but WGSL takes a broadcast's lane only as a constant, which the text as written
/// (a loop) cannot give. SwiftShader runs a broadcast from a constant lane faster than the shuffle
/// (the row softmax's key step: about a tenth less time at d = 128).
pub fn constant_lanes(source: &str) -> String {
    let mut bound: Vec<(String, String)> = Vec::new();
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let code = code_of(line).trim();
        if let Some((var, value)) =
            code.strip_prefix("let ").and_then(|r| r.strip_suffix("u;")).and_then(|r| r.split_once(" = "))
            && value.bytes().all(|b| b.is_ascii_digit())
        {
            bound.retain(|(v, _)| v != var);
            bound.push((var.to_owned(), value.to_owned()));
        } else if let Some((var, _)) = code.strip_prefix("let ").and_then(|r| r.split_once(" = ")) {
            // Rebound to a value known only at run time: a shuffle from it stays one.
            bound.retain(|(v, _)| v != var);
        }
        out.push_str(&broadcast_from_bound(line, &bound));
        out.push('\n');
    }
    out
}

/// `line` with its shuffles from a lane bound in `bound` written as broadcasts from that lane.
fn broadcast_from_bound(line: &str, bound: &[(String, String)]) -> String {
    let mut line = line.to_owned();
    while let Some(at) = line.find("subgroupShuffle(") {
        let args_at = at + "subgroupShuffle(".len();
        let Some(close) = line[args_at..].find(')').map(|c| args_at + c) else { break };
        let Some((value, lane)) = line[args_at..close].rsplit_once(", ") else { break };
        let Some((_, k)) = bound.iter().find(|(v, _)| v == lane) else { break };
        line = format!("{}subgroupBroadcast({value}, {k}u){}", &line[..at], &line[close + 1..]);
    }
    line
}

/// The loop variable and trip count of a line that opens an unrollable loop.
fn unrollable(line: &str, counts: &[(&str, u32)]) -> Option<(String, u32)> {
    let rest = code_of(line).trim().strip_prefix("for (var ")?;
    let (var, rest) = rest.split_once(" = 0u; ")?;
    let (bound, rest) = rest.strip_prefix(var)?.strip_prefix(" < ")?.split_once("; ")?;
    if rest.strip_prefix(var) != Some("++) {") {
        return None;
    }
    counts.iter().find(|(name, _)| *name == bound).map(|&(_, count)| (var.to_owned(), count))
}

/// The line holding the brace that closes the one opened on line `start`.
fn closing_line(lines: &[String], start: usize) -> usize {
    let mut depth = 0i64;
    for (i, line) in lines.iter().enumerate().skip(start) {
        let code = code_of(line);
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if depth == 0 {
            return i;
        }
    }
    panic!("unbalanced braces after line {}", start + 1);
}

/// A line without its `//` comment.
fn code_of(line: &str) -> &str {
    line.split_once("//").map_or(line, |(code, _)| code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_replace_whole_lines() {
        let src = "// D: u32 = 1u in a comment stays\nconst D: u32 = 64u;\nconst DD: u32 = 2u;\nfn f() {}\n";
        let out = with_constants(src, &[("D", 128)]);
        assert_eq!(out, "// D: u32 = 1u in a comment stays\nconst D: u32 = 128u;\nconst DD: u32 = 2u;\nfn f() {}\n");
    }

    #[test]
    #[should_panic(expected = "const X")]
    fn missing_constants_are_errors() {
        with_constants("const D: u32 = 64u;\n", &[("X", 1)]);
    }

    #[test]
    fn includes_are_pasted_in_place() {
        let out = with_includes("a\n  // #include flash_io.wgsl\nb");
        assert!(out.starts_with("a\n// The outputs") && out.ends_with("lse: array<f32>;\nb\n"), "{out}");
    }

    #[test]
    #[should_panic(expected = "no shaders/include/nope.wgsl")]
    fn unknown_includes_are_errors() {
        with_includes("// #include nope.wgsl");
    }

    #[test]
    fn shuffles_from_an_unrolled_lane_become_broadcasts() {
        let src = "for (var c = 0u; c < SG; c++) {\n    let kc = subgroupShuffle(mine, c);\n    s[c] += subgroupShuffle(v, lane);\n}";
        let out = constant_lanes(&unroll_loops(src, &[("SG", 2)]));
        let want = "{\n    let c = 0u;\n    let kc = subgroupBroadcast(mine, 0u);\n    s[c] += subgroupShuffle(v, lane);\n}\n{\n    let c = 1u;\n    let kc = subgroupBroadcast(mine, 1u);\n    s[c] += subgroupShuffle(v, lane);\n}\n";
        assert_eq!(out, want);
        // Not unrolled: the lane is a variable, and the shuffle stays.
        assert_eq!(constant_lanes(src), format!("{src}\n"));
    }

    #[test]
    fn named_loops_unroll_nested_and_others_stay() {
        let src = "fn f() {\n    for (var j = 0u; j < R; j++) {\n        for (var c = 0u; c < C; c++) { // {braces} in comments\n            s[j][c] = 1.0;\n        }\n    }\n    for (var i = 0u; i < n; i++) {\n        t[i] = 0.0;\n    }\n}";
        let out = unroll_loops(src, &[("R", 2), ("C", 1)]);
        let want = "fn f() {\n    {\n        let j = 0u;\n        {\n            let c = 0u;\n            s[j][c] = 1.0;\n        }\n    }\n    {\n        let j = 1u;\n        {\n            let c = 0u;\n            s[j][c] = 1.0;\n        }\n    }\n    for (var i = 0u; i < n; i++) {\n        t[i] = 0.0;\n    }\n}\n";
        assert_eq!(out, want);
    }

    #[test]
    fn a_zero_count_removes_the_loop() {
        assert_eq!(unroll_loops("for (var j = 0u; j < R; j++) {\n    x += 1.0;\n}\ny = x;", &[("R", 0)]), "y = x;\n");
    }

    #[test]
    #[should_panic(expected = "breaks or continues")]
    fn loops_that_break_are_refused() {
        unroll_loops("for (var j = 0u; j < R; j++) {\n    break;\n}", &[("R", 2)]);
    }

    #[test]
    fn kernels_unroll_to_valid_wgsl() {
        let flash = include_str!("../../shaders/flash_attention.wgsl");
        let subgroup = include_str!("../../shaders/flash_attention_subgroup.wgsl");
        let cases: [(&str, &[(&str, u32)]); 3] = [
            (flash, &[("D", 64), ("D4", 16), ("R", 8), ("BC", 8), ("STAGE_KV", 0)]),
            (flash, &[("D", 128), ("D4", 32), ("R", 1), ("BC", 16), ("STAGE_KV", 1)]),
            (subgroup, &[("D", 64), ("D4", 16), ("R", 8), ("BC", 8)]),
        ];
        for (source, constants) in cases {
            let text = unroll_loops(&with_constants(&with_includes(source), constants), constants);
            assert!(!text.contains("< R; j++") && !text.contains("< D4; e++"), "loops left:\n{text}");
            validate(&text, constants);
        }
    }

    fn validate(text: &str, constants: &[(&str, u32)]) {
        let module = naga::front::wgsl::parse_str(text).unwrap_or_else(|e| panic!("{}", e.emit_to_string(text)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{constants:?}: {e:?}"));
    }

    #[test]
    fn traced_kernels_are_valid_wgsl_and_the_shipped_ones_only_gain_comments() {
        let flash = include_str!("../../shaders/flash_attention.wgsl");
        let subgroup = include_str!("../../shaders/flash_attention_subgroup.wgsl");
        let cases: [(&str, &[(&str, u32)]); 3] = [
            (flash, &[("D", 8), ("D4", 2), ("R", 2), ("BC", 4), ("STAGE_KV", 0)]),
            (flash, &[("D", 64), ("D4", 16), ("R", 1), ("BC", 16), ("STAGE_KV", 1)]),
            (subgroup, &[("D", 8), ("D4", 2), ("R", 2), ("BC", 4)]),
        ];
        for (source, constants) in cases {
            let text = with_includes(&traced(source));
            assert!(text.contains("var<storage, read_write> flash_trace") && text.contains("flash_trace[rec]"));
            validate(&text, &[]);
            validate(&unroll_loops(&with_constants(&text, constants), constants), constants);
            // As shipped: the trace's lines stay comments, so no code of it is compiled.
            let shipped = with_includes(source);
            assert!(shipped.lines().filter(|l| l.contains("flash_trace")).all(|l| l.trim().starts_with("//")));
        }
    }

    #[test]
    fn weight_readers_are_valid_wgsl_in_every_format_and_store_form() {
        let matmul = include_str!("../../shaders/matmul.wgsl");
        let subgroup = include_str!("../../shaders/matmul_subgroup.wgsl");
        let gather = include_str!("../../shaders/embed_gather.wgsl");
        for format in [WeightFormat::F32, WeightFormat::Bf16] {
            let tiled: &[(&str, u32)] = &[("PER", 4), ("STEP4", 4)];
            let quads: &[(&str, u32)] = &[("LANES", 8), ("RB", 8), ("COLS", 8), ("QUADS", 2)];
            let singles: &[(&str, u32)] = &[("LANES", 8), ("RB", 3), ("COLS", 3)];
            let cases = [
                (with_weights(matmul, format), tiled),
                (with_weights(subgroup, format), quads),
                (crate::gpu::matmul_subgroup::with_single_stores(&with_weights(subgroup, format)), singles),
                (with_weights(gather, format), &[]),
            ];
            for (source, constants) in cases {
                let text = unroll_loops(&with_constants(&with_includes(&source), constants), constants);
                assert_eq!(text.contains("array<vec2<u32>>"), format == WeightFormat::Bf16, "{format:?}");
                validate(&text, constants);
            }
        }
    }
}
