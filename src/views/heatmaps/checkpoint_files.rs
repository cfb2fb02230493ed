//! The files a user drops to see their own checkpoint's heads: which is the config, the tokenizer
//! and each weight shard (by name, as Hugging Face names them), what is missing or unreadable, and
//! whether the tokenizer belongs to the model. Platform-free; the page reads the files
//! (`ui::user_checkpoint`).

use super::trained_facts::heads_phrase;
use crate::lm::bpe::Tokenizer;
use crate::lm::weight_plan::index_shards;
use crate::model::Model;
use crate::model::limits::JOB_MAX_BYTES;
use crate::model::units::format_bytes;

/// config.json and the shards' index are read and parsed whole; real ones are a few KB.
pub const MAX_TEXT_FILE_BYTES: u64 = 32 << 20;

/// tokenizer.json is read and parsed a few ms at a time; real ones are up to 33.4 MB (Gemma 3's).
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// What each dropped file is, by its index in the list dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRoles {
    pub config: usize,
    pub tokenizer: usize,
    /// `model.safetensors.index.json`, when the weights are sharded.
    pub index: Option<usize>,
    /// The weight files in name order (the order the index lists them in).
    pub weights: Vec<usize>,
    /// Names of files that play no part (generation_config.json, README.md, ...).
    pub ignored: Vec<String>,
}

/// Sorts `files` (name, bytes) into roles, or says in one sentence what is missing or wrong.
pub fn classify(files: &[(String, u64)]) -> Result<FileRoles, String> {
    let named = |wanted: &str| files.iter().position(|(n, _)| n == wanted);
    let mut weights: Vec<usize> = (0..files.len()).filter(|&i| files[i].0.ends_with(".safetensors")).collect();
    weights.sort_by(|&a, &b| files[a].0.cmp(&files[b].0));
    if weights.is_empty() {
        let foreign =
            files.iter().find(|(n, _)| [".bin", ".pt", ".pth", ".gguf", ".ckpt"].iter().any(|e| n.ends_with(e)));
        return Err(match foreign {
            Some((name, _)) => format!(
                "{name} is not a safetensors file: the page reads weights only from .safetensors files (convert \
                 PyTorch or GGUF weights first)"
            ),
            None => "No weights: drop the model's .safetensors file (or all its shards) with config.json and \
                     tokenizer.json"
                .into(),
        });
    }
    let config = named("config.json").ok_or("config.json is missing: drop it with the weights")?;
    let tokenizer = named("tokenizer.json").ok_or(
        "tokenizer.json is missing: drop it with the weights (the page tokenises your text with the model's own tokenizer)",
    )?;
    let index = files.iter().position(|(n, _)| n.ends_with(".safetensors.index.json"));
    let texts = [(config, MAX_TEXT_FILE_BYTES), (tokenizer, MAX_TOKENIZER_BYTES)];
    let texts = texts.into_iter().chain(index.map(|i| (i, MAX_TEXT_FILE_BYTES)));
    if let Some(((name, bytes), most)) = texts.map(|(i, most)| (&files[i], most)).find(|((_, b), most)| b > most) {
        return Err(format!("{name} is {bytes} bytes, more than a {name} can be ({most} at most)"));
    }
    if weights.len() > 1 && index.is_none() {
        return Err("These are several .safetensors files but no model.safetensors.index.json: drop it too".into());
    }
    let used: Vec<usize> = [config, tokenizer].into_iter().chain(index).chain(weights.iter().copied()).collect();
    let ignored = (0..files.len()).filter(|i| !used.contains(i)).map(|i| files[i].0.clone()).collect();
    Ok(FileRoles { config, tokenizer, index, weights, ignored })
}

/// The shard files the index names among those dropped (their positions in `dropped`), and the
/// names of dropped .safetensors files it does not name (a repository's `consolidated.safetensors`
/// beside its shards, say), which are left out; every file it names must be there.
pub fn pick_shards(index_json: &str, dropped: &[&str]) -> Result<(Vec<usize>, Vec<String>), String> {
    let named = index_shards(index_json).map_err(|e| e.0)?;
    let missing: Vec<&str> = named.iter().map(String::as_str).filter(|n| !dropped.contains(n)).collect();
    if !missing.is_empty() {
        return Err(format!("Missing weight files named by the index: {} (drop every shard)", missing.join(", ")));
    }
    let (used, left): (Vec<usize>, Vec<usize>) =
        (0..dropped.len()).partition(|&i| named.iter().any(|n| n == dropped[i]));
    Ok((used, left.into_iter().map(|i| dropped[i].to_string()).collect()))
}

