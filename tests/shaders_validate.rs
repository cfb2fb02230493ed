//! Every `shaders/*.wgsl`, with its `shaders/include/` pieces pasted in, parses and validates with
//! naga (no GPU needed), and stays inside the WebGPU baseline limits the browser grants: at most 8
//! storage buffers per stage, at most 16384 bytes of workgroup memory and 256 invocations per
//! workgroup, all at the shader's default override values.

use std::fs;
use std::path::Path;

use naga::valid::{Capabilities, ValidationFlags, Validator};

const MAX_STORAGE_BUFFERS_PER_STAGE: usize = 8;
const MAX_WORKGROUP_BYTES: u32 = 16384;
const MAX_INVOCATIONS: u32 = 256;

fn shader_files() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("shaders/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    files.sort();
    files
}

/// Shaders named `*_subgroup.wgsl` need subgroup operations, and `*_coop.wgsl` cooperative matrices
/// with f16 (their owners build them only where the device has them: `gpu::matrix_units` for the
/// latter, a native-only feature of wgpu 30, so no browser ever compiles them); every other shader needs
/// nothing beyond the baseline.
fn capabilities(name: &str) -> Capabilities {
    if name.ends_with("_subgroup.wgsl") {
        Capabilities::SUBGROUP
    } else if name.ends_with("_coop.wgsl") {
        Capabilities::COOPERATIVE_MATRIX | Capabilities::SHADER_FLOAT16
    } else {
        Capabilities::empty()
    }
}

fn validate(module: &naga::Module, capabilities: Capabilities) -> naga::valid::ModuleInfo {
    Validator::new(ValidationFlags::all(), capabilities).validate(module).unwrap_or_else(|e| panic!("invalid: {e:?}"))
}

#[test]
fn every_shader_validates_within_web_limits() {
    let files = shader_files();
    assert!(!files.is_empty(), "no shaders found");
    for path in files {
        let name = path.file_name().expect("file name").to_string_lossy().into_owned();
        let source =
            attention_lab::gpu::shader_text::with_includes(&fs::read_to_string(&path).expect("readable shader"));
        let module =
            naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&source)));
        let info = validate(&module, capabilities(&name));
        assert!(!module.entry_points.is_empty(), "{name}: no entry point");
        for ep in &module.entry_points {
            // Resolve overrides at their defaults, keeping only this entry point (as a pipeline would).
            let (resolved, resolved_info) = naga::back::pipeline_constants::process_overrides(
                &module,
                &info,
                Some((ep.stage, &ep.name)),
                &naga::back::PipelineConstants::default(),
            )
            .unwrap_or_else(|e| panic!("{name}::{}: overrides: {e:?}", ep.name));
            let resolved_ep = &resolved.entry_points[0];
            let ep_info = resolved_info.get_entry_point(0);

            let mut layouter = naga::proc::Layouter::default();
            layouter.update(resolved.to_ctx()).expect("layout");
            let mut storage_buffers = 0;
            let mut workgroup_bytes = 0u32;
            for (handle, var) in resolved.global_variables.iter() {
                if ep_info[handle].is_empty() {
                    continue; // not used by this entry point
                }
                match var.space {
                    naga::AddressSpace::Storage { .. } => storage_buffers += 1,
                    naga::AddressSpace::WorkGroup => workgroup_bytes += layouter[var.ty].size,
                    _ => {}
                }
            }
            let invocations: u32 = resolved_ep.workgroup_size.iter().product();
            println!(
                "{name}::{}: {storage_buffers} storage buffers, {workgroup_bytes} B workgroup memory, {invocations} invocations",
                ep.name
            );
            assert!(
                storage_buffers <= MAX_STORAGE_BUFFERS_PER_STAGE,
                "{name}::{}: {storage_buffers} storage buffers",
                ep.name
            );
            assert!(
                workgroup_bytes <= MAX_WORKGROUP_BYTES,
                "{name}::{}: {workgroup_bytes} B of workgroup memory",
                ep.name
            );
            assert!(invocations <= MAX_INVOCATIONS, "{name}::{}: {invocations} invocations", ep.name);
        }
    }
}

/// The matrix-unit forward declares the workgroup memory `CoopTiles::workgroup_bytes` counts (the
/// figure its owner checks against the device's limit), built as its owner builds it at every head
/// width and both matrix sides.
#[test]
fn the_coop_kernels_workgroup_memory_is_what_its_tiles_count() {
    use attention_lab::gpu::flash_attention_coop::{FlashAttentionCoop, constants, with_side};
    use attention_lab::gpu::kernel::Kernel;
    use attention_lab::gpu::matrix_units::MatrixUnits;
    use attention_lab::gpu::shader_text::{unroll_loops, with_constants, with_includes};
    for side in [16, 8] {
        let source = with_includes(&with_side(FlashAttentionCoop::SOURCE, side));
        for d in [32u32, 64, 128, 192, 256] {
            let tiles = MatrixUnits { side, subgroup_size: 32 }.tiles(d, 32768).expect("fits 32 KiB");
            let constants = constants(&tiles, d);
            let text = unroll_loops(&with_constants(&source, &constants), &constants);
            let module = naga::front::wgsl::parse_str(&text).unwrap_or_else(|e| panic!("{}", e.emit_to_string(&text)));
            validate(&module, capabilities("flash_attention_coop.wgsl"));
            let mut layouter = naga::proc::Layouter::default();
            layouter.update(module.to_ctx()).expect("layout");
            let bytes: u32 = module
                .global_variables
                .iter()
                .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
                .map(|(_, v)| layouter[v.ty].size)
                .sum();
            assert_eq!(bytes, tiles.workgroup_bytes(), "side {side}, d {d}: {tiles:?}");
        }
    }
}

