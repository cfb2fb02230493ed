//! Reading a `tokenizer.json` into a [`Tokenizer`]: every stage of its pipeline checked against what
//! the encoder implements, and refused by name otherwise.

use foldhash::{HashMap, HashMapExt};

use serde::Deserialize;
use serde_json::Value;

use super::bpe::{AddedTokens, BpeError, Template};
use super::normalize::{Normalize, normalized};
use super::pre_tokenize::{DigitSplit, METASPACE, Metaspace, PreTokenizer, Prepend, WordPattern};
use super::spelling::{Spelling, alphabet_bytes, byte_alphabet, byte_level_bytes, byte_token, text_bytes};

/// A file's pipeline, checked: what happens to a text before and after the merges.
pub(super) struct Pipeline {
    pub normalizer: Vec<Normalize>,
    pub pre_tokenizer: PreTokenizer,
    pub template: Template,
    pub bytes: TokenBytes,
}

/// How a vocabulary entry spells its bytes.
pub(super) enum TokenBytes {
    /// GPT-2's alphabet (a ByteLevel pre-tokenizer): each character one byte.
    ByteLevel(HashMap<char, u8>),
    /// Text, with `<0xNN>` tokens standing for their byte when the decoder reads them so.
    Text { byte_tokens: bool },
}

impl TokenBytes {
    pub fn of(&self, token: &str) -> Box<[u8]> {
        match self {
            TokenBytes::ByteLevel(bytes) => byte_level_bytes(token, bytes),
            TokenBytes::Text { byte_tokens } => text_bytes(token, *byte_tokens),
        }
    }

    pub fn byte_level(&self) -> bool {
        matches!(self, TokenBytes::ByteLevel(_))
    }
}

impl TokenizerFile {
    /// The pipeline's stages, each checked against what the encoder implements.
    pub(super) fn pipeline(&self) -> Result<Pipeline, BpeError> {
        self.check_top_level()?;
        let normalizer = normalizer_steps(&self.normalizer)?;
        let (pre_tokenizer, byte_level) = pre_tokenizer(&self.pre_tokenizer, &normalizer)?;
        check_first_prepend(&normalizer, pre_tokenizer)?;
        let byte_tokens = check_decoder(&self.decoder, byte_level)?;
        let template = template(&self.post_processor)?;
        let bytes = match byte_level {
            true => TokenBytes::ByteLevel(alphabet_bytes(&byte_alphabet())),
            false => TokenBytes::Text { byte_tokens },
        };
        Ok(Pipeline { normalizer, pre_tokenizer, template, bytes })
    }
}

/// The parts of `tokenizer.json` that change ids; other fields are ignored, as the library does.
/// `bpe_reader` parses it with the model's vocab and merges emptied, and reads those apart.
#[derive(Deserialize)]
pub(super) struct TokenizerFile {
    version: Option<String>,
    #[serde(default)]
    truncation: Value,
    #[serde(default)]
    padding: Value,
    #[serde(default)]
    pub added_tokens: Vec<AddedTokenFile>,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    post_processor: Value,
    #[serde(default)]
    decoder: Value,
    pub model: ModelFile,
}

/// The model's settings; its `vocab` and `merges` must be there (and are read by `bpe_reader`).
#[derive(Deserialize)]
pub(super) struct ModelFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    dropout: Option<f64>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    /// The library's default is false, and it reads null as the default.
    fuse_unk: Option<bool>,
    byte_fallback: Option<bool>,
    pub ignore_merges: Option<bool>,
    #[serde(rename = "vocab")]
    _vocab: HashMap<String, u32>,
    #[serde(rename = "merges")]
    _merges: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
