//! Whether a dropped checkpoint's weights are also kept in the page's memory. They stream to the GPU a
//! few MB at a time (`gpu::lm_stream`), and "Gradients on the model" runs its backward pass on the CPU
//! from weights in memory, so the page reads a small checkpoint's weights file once more, whole, and
//! keeps it as f32 beside the GPU's copy (widened a slice at a time, `lm::safetensors::Widening`, so the
//! page stays responsive); a larger one (or one in several files) has no gradients here, and the panel
//! says why.

use crate::model::units::format_bytes;

/// The largest weights file kept in the page's memory: as f32 a bf16 file takes twice its size, so at
/// most 128 MiB beside the file's own 64 MiB while it is read, far inside wasm32's 4 GiB. The trained
/// model's file is 4.9 MB; SmolLM2-135M's (270 MB) is over it.
pub const HOST_COPY_MAX_BYTES: u64 = 64 << 20;

/// Whether weights in files of `file_sizes` bytes are kept in memory: `Ok` for one file of at most
/// [`HOST_COPY_MAX_BYTES`], else why not, as the gradients panel says it.
pub fn host_copy(file_sizes: &[u64]) -> Result<(), String> {
    let total: u64 = file_sizes.iter().sum();
    let kept = format_bytes(HOST_COPY_MAX_BYTES.into());
    let why = match file_sizes {
        [one] if *one <= HOST_COPY_MAX_BYTES => return Ok(()),
        [_] => format!("its weights file is {}, more than the {kept} it keeps", format_bytes(total.into())),
        _ => format!(
            "its weights come in {} files ({}); it keeps one file of at most {kept}",
            file_sizes.len(),
            format_bytes(total.into())
        ),
    };
    Err(not_kept(&why))
}

/// Why a checkpoint has no gradients: `why` the page kept no copy of its weights in memory.
pub fn not_kept(why: &str) -> String {
    format!(
        "No gradients for this checkpoint: the backward pass runs on the CPU from weights in this page's memory, and \
         the page streamed this checkpoint's weights to the GPU without keeping a copy, as {why}. A checkpoint in one \
         weights file of at most {} has gradients here, as has the trained model (Attention Lab tiny).",
        format_bytes(HOST_COPY_MAX_BYTES.into())
    )
}

/// What the load's status line adds: whether the backward view can differentiate this checkpoint.
pub fn status_note(kept: &Result<(), String>) -> &'static str {
    match kept {
        Ok(()) => "Its weights are also kept in this page's memory, for the backward view's gradients.",
        Err(_) => "Its weights live on the GPU only: the backward view shows no gradients for it.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_small_file_is_kept_and_the_rest_say_why_not() {
        // 64 MiB = 67,108,864 bytes: 67.11 MB.
        assert_eq!(HOST_COPY_MAX_BYTES, 67_108_864);
        assert_eq!(host_copy(&[724_264]), Ok(()));
        assert_eq!(host_copy(&[HOST_COPY_MAX_BYTES]), Ok(()));
        let large = host_copy(&[HOST_COPY_MAX_BYTES + 1]).unwrap_err();
        assert!(
            large.contains("as its weights file is 67.11 MB (64.00 MiB), more than the 67.11 MB (64.00 MiB)"),
            "{large}"
        );
        let shards = host_copy(&[600_000, 600_000]).unwrap_err();
        assert!(shards.contains("as its weights come in 2 files (1.20 MB (1.14 MiB)); it keeps one file"), "{shards}");
        assert!(shards.starts_with("No gradients for this checkpoint") && shards.contains("Attention Lab tiny"));
        assert!(host_copy(&[]).is_err());
        assert!(status_note(&Ok(())).contains("kept in this page's memory"));
        assert!(status_note(&Err(String::new())).contains("no gradients"));
    }
}
