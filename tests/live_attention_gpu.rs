//! Live attention on the GPU kernels (lavapipe natively) against the same requests on the CPU tier:
//! every head's map, exact and pooled, and the heads' outputs.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use attention_lab::attention::layer_inputs::{LayerInputs, LayerLayout};
use attention_lab::attention::pooled::Pool;
use attention_lab::attention::tokens::generated_tokens;
use attention_lab::engine::Engine;
use attention_lab::gpu::{GpuContext, Kernels};
use attention_lab::live_attention::{self, HeadMap, LiveSink, Progress, Request, Weights, head_outputs};
use attention_lab::model::Mask;
use attention_lab::model::presets::preset;

#[derive(Default)]
struct Maps {
    progress: RefCell<Progress>,
    heads: RefCell<Vec<Arc<HeadMap>>>,
}

impl LiveSink for Maps {
    fn wanted(&self) -> bool {
        true
    }
    fn progress(&self, change: &dyn Fn(&mut Progress)) {
        change(&mut self.progress.borrow_mut());
    }
    fn inputs(&self, _: Option<Arc<LayerInputs>>) {}
    fn head_ready(&self, _: usize, map: Arc<HeadMap>) {
        self.heads.borrow_mut().push(map);
    }
    fn focused(&self, _: Option<Arc<HeadMap>>) {}
    fn next_token(&self, _: &[u32], _: Result<&[f32], &str>) {}
}

fn request(n: usize, cells: u32) -> Request {
    Request {
        layout: LayerLayout::of(preset("llama-3-8b").unwrap(), 0),
        tokens: Arc::new(generated_tokens(n, 3)),
        kv_tokens: None,
        seed: 3,
        teach: true,
        mask: Mask::Causal,
        heads: (0..8).collect(),
        pool: Pool::Mean,
        map_cells: cells,
        focus_cells: cells,
        focus: None,
        ids: None,
    }
}

fn maps(engine: &Rc<Engine>, req: &Request) -> (Progress, Vec<Arc<HeadMap>>) {
    let sink = Maps::default();
    pollster::block_on(live_attention::run(engine, &Weights::Synthetic, req, 1, 0.0, &sink));
    (sink.progress.into_inner(), sink.heads.into_inner())
}

#[test]
fn the_gpu_and_the_cpu_reference_hand_out_the_same_maps_and_outputs() {
    let Some(ctx) = pollster::block_on(GpuContext::new()).ok() else {
        assert!(std::env::var("CI").is_err(), "CI must have a GPU adapter (lavapipe)");
        eprintln!("SKIP: no adapter");
        return;
    };
    let kernels = Kernels::new(&ctx);
    let gpu = Rc::new(Engine::WebGpu { ctx, kernels });
    let cpu = Rc::new(Engine::Cpu { reason: "the yardstick".into() });
    // 12 tokens: every cell; 300: pooled by mean to 16 x 16.
    for req in [request(12, 12), request(300, 16)] {
        let ((p_gpu, on_gpu), (p_cpu, on_cpu)) = (maps(&gpu, &req), maps(&cpu, &req));
        assert!(p_gpu.finished && p_gpu.on_gpu && p_gpu.error.is_none(), "{p_gpu:?}");
        assert!(p_cpu.finished && !p_cpu.on_gpu && p_cpu.error.is_none(), "{p_cpu:?}");
        assert_eq!(on_gpu.len(), 8);
        for (g, c) in on_gpu.iter().zip(&on_cpu) {
            assert_eq!((g.head, g.rows, g.cols, g.pooled), (c.head, c.rows, c.cols, c.pooled));
            let worst = g.values.iter().zip(&c.values).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst < 1e-4, "n = {}, head {}: maps differ by {worst}", req.tokens.len(), g.head);
        }
    }
    let inputs = request(40, 40).inputs();
    let outputs = |engine: &Engine| {
        pollster::block_on(head_outputs(engine, &inputs, &[1, 6], Mask::Causal, &|| true)).expect("outputs")
    };
    let (g, c) = (outputs(&gpu), outputs(&cpu));
    let worst = g.concat().iter().zip(&c.concat()).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "outputs differ by {worst}");
}
