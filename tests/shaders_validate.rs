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

/// Shaders named `*_subgroup.wgsl` need subgroup operations (their owners build them only where the
/// device has them); every other shader needs nothing beyond the baseline.
fn capabilities(name: &str) -> Capabilities {
    if name.ends_with("_subgroup.wgsl") { Capabilities::SUBGROUP } else { Capabilities::empty() }
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
