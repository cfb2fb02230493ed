//! Token embeddings and the context length: vocabulary, tying, maximum positions.

use super::family::Family;
use super::reader::Reader;
use super::report::ImportError;

pub(super) struct Embeddings {
    pub vocab: u64,
    pub tied: bool,
    pub max_positions: u64,
}

pub(super) fn read(r: &mut Reader<'_>, family: &Family) -> Result<Embeddings, ImportError> {
    // ChatGLM's embedding has `padded_vocab_size` rows, more than the tokenizer's vocabulary.
    let vocab =
        r.count_or_assume(&["padded_vocab_size", "vocab_size", "n_vocab"], 32_000, "vocab_size: absent, so 32000")?;
    let tied = match r.boolean("tie_word_embeddings") {
        Some(b) => b,
        None => {
            let t = family.ties_by_default();
            r.assume(format!(
                "tie_word_embeddings: absent, so {t} (the {} default)",
                if t { "family's" } else { "Llama" }
            ));
            t
        }
    };
    let default_positions = family.default_max_positions();
    let max_positions = r.count_or_assume(
        &["max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "context_length", "n_ctx"],
        default_positions,
        format!("max_position_embeddings: absent, so {default_positions}"),
    )?;
    Ok(Embeddings { vocab, tied, max_positions })
}
