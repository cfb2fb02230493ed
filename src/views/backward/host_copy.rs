//! Whether a dropped checkpoint's weights are also kept in the page's memory. They stream to the GPU a
//! few MB at a time (`gpu::lm_stream`), and "Gradients on the model" runs its backward pass on the CPU
//! from weights in memory, so the page reads a small checkpoint's weights file once more, whole, and
//! keeps it as f32 beside the GPU's copy (widened a slice at a time, `lm::safetensors::Widening`, so the
//! page stays responsive; the shards of one in several files are read one after another and joined); a
//! larger one has no gradients here, and the panel says why.

use crate::model::units::format_bytes;

/// The largest weights file kept in the page's memory: as f32 a bf16 file takes twice its size, so at
/// most 128 MiB beside the file's own 64 MiB while it is read, far inside wasm32's 4 GiB. The trained
/// model's file is 4.9 MB; SmolLM2-135M's (270 MB) is over it.
pub const HOST_COPY_MAX_BYTES: u64 = 64 << 20;

/// Whether weights in files of `file_sizes` bytes are kept in memory: `Ok` for files of at most
/// [`HOST_COPY_MAX_BYTES`] together (one, or the shards of one checkpoint), else why not, as the
/// gradients panel says it.
pub fn host_copy(file_sizes: &[u64]) -> Result<(), String> {
    let total = file_sizes.iter().fold(0u64, |sum, &n| sum.saturating_add(n));
    if !file_sizes.is_empty() && total <= HOST_COPY_MAX_BYTES {
        return Ok(());
    }
    let kept = format_bytes(HOST_COPY_MAX_BYTES.into());
    let weights = match file_sizes.len() {
        0 => return Err(not_kept("it has no weights file")),
        1 => "its weights file is".to_string(),
        n => format!("its {n} weights files are"),
    };
    Err(not_kept(&format!("{weights} {}, more than the {kept} it keeps", format_bytes(total.into()))))
}

/// Why a checkpoint has no gradients: `why` the page kept no copy of its weights in memory.
pub fn not_kept(why: &str) -> String {
    format!(
        "No gradients for this checkpoint: the backward pass runs on the CPU from weights in this page's memory, and \
         the page streamed this checkpoint's weights to the GPU without keeping a copy, as {why}. A checkpoint whose \
         weights files come to at most {} has gradients here, as has the trained model (Attention Lab tiny).",
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
        // Shards count together: 2 × 600,000 B is kept; 2 × 40 MiB = 83,886,080 B is not.
        assert_eq!(host_copy(&[600_000, 600_000]), Ok(()));
        let shards = host_copy(&[40 << 20, 40 << 20]).unwrap_err();
        assert!(shards.contains("as its 2 weights files are 83.89 MB (80.00 MiB), more than the 67.11 MB"), "{shards}");
        assert!(shards.starts_with("No gradients for this checkpoint") && shards.contains("Attention Lab tiny"));
        assert!(host_copy(&[]).unwrap_err().contains("as it has no weights file"));
        assert!(host_copy(&[u64::MAX, 1]).is_err(), "no overflow");
        assert!(status_note(&Ok(())).contains("kept in this page's memory"));
        assert!(status_note(&Err(String::new())).contains("no gradients"));
    }
}
