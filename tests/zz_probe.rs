// TEMPORARY probe (deleted after use).
use attention_lab::gpu::launch::{self, Dispatch, PipelineCache};
use attention_lab::gpu::GpuContext;
use std::time::Instant;

const COMMON: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
var<workgroup> sh: array<vec4<f32>, 1024>;
override ITERS: u32 = 1024u;
override E: u32 = 16u;
"#;

fn variant(body: &str) -> String {
    format!("{COMMON}\n@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n let index = wg.x * 64u + lid;\n var a = vec4<f32>(f32(lid));\n var b = vec4<f32>(0.5);\n var arr: array<vec4<f32>, 64>;\n for (var i = 0u; i < 64u; i++) {{ arr[i] = vec4<f32>(f32(i + lid)); }}\n {body}\n out[index] = a.x + a.y + a.z + a.w + b.x;\n}}")
}

#[test]
fn probe() {
    let ctx = pollster::block_on(GpuContext::new()).expect("ctx");
    let layout = ctx.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &[launch::storage_entry(0, false), launch::storage_entry(1, true)] });
    let out = ctx.storage_output("out", 64 * 256 * 4).unwrap();
    let src = ctx.storage_from("src", &vec![1.0f32; 4 * 4096]).unwrap();
    let bg = launch::bind_buffers(&ctx.device, &layout, "p", &[&out, &src]);
    let variants = [
        ("fma only", "for (var i = 0u; i < ITERS; i++) { a = fma(a, b, vec4<f32>(0.001)); b = fma(b, a, vec4<f32>(0.002)); }"),
        ("arr inner const 8", "for (var i = 0u; i < ITERS / 4u; i++) { for (var e = 0u; e < 8u; e++) { arr[e] = fma(arr[e], b, a); } } for (var e = 0u; e < 8u; e++) { a += arr[e]; }"),
        ("arr inner const 16", "for (var i = 0u; i < ITERS / 8u; i++) { for (var e = 0u; e < 16u; e++) { arr[e] = fma(arr[e], b, a); } } for (var e = 0u; e < 16u; e++) { a += arr[e]; }"),
        ("arr inner override 16", "for (var i = 0u; i < ITERS / 8u; i++) { for (var e = 0u; e < E; e++) { arr[e] = fma(arr[e], b, a); } } for (var e = 0u; e < E; e++) { a += arr[e]; }"),
        ("arr inner const 32", "for (var i = 0u; i < ITERS / 16u; i++) { for (var e = 0u; e < 32u; e++) { arr[e] = fma(arr[e], b, a); } } for (var e = 0u; e < 32u; e++) { a += arr[e]; }"),
        ("8 explicit vars", "var c0 = a; var c1 = b; var c2 = a + 1.0; var c3 = b + 1.0; var c4 = a + 2.0; var c5 = b + 2.0; var c6 = a + 3.0; var c7 = b + 3.0; for (var i = 0u; i < ITERS / 4u; i++) { c0 = fma(c0, b, a); c1 = fma(c1, b, a); c2 = fma(c2, b, a); c3 = fma(c3, b, a); c4 = fma(c4, b, a); c5 = fma(c5, b, a); c6 = fma(c6, b, a); c7 = fma(c7, b, a); } a = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7;"),
        ("shared uniform x8 reuse", "for (var i = 0u; i < ITERS / 4u; i++) { let x = sh[i % 1024u]; var c = a; c = fma(c, x, b); c = fma(c, x, b); c = fma(c, x, b); c = fma(c, x, b); c = fma(c, x, b); c = fma(c, x, b); c = fma(c, x, b); a = fma(c, x, b); }"),
    ];
    for (name, body) in variants {
        let src_text = variant(body);
        let cache = PipelineCache::new(&ctx.device, "probe", &src_text, "main", &layout);
        let pipeline = cache.get(&ctx.device, &[("ITERS", 4096), ("E", 16)]);
        let d = Dispatch { pipeline, bind_group: bg.clone(), grid: (256, 1, 1) };
        let mut best = f64::MAX;
        for _ in 0..4 {
            let t = Instant::now();
            Dispatch::submit_all(&ctx, &[&d]);
            ctx.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        // 2 vec4 fma per iteration = 16 flops.
        let flops = 256.0 * 64.0 * 4096.0 * 16.0;
        println!("{name:<24} {:8.2} ms  {:7.2} GFLOP/s", best * 1e3, flops / best / 1e9);
    }
    ctx.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
}