/// Refuses a tokenizer whose ids reach past the model's vocabulary: its text would name rows of the
/// embedding that do not exist (the files are from two models).
pub fn check_tokenizer(tokenizer: &Tokenizer, model: &Model) -> Result<(), String> {
    let rows = model.vocab_size;
    if tokenizer.model_vocab_size() as u64 > rows {
        return Err(format!(
            "tokenizer.json has {} tokens but config.json's vocab_size is {rows}: these files are not from the same \
             model",
            tokenizer.vocab_size()
        ));
    }
    // Added tokens past the rows may stay (Gemma 3's text models and `<image_soft_token>`): a text
    // spelling one out is refused when typed. The template's are in every text.
    if let Some(id) = tokenizer.template_ids().find(|&id| u64::from(id) >= rows) {
        return Err(format!(
            "tokenizer.json puts {} (id {id}) around every text, but config.json's vocab_size is {rows}: these files \
             are not from the same model",
            tokenizer.piece(id)
        ));
    }
    Ok(())
}

/// What the page says of a checkpoint streamed from the user's files.
pub fn user_summary(model: &Model, max_tokens: usize, file_bytes: u64) -> String {
    use crate::model::units::format_thousands;
    let params = crate::model::params::model_params(model).total();
    format!(
        "{}: {} parameters ({}), read from your files ({} bytes of weights) and streamed to this GPU; nothing left \
         this page. It reads at most {max_tokens} tokens here. A link to this view keeps the layout, not the \
         weights: it shows synthetic weights until the same files are dropped again.",
        model.name,
        format_thousands(params),
        heads_phrase(model),
        format_thousands(file_bytes.into()),
    )
}

/// What the panel says once a checkpoint is loaded: its name, its weights' size, and any weight files
/// dropped that the index does not name.
pub fn loaded_text(name: &str, file_bytes: u64, left_out: &[String]) -> String {
    let mut done = format!("Loaded {name} ({} of weights).", format_bytes(file_bytes.into()));
    if !left_out.is_empty() {
        done += &format!(" Left out, as the index does not name them: {}.", left_out.join(", "));
    }
    done
}