/// WGSL allows 8 KiB of function-scope variables in one function, every declaration counted (the
/// copies of written-out loops too), and browsers refuse a shader past it (Tint: "the combined byte
/// size of all variables in this function exceeds 8192 bytes"); naga does not check. So each kernel
/// that keeps a head's rows in variables is built here as its owner builds it, at every head width up
/// to the widest the kernels take, with its loops and written out, and its variables counted.
#[test]
fn attending_kernels_keep_within_wgsl_function_memory_at_every_width() {
    use attention_lab::gpu::flash_tiles::{FlashTiles, cpu_forward_rows_per_invocation, queries_in_registers};
    use attention_lab::gpu::shader_text::with_includes;
    const MAX_FUNCTION_BYTES: u32 = 8192;
    let read = |name: &str| with_includes(&fs::read_to_string(Path::new("shaders").join(name)).expect("shader"));
    let flash = read("flash_attention.wgsl");
    let flash_sg = read("flash_attention_subgroup.wgsl");
    let rows = read("row_softmax.wgsl");
    let rows_sg = read("row_softmax_subgroup.wgsl");
    let check = |name: &str, source: &str, constants: &[(&str, u32)]| {
        for unrolled in [false, true] {
            let bytes = function_bytes(name, source, constants, unrolled);
            assert!(
                bytes <= MAX_FUNCTION_BYTES,
                "{name} {constants:?} unrolled {unrolled}: {bytes} B of function variables"
            );
        }
    };
    // The check can fail: with its query rows kept, the 1,024-wide subgroup kernel would hold 8 KiB of
    // them and its output rows alone.
    let kept = [("D", 1024), ("D4", 256), ("R", 1), ("BC", 4), ("Q_REGS", 1)];
    assert!(function_bytes("flash_attention_subgroup.wgsl", &flash_sg, &kept, true) > MAX_FUNCTION_BYTES);
    let web = wgpu::Limits::defaults();
    for d in [64u32, 128, 256, 320, 512, 576, 1024] {
        let d4 = d / 4;
        // GPUs: staged tiles, one row an invocation; CPU adapters: direct reads, several rows.
        for tiles in [FlashTiles::web_gpu(d), FlashTiles::choose(&web, true, d)] {
            let r = tiles.rows_per_invocation(d);
            let q_regs = u32::from(queries_in_registers(d, r));
            let stage = u32::from(tiles.stage_kv);
            let constants =
                [("D", d), ("D4", d4), ("BC", tiles.keys_per_tile), ("R", r), ("STAGE_KV", stage), ("Q_REGS", q_regs)];
            check("flash_attention.wgsl", &flash, &constants);
        }
        // SwiftShader's 4 lanes and lavapipe's 8.
        for lanes in [4, 8] {
            let r = cpu_forward_rows_per_invocation(d);
            let q_regs = u32::from(queries_in_registers(d, r));
            check(
                "flash_attention_subgroup.wgsl",
                &flash_sg,
                &[("D", d), ("D4", d4), ("R", r), ("BC", lanes), ("Q_REGS", q_regs)],
            );
            // The row softmax's rows per invocation (`RowSoftmax::plan`): 256 / d, 1 or 2; 1 on GPUs.
            for r in [1, (256 / d).clamp(1, 2)] {
                for output in 0..4 {
                    check("row_softmax.wgsl", &rows, &[("D4", d4), ("R", r), ("OUTPUT", output)]);
                    check(
                        "row_softmax_subgroup.wgsl",
                        &rows_sg,
                        &[("D4", d4), ("R", r), ("OUTPUT", output), ("SG", lanes)],
                    );
                }
            }
        }
    }
    // attention_probs.wgsl sizes its query row for the widest head (an override sets the width).
    let probs = read("attention_probs.wgsl");
    check("attention_probs.wgsl", &probs, &[]);
}

/// The most bytes of function-scope variables any function of `source` declares, built with
/// `constants` (and its loops over them written out when `unrolled`), as WGSL's limit counts them.
fn function_bytes(name: &str, source: &str, constants: &[(&str, u32)], unrolled: bool) -> u32 {
    use attention_lab::gpu::shader_text::{unroll_loops, with_constants};
    let text = with_constants(source, constants);
    let text = if unrolled { unroll_loops(&text, constants) } else { text };
    let module = naga::front::wgsl::parse_str(&text)
        .unwrap_or_else(|e| panic!("{name} {constants:?}: {}", e.emit_to_string(&text)));
    validate(&module, capabilities(name));
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).expect("layout");
    let functions = module.functions.iter().map(|(_, f)| f).chain(module.entry_points.iter().map(|e| &e.function));
    functions.map(|f| f.local_variables.iter().map(|(_, v)| layouter[v.ty].size).sum()).max().unwrap_or(0)
}
