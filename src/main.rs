//! The web app's entry point. Natively there is nothing to run: see README.md.

#[cfg(target_arch = "wasm32")]
fn main() {
    attention_lab::ui::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("Attention Lab runs in the browser: `bash scripts/serve.sh` builds and serves it (see README.md).");
    eprintln!("Natively, try the kernel benchmark: `cargo run --release --bin bench`.");
}