/// The largest checkpoint a job holds, in millions of parameters: bf16 weights stay 2 bytes each on
/// the GPU, f16 and f32 ones are kept as f32 (4 bytes).
pub fn job_params_millions() -> (u64, u64) {
    (JOB_MAX_BYTES / 2 / 1_000_000, JOB_MAX_BYTES / 4 / 1_000_000)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_loaded_line_names_the_weights_and_what_was_left_out() {
        assert_eq!(
            loaded_text("SmolLM2-135M", 1_500_000, &[]),
            format!("Loaded SmolLM2-135M ({} of weights).", format_bytes(1_500_000))
        );
        assert_eq!(
            loaded_text("m", 10, &["a.safetensors".into(), "b.safetensors".into()]),
            format!(
                "Loaded m ({} of weights). Left out, as the index does not name them: a.safetensors, b.safetensors.",
                format_bytes(10)
            )
        );
        // The 1 GiB job: 536 million bf16 parameters, 268 million in f16 or f32.
        assert_eq!(job_params_millions(), (536, 268));
    }

    fn files(names: &[&str]) -> Vec<(String, u64)> {
        names.iter().map(|n| (n.to_string(), 1000)).collect()
    }

    #[test]
    fn a_whole_and_a_sharded_checkpoint() {
        let roles = classify(&files(&["model.safetensors", "tokenizer.json", "config.json", "README.md"])).unwrap();
        assert_eq!((roles.config, roles.tokenizer, roles.index, roles.weights.clone()), (2, 1, None, vec![0]));
        assert_eq!(roles.ignored, ["README.md"]);
        let sharded = files(&[
            "model-00002-of-00002.safetensors",
            "config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
            "tokenizer.json",
            "generation_config.json",
        ]);
        let roles = classify(&sharded).unwrap();
        // Shards in name order, whatever order they were dropped in.
        assert_eq!((roles.weights, roles.index), (vec![3, 0], Some(2)));
        assert_eq!(roles.ignored, ["generation_config.json"]);
    }

    #[test]
    fn what_is_missing_or_foreign_is_said() {
        let err = |names: &[&str]| classify(&files(names)).unwrap_err();
        assert!(err(&["config.json", "tokenizer.json"]).starts_with("No weights"));
        assert!(err(&["pytorch_model.bin", "config.json"]).starts_with("pytorch_model.bin is not a safetensors file"));
        assert!(err(&["model.safetensors", "tokenizer.json"]).starts_with("config.json is missing"));
        assert!(err(&["model.safetensors", "config.json"]).starts_with("tokenizer.json is missing"));
        assert!(
            err(&["a.safetensors", "b.safetensors", "config.json", "tokenizer.json"])
                .contains("no model.safetensors.index.json")
        );
        let mut huge = files(&["model.safetensors", "config.json", "tokenizer.json"]);
        huge[1].1 = 40 << 20;
        assert!(classify(&huge).unwrap_err().starts_with("config.json is 41943040 bytes"));
        huge[1].1 = 1;
        huge[2].1 = 40 << 20;
        assert!(classify(&huge).is_ok(), "a tokenizer.json of 40 MiB is read");
        huge[2].1 = 80 << 20;
        assert!(classify(&huge).unwrap_err().starts_with("tokenizer.json is 83886080 bytes"));
        let mut huge_index =
            files(&["a.safetensors", "b.safetensors", "config.json", "tokenizer.json", "model.safetensors.index.json"]);
        huge_index[4].1 = 1 << 30;
        assert!(classify(&huge_index).unwrap_err().starts_with("model.safetensors.index.json is 1073741824 bytes"));
    }

    #[test]
    fn shards_against_their_index() {
        let index =
            r#"{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#;
        let both = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
        assert_eq!(pick_shards(index, &both), Ok((vec![0, 1], vec![])));
        assert!(pick_shards(index, &both[..1]).unwrap_err().contains("model-00002-of-00002.safetensors"));
        // Mistral's repositories keep consolidated.safetensors beside the shards: left out, and said.
        let with_consolidated = ["consolidated.safetensors", both[0], both[1]];
        assert_eq!(pick_shards(index, &with_consolidated), Ok((vec![1, 2], vec!["consolidated.safetensors".into()])));
        assert!(pick_shards("{}", &both).unwrap_err().contains("weight_map"));
    }

    #[test]
    fn the_summary_counts_by_hand() {
        let m = Model::simple(2, 64, 4);
        let text = user_summary(&m, 256, 1_234_567);
        // 2 layers of d = 64 with 4 heads: the parameters are model_params' (tested there).
        let params = crate::model::units::format_thousands(crate::model::params::model_params(&m).total());
        assert!(
            text.contains(&format!("{params} parameters (2 layers, 4 query heads sharing 4 KV heads, head width 16)")),
            "{text}"
        );
        assert!(text.contains("(1,234,567 bytes of weights)") && text.contains("at most 256 tokens"), "{text}");
    }

    /// The shipped tokenizer (4,096 tokens) with `<|image|>` added as id 4096, and put before every
    /// text when `in_template`.
    pub(crate) fn with_token_past_the_rows(in_template: bool) -> Tokenizer {
        let json = include_str!("../../../www/models/attention-lab-tiny/tokenizer.json");
        let mut file: serde_json::Value = serde_json::from_str(json).unwrap();
        let added = serde_json::json!({"id": 4096, "content": "<|image|>", "normalized": false, "special": true});
        file["added_tokens"].as_array_mut().unwrap().push(added);
        if in_template {
            file["post_processor"] = serde_json::json!({"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<|image|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {"<|image|>": {"id": "<|image|>", "ids": [4096], "tokens": ["<|image|>"]}}});
        }
        Tokenizer::from_json(&file.to_string()).unwrap()
    }

    #[test]
    fn a_tokenizer_larger_than_the_vocabulary_is_refused() {
        let json = include_str!("../../../www/models/attention-lab-tiny/tokenizer.json");
        let tok = Tokenizer::from_json(json).unwrap();
        let mut m = Model::simple(2, 64, 4);
        m.vocab_size = 4096;
        assert_eq!(check_tokenizer(&tok, &m), Ok(()));
        // More rows than tokens (padded vocabularies, as Qwen's) are fine.
        m.vocab_size = 5000;
        assert_eq!(check_tokenizer(&tok, &m), Ok(()));
        m.vocab_size = 4000;
        assert!(check_tokenizer(&tok, &m).unwrap_err().contains("4096 tokens but config.json's vocab_size is 4000"));
        // An added token past the rows may stay (Gemma 3's <image_soft_token>), unless every text gets it.
        m.vocab_size = 4096;
        assert_eq!(check_tokenizer(&with_token_past_the_rows(false), &m), Ok(()));
        let err = check_tokenizer(&with_token_past_the_rows(true), &m).unwrap_err();
        assert!(err.starts_with("tokenizer.json puts <|image|> (id 4096) around every text"), "{err}");
    }
}