pub(super) struct AddedTokenFile {
    id: u32,
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, BpeError> {
    Err(BpeError::Unsupported(what.into()))
}

/// The `type` of a pipeline stage, "null" when there is none.
fn stage_type(stage: &Value) -> &str {
    match stage {
        Value::Null => "null",
        _ => stage.get("type").and_then(Value::as_str).unwrap_or("an untyped stage"),
    }
}

/// The stages of a `Sequence` (under `key`), or the stage alone.
fn stages<'v>(stage: &'v Value, key: &str) -> Vec<&'v Value> {
    match stage.get(key).and_then(Value::as_array).filter(|_| stage_type(stage) == "Sequence") {
        Some(list) => list.iter().collect(),
        None => vec![stage],
    }
}

fn string_field<'v>(stage: &'v Value, key: &str) -> Option<&'v str> {
    stage.get(key).and_then(Value::as_str)
}

impl TokenizerFile {
    fn check_top_level(&self) -> Result<(), BpeError> {
        if let Some(v) = self.version.as_deref().filter(|&v| v != "1.0") {
            return unsupported(format!("format version {v:?} (the library reads \"1.0\")"));
        }
        for (name, stage) in [("truncation", &self.truncation), ("padding", &self.padding)] {
            if !stage.is_null() {
                return unsupported(name);
            }
        }
        Ok(())
    }
}

/// NFC, `Prepend` and `Replace` of a plain string, alone or in a `Sequence`.
/// Normalizer steps accepted, and the longest string one may add: each step may make the text up to
/// 4 times longer, so one typed text stays within 256 times its length (real tokenizers take 1 to 3
/// steps: NFC; or `▁` for each space, and one in front).
const MAX_NORMALIZE_STEPS: usize = 4;
const MAX_NORMALIZE_STRING: usize = 16;

fn normalizer_steps(normalizer: &Value) -> Result<Vec<Normalize>, BpeError> {
    if normalizer.is_null() {
        return Ok(Vec::new());
    }
    let list = stages(normalizer, "normalizers");
    if list.len() > MAX_NORMALIZE_STEPS {
        return unsupported(format!("a normalizer of {} steps (at most {MAX_NORMALIZE_STEPS} are read)", list.len()));
    }
    list.into_iter().map(normalize_step).collect()
}

fn normalize_step(stage: &Value) -> Result<Normalize, BpeError> {
    match stage_type(stage) {
        "NFC" => Ok(Normalize::Nfc),
        "Prepend" => match string_field(stage, "prepend") {
            Some(prefix) if prefix.len() <= MAX_NORMALIZE_STRING => Ok(Normalize::Prepend(prefix.to_string())),
            Some(_) => unsupported(format!("a Prepend normalizer of more than {MAX_NORMALIZE_STRING} bytes")),
            None => Err(BpeError::Invalid("a Prepend normalizer without its string".into())),
        },
        "Replace" => {
            let pattern = stage.get("pattern").and_then(|p| string_field(p, "String"));
            match (pattern, string_field(stage, "content")) {
                // The library puts the content between every two characters for an empty pattern.
                (Some(""), _) => unsupported("a Replace normalizer of the empty string"),
                (Some(pattern), Some(content))
                    if content.len() <= MAX_NORMALIZE_STRING && content.len() <= 4 * pattern.len() =>
                {
                    Ok(Normalize::Replace { pattern: pattern.to_string(), content: content.to_string() })
                }
                (Some(_), Some(_)) => unsupported(format!(
                    "a Replace normalizer whose content is more than {MAX_NORMALIZE_STRING} bytes or 4 times its pattern"
                )),
                _ => unsupported("a Replace normalizer with a regex pattern"),
            }
        }
        other => unsupported(format!("normalizer {other} (this encoder reads NFC, Prepend and Replace)")),
    }
}

