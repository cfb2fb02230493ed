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
    let vocab = r.count_or_assume(&["vocab_size", "n_vocab"], 32_000, "vocab_size: absent, so 32000")?;
    let tied = match r.boolean("tie_word_embeddings") {
        Some(b) => b,
        None => {
            let t = family.ties_by_default();
            r.assume(format!(
                "tie_word_embeddings: absent, so {t} (the {} default)",
                if t { "GPT-2/Gemma" } else { "Llama" }
            ));
            t
        }
    };
    let max_positions = r.count_or_assume(
        &["max_position_embeddings", "n_positions", "max_seq_len"],
        4096,
        "max_position_embeddings: absent, so 4096",
    )?;
    Ok(Embeddings { vocab, tied, max_positions })
}
