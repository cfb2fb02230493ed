//! Every family fixture loaded as a user's files are, its text tokenised by the app, and its last
//! position's logits compared with candle-transformers' (`tests/common/fixtures.rs` says how
//! closely): on the CPU forward pass, and on the GPU forward pass on a real wgpu device (lavapipe in
//! CI). The browser's twin of the GPU test is in `web.rs`.

use attention_lab::gpu::Kernels;
use attention_lab::gpu::lm_forward::{self, LmRequest, LmWeights};
use attention_lab::lm::bpe::Tokenizer;
use attention_lab::lm::checkpoint::Checkpoint;
use attention_lab::lm::forward;

#[expect(dead_code, reason = "common::gpu::random is for the kernel tests")]
mod common;
use common::gpu::{close, device};
#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{FIXTURES, TOKENIZER, check, reference};

fn loaded() -> impl Iterator<Item = (&'static str, Checkpoint)> {
    FIXTURES.into_iter().map(|(name, config, weights)| {
        (name, Checkpoint::load(config, weights).unwrap_or_else(|e| panic!("{name}: {e}")))
    })
}

#[test]
fn every_fixture_is_tokenised_as_the_reference_says() {
    let tok = Tokenizer::from_json(TOKENIZER).unwrap();
    let reference = reference();
    let names: Vec<&str> = reference.fixtures.keys().map(String::as_str).collect();
    assert_eq!(names, FIXTURES.map(|f| f.0));
    for (name, fixture) in reference.fixtures {
        for input in fixture.inputs {
            assert_eq!(tok.encode(&input.text), input.ids, "{name}: {:?}", input.text);
        }
    }
}

#[test]
fn the_cpu_forward_pass_matches_candle_on_every_family() {
    let reference = reference();
    for (name, ck) in loaded() {
        for input in &reference.fixtures[name].inputs {
            let out = forward::forward(&ck, &input.ids).unwrap_or_else(|e| panic!("{name}: {e}"));
            let what = format!("{name} CPU, {} tokens", input.ids.len());
            let worst = check(&what, out.logits_at(input.ids.len() - 1), input);
            println!("{what}: largest difference {worst:.2e}");
        }
    }
}

#[test]
fn the_gpu_forward_pass_matches_candle_on_every_family() {
    let Some(ctx) = device() else { return };
    let kernels = Kernels::new(&ctx);
    let reference = reference();
    for (name, ck) in loaded() {
        let weights = LmWeights::upload(&ctx, &ck).unwrap_or_else(|e| panic!("{name}: {e}"));
        for input in &reference.fixtures[name].inputs {
            let request = LmRequest { last_logits: Some(1), ..Default::default() };
            let out = pollster::block_on(lm_forward::run(&ctx, &kernels, &weights, &input.ids, request))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let what = format!("{name} GPU, {} tokens", input.ids.len());
            let worst = check(&what, &out.logits, input);
            println!("{what}: largest difference {worst:.2e}");
        }
    }
    close(ctx);
}