/// Metaspace's `first` asks whether a stretch starts at the start of the original text; a Replace that
/// deletes characters could move the text's start, which this encoder does not follow.
fn check_first_prepend(normalizer: &[Normalize], pre: PreTokenizer) -> Result<(), BpeError> {
    let first = matches!(pre, PreTokenizer::Metaspace(Metaspace { prepend: Prepend::First, .. }));
    let deletes = normalizer.iter().any(|n| matches!(n, Normalize::Replace { content, .. } if content.is_empty()));
    if first && deletes {
        return unsupported(
            "a Replace normalizer that deletes text before a Metaspace pre-tokenizer with prepend_scheme first",
        );
    }
    Ok(())
}

/// The pre-tokenizer, and whether it spells bytes in GPT-2's alphabet (a ByteLevel stage).
fn pre_tokenizer(pre: &Value, normalizer: &[Normalize]) -> Result<(PreTokenizer, bool), BpeError> {
    match stages(pre, "pretokenizers").as_slice() {
        [stage] if stage.is_null() => Ok((PreTokenizer::Whole, false)),
        [split] if stage_type(split) == "Split" && split_never_matches(split, normalizer) => {
            Ok((PreTokenizer::Whole, false))
        }
        [stage] if stage_type(stage) == "Metaspace" => Ok((PreTokenizer::Metaspace(metaspace(stage)?), false)),
        [byte_level] if stage_type(byte_level) == "ByteLevel" => {
            let whole = PreTokenizer::Whole;
            Ok((if byte_level_regex(byte_level)? { PreTokenizer::Gpt2(DigitSplit::None) } else { whole }, true))
        }
        [first, byte_level] if stage_type(byte_level) == "ByteLevel" => {
            let regex = byte_level_regex(byte_level)?;
            match (stage_type(first), regex) {
                ("Digits", true) => Ok((PreTokenizer::Gpt2(digit_split(first)), true)),
                ("Split", false) => Ok((PreTokenizer::Pattern(split_pattern(first)?), true)),
                (kind, _) => unsupported(format!(
                    "a pre-tokenizer Sequence of {kind} then ByteLevel {} GPT-2's regex (this encoder reads \
                     Digits then ByteLevel with it, Split then ByteLevel without)",
                    if regex { "with" } else { "without" }
                )),
            }
        }
        [stage] => unsupported(format!(
            "pre-tokenizer {} (this encoder reads ByteLevel, Metaspace, Split or Digits then ByteLevel, or none)",
            stage_type(stage)
        )),
        list => unsupported(format!(
            "a pre-tokenizer Sequence of {} (this encoder reads Digits or Split, then ByteLevel)",
            list.iter().map(|s| stage_type(s)).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Whether a `Split` on one character cuts nothing because the normalizer has replaced every
/// occurrence of it: Gemma 3's tokenizer splits on " " after turning every space into `▁`. (Not
/// inverted: an inverted Split would keep only the matches. A longer pattern could form again from
/// what a Replace leaves.)
fn split_never_matches(split: &Value, normalizer: &[Normalize]) -> bool {
    let pattern = split.get("pattern").and_then(|p| string_field(p, "String"));
    let Some(pattern) = pattern.filter(|p| p.chars().count() == 1) else { return false };
    if split.get("invert").and_then(Value::as_bool) != Some(false) {
        return false;
    }
    // The last step that removes the pattern, and none after it that writes it back.
    let removes = |n: &Normalize| matches!(n, Normalize::Replace { pattern: p, content } if p == pattern && !content.contains(pattern));
    let writes = |n: &Normalize| match n {
        Normalize::Replace { content, .. } | Normalize::Prepend(content) => content.contains(pattern),
        Normalize::Nfc => false,
    };
    normalizer.iter().rposition(removes).is_some_and(|at| !normalizer[at + 1..].iter().any(writes))
}

/// Whether a ByteLevel pre-tokenizer cuts words with GPT-2's regex; it must not add a prefix space.
fn byte_level_regex(stage: &Value) -> Result<bool, BpeError> {
    if stage.get("add_prefix_space").and_then(Value::as_bool) != Some(false) {
        return unsupported("a ByteLevel pre-tokenizer without add_prefix_space: false");
    }
    Ok(stage.get("use_regex").is_none_or(|r| r.as_bool() != Some(false)))
}

fn digit_split(digits: &Value) -> DigitSplit {
    match digits.get("individual_digits").and_then(Value::as_bool) {
        Some(true) => DigitSplit::Each,
        _ => DigitSplit::Runs,
    }
}

/// A `Split` stage that isolates the matches of GPT-2's, Llama 3's or Qwen2's pattern.
fn split_pattern(split: &Value) -> Result<WordPattern, BpeError> {
    let regex = split.get("pattern").and_then(|p| string_field(p, "Regex"));
    let Some(pattern) = regex.and_then(WordPattern::from_regex) else {
        let shown = regex.map_or_else(|| "a plain string".to_string(), |r| format!("{r:?}"));
        return unsupported(format!(
            "a Split pre-tokenizer on {shown} (this encoder reads GPT-2's, Llama 3's and Qwen2's patterns)"
        ));
    };
    if string_field(split, "behavior") != Some("Isolated")
        || split.get("invert").and_then(Value::as_bool) != Some(false)
    {
        return unsupported("a Split pre-tokenizer other than Isolated and not inverted");
    }
    Ok(pattern)
}

/// A Metaspace pre-tokenizer: `▁` for a space, the library's defaults and its older
/// `add_prefix_space` field.
fn metaspace(stage: &Value) -> Result<Metaspace, BpeError> {
    if string_field(stage, "replacement").is_some_and(|r| r != METASPACE.to_string()) {
        return unsupported("a Metaspace pre-tokenizer with a replacement other than \u{2581}");
    }
    let prepend = match (string_field(stage, "prepend_scheme"), stage.get("add_prefix_space").and_then(Value::as_bool))
    {
        (Some("never"), _) => Prepend::Never,
        // As the library: the older field may only agree with the newer one.
        (_, Some(false)) => {
            return Err(BpeError::Invalid(
                "a Metaspace pre-tokenizer's add_prefix_space false contradicts its prepend_scheme".into(),
            ));
        }
        (Some("first"), _) => Prepend::First,
        (Some("always") | None, _) => Prepend::Always,
        (Some(other), _) => return unsupported(format!("a Metaspace prepend_scheme {other:?}")),
    };
    Ok(Metaspace { prepend, split: stage.get("split").and_then(Value::as_bool).unwrap_or(true) })
}

/// The decoder must undo the pre-tokenizer's spelling: ByteLevel for GPT-2's alphabet; for text,
/// `▁` back to a space (a `Replace` or `Metaspace`), with `ByteFallback`, `Fuse` and `Strip` allowed.
/// Returns whether `<0xNN>` tokens decode to their byte.
fn check_decoder(decoder: &Value, byte_level: bool) -> Result<bool, BpeError> {
    let list = stages(decoder, "decoders");
    let kinds: Vec<&str> = list.iter().map(|s| stage_type(s)).collect();
    if byte_level {
        return match kinds.as_slice() {
            ["ByteLevel"] => Ok(false),
            _ => unsupported(format!(
                "decoder {} with a ByteLevel pre-tokenizer (decode assumes ByteLevel)",
                kinds.join(", ")
            )),
        };
    }
    let spaces_back = |s: &&Value| match stage_type(s) {
        "Metaspace" => true,
        "Replace" => {
            s.get("pattern").and_then(|p| string_field(p, "String")) == Some("\u{2581}")
                && string_field(s, "content") == Some(" ")
        }
        _ => false,
    };
    let known = |kind: &&str| matches!(*kind, "Metaspace" | "Replace" | "ByteFallback" | "Fuse" | "Strip");
    if !list.iter().any(spaces_back) || !kinds.iter().all(known) {
        return unsupported(format!(
            "decoder {} (with a text vocabulary, decode reads \u{2581} as a space and <0xNN> as a byte)",
            kinds.join(", ")
        ));
    }
    Ok(kinds.contains(&"ByteFallback"))
}

/// The special tokens a single text gets around it (`encode(text, true)`): a `TemplateProcessing`
/// post-processor's `single` template, alone or after a ByteLevel one (which only trims offsets).
/// Other post-processors are refused.
fn template(post: &Value) -> Result<Template, BpeError> {
    let mut template = None;
    for stage in stages(post, "processors") {
        match stage_type(stage) {
            "null" | "ByteLevel" => {}
            "TemplateProcessing" if template.is_some() => return unsupported("two TemplateProcessing post-processors"),
            "TemplateProcessing" => template = Some(single_template(stage)?),
            other => return unsupported(format!("post-processor {other}")),
        }
    }
    Ok(template.unwrap_or_default())
}

fn single_template(stage: &Value) -> Result<Template, BpeError> {
    let invalid = |why: &str| BpeError::Invalid(format!("the post-processor's template {why}"));
    let items = stage.get("single").and_then(Value::as_array).ok_or_else(|| invalid("has no single-text form"))?;
    let mut template = Template::default();
    let mut seen_text = false;
    for item in items {
        if let Some(sequence) = item.get("Sequence") {
            if seen_text || string_field(sequence, "id") != Some("A") {
                return Err(invalid("must hold the text ($A) once"));
            }
            seen_text = true;
            continue;
        }
        let name = item
            .get("SpecialToken")
            .and_then(|t| string_field(t, "id"))
            .ok_or_else(|| invalid("has an item that is neither text nor a special token"))?;
        let ids =
            stage.get("special_tokens").and_then(|t| t.get(name)).and_then(|t| t.get("ids")).and_then(Value::as_array);
        let ids = ids.ok_or_else(|| invalid(&format!("names {name:?} without its ids")))?;
        for id in ids {
            let id = id
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| invalid(&format!("gives {name:?} the id {id}")))?;
            if seen_text { &mut template.after } else { &mut template.before }.push(id);
        }
    }
    if !seen_text {
        return Err(invalid("must hold the text ($A) once"));
    }
    Ok(template)
}

impl ModelFile {
    /// Refuses settings the encoder does not implement (before the vocabulary is read).
    pub(super) fn check_settings(&self) -> Result<(), BpeError> {
        if let Some(kind) = self.kind.as_deref().filter(|&k| k != "BPE") {
            return unsupported(format!("model type {kind:?} (BPE only)"));
        }
        // The library treats a dropout of 0 as none.
        if self.dropout.is_some_and(|p| p != 0.0) {
            return unsupported("BPE dropout (random merges)");
        }
        // Qwen's write both as "": nothing to add.
        let affix = |a: &Option<String>| a.as_deref().is_some_and(|a| !a.is_empty());
        if affix(&self.continuing_subword_prefix) || affix(&self.end_of_word_suffix) {
            return unsupported("a continuing-subword prefix or end-of-word suffix");
        }
        Ok(())
    }

    /// The library looks an unknown token up when it needs one; one outside the vocabulary is an
    /// error there. (A byte-level BPE never needs it: every byte has its own token.)
    pub(super) fn check_unknown_token(&self, vocab: &HashMap<String, u32>) -> Result<(), BpeError> {
        match self.unk_token.as_ref().filter(|unk| !vocab.contains_key(unk.as_str())) {
            Some(unk) => unsupported(format!("an unknown token ({unk:?}) outside the vocabulary")),
            None => Ok(()),
        }
    }

    /// A SentencePiece-style vocabulary's spelling: single characters' tokens (`char_ids`), the
    /// byte tokens if `byte_fallback` is on, the unknown token.
    pub(super) fn text_spelling(&self, vocab: &HashMap<String, u32>, char_ids: HashMap<char, u32>) -> Spelling {
        let fallback = (self.byte_fallback == Some(true))
            .then(|| Box::new(std::array::from_fn(|b| vocab.get(&byte_token(b as u8)).copied())));
        let unk = self.unk_token.as_ref().and_then(|unk| vocab.get(unk)).copied();
        Spelling::Text { char_ids, fallback, unk, fuse_unk: self.fuse_unk == Some(true) }
    }
}

/// GPT-2's alphabet: the id of each byte's token. All 256 must be there: the library would silently
/// drop a byte without one (there is no unknown token), and its text with it.
pub(super) fn byte_level_spelling(vocab: &HashMap<String, u32>) -> Result<Spelling, BpeError> {
    let alphabet = byte_alphabet();
    let mut byte_ids = [0; 256];
    for (b, c) in alphabet.iter().enumerate() {
        byte_ids[b] = *vocab
            .get(c.to_string().as_str())
            .ok_or_else(|| BpeError::Invalid(format!("the vocabulary has no token for byte 0x{b:02x} ({c:?})")))?;
    }
    Ok(Spelling::ByteLevel { byte_ids: Box::new(byte_ids), alphabet: Box::new(alphabet) })
}

/// Most added tokens accepted: each is searched for in every text (Llama 3 has 256, Gemma 3 6,000 or so).
pub const MAX_ADDED_TOKENS: usize = 1 << 16;

/// The added tokens' two passes (raw-text tokens, then normalized-text ones, whose content is
/// normalized first, as the library does). Tokens the vocabulary lacks (Llama 3's and Qwen's
/// specials) take the ids after it in the order listed, as the library numbers them; a file whose
/// ids say otherwise is refused, since the embedding's rows follow its ids.
pub(super) fn added_tokens(
    tokens: &[AddedTokenFile],
    vocab: &HashMap<String, u32>,
    normalizer: &[Normalize],
    token_bytes: &mut Vec<Box<[u8]>>,
) -> Result<(AddedTokens, AddedTokens), BpeError> {
    if tokens.len() > MAX_ADDED_TOKENS {
        return Err(BpeError::Invalid(format!("{} added tokens (at most {MAX_ADDED_TOKENS})", tokens.len())));
    }
    let mut passes: [Vec<(String, u32)>; 2] = Default::default();
    let mut beyond: HashMap<&str, u32> = HashMap::new();
    for token in tokens {
        // The library ignores an empty added token.
        if token.content.is_empty() {
            continue;
        }
        if token.check(vocab)? && !beyond.contains_key(token.content.as_str()) {
            if token.id as usize != token_bytes.len() {
                return Err(BpeError::Invalid(format!(
                    "added token {:?} has id {}, but as listed it takes id {} (tokens outside the vocabulary are \
                     numbered after it, in order)",
                    token.content,
                    token.id,
                    token_bytes.len()
                )));
            }
            beyond.insert(&token.content, token.id);
            token_bytes.push(token.content.as_bytes().into());
        }
        let content = match token.normalized {
            true => normalized(normalizer, &token.content).into_owned(),
            false => token.content.clone(),
        };
        if !content.is_empty() {
            passes[usize::from(token.normalized)].push((content, token.id));
        }
    }
    let [raw, normalized] = passes;
    Ok((AddedTokens::new(raw), AddedTokens::new(normalized)))
}

impl AddedTokenFile {
    /// Checks the token against the vocabulary; true when the vocabulary does not have it.
    fn check(&self, vocab: &HashMap<String, u32>) -> Result<bool, BpeError> {
        let content = &self.content;
        if self.single_word || self.lstrip || self.rstrip {
            return unsupported(format!("added token {content:?} with single_word, lstrip or rstrip"));
        }
        match vocab.get(content) {
            Some(&id) if id == self.id => Ok(false),
            Some(&id) => Err(BpeError::Invalid(format!(
                "added token {content:?} has id {}, but {id} in the vocabulary",
                self.id
            ))),
            None => Ok(true),
        }
    }
}
