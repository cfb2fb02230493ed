//! What the native GPU tests share: one device per test (lavapipe in CI), closed cleanly, and seeded
//! random inputs.

use attention_lab::attention::inputs::SplitMix64;
use attention_lab::gpu::GpuContext;

/// A device, or `None` (the test prints `SKIP` and passes) when there is no adapter; under `CI=true`
/// a missing adapter fails the test.
pub fn device() -> Option<GpuContext> {
    match pollster::block_on(GpuContext::new()) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("CI=true but no GPU adapter: {e}"),
        Err(e) => {
            println!("SKIP: no adapter ({e})");
            None
        }
    }
}

/// Waits for the device to go idle before dropping it (software drivers crash on exit otherwise).
pub fn close(ctx: GpuContext) {
    ctx.device.poll(wgpu::PollType::wait_indefinitely()).expect("device idle");
    drop(ctx);
}

pub fn random(len: usize, amplitude: f32, rng: &mut SplitMix64) -> Vec<f32> {
    (0..len).map(|_| rng.next_signed_unit() * amplitude).collect()
}
