//! The trained model in the heatmap explorer, native: the text as its token ids (refused past the
//! length it was trained on), the request for its maps, the next-token candidates, and the text a
//! generated token makes. Live attention runs its pass and makes the heads' maps with the scores each
//! head measures (`live_attention/loaded_job.rs`); what the page shows of them is decided here.

use std::sync::Arc;

use super::params::{ExplorerParams, MAX_GENERATED, MAX_TEXT_CHARS};
use super::request::Request;
use crate::attention::inputs::SplitMix64;
use crate::attention::layer_inputs::LayerLayout;
use crate::attention::tokens::{TokenMode, generated_tokens};
pub use crate::live_attention::loaded_job::head_maps;
use crate::lm::bpe::Tokenizer;
use crate::lm::next_token::{choose, top_candidates};
use crate::model::Mask;
use crate::model::kv_quant::{KvScheme, ScaleScope};
use crate::model::paging::{PAGE_TOKENS, PoolUse};
use crate::model::units::format_thousands;
use crate::views::attention_input::AttentionInput;

/// Next-token candidates the page lists.
pub const SHOWN_CANDIDATES: usize = 5;

/// The text the model reads: the link's text, or the generated words of `n=` joined by spaces.
pub fn model_text(input: &AttentionInput) -> String {
    match input.seq_tokens {
        Some(n) => generated_tokens(n.min(MAX_GENERATED) as usize, input.seed).join(" "),
        None => input.text.clone(),
    }
}

/// The text's token ids (after the special tokens its tokenizer puts before a text) and pieces, or why
/// the model cannot read it: empty, longer than `max_tokens` (the length it was trained on; past it
/// RoPE positions it never saw), or spelling out an added token past the model's `rows` of embedding.
pub fn model_tokens(
    tokenizer: &Tokenizer,
    text: &str,
    (max_tokens, rows): (usize, u64),
) -> Result<(Vec<u32>, Vec<String>), String> {
    let own = tokenizer.encode(text);
    if own.is_empty() {
        return Err("Type a sentence to see the trained model's attention.".into());
    }
    if let Some(&id) = own.iter().find(|&&id| u64::from(id) >= rows) {
        return Err(format!(
            "The text holds {:?}, a token of the tokenizer (id {id}) that the model has no embedding for (its ids \
             stop at {}): take it out of the text.",
            tokenizer.piece(id),
            rows.saturating_sub(1)
        ));
    }
    // After the special tokens the model was trained to see before a text (Llama's `<s>`), as its
    // library adds them by default.
    let ids = tokenizer.with_start_tokens(own);
    if ids.len() > max_tokens {
        return Err(format!(
            "This text is {} tokens for the trained model's tokenizer; the model reads at most {max_tokens}, the \
             length it was trained on. Shorten the text, or pick a synthetic layout for longer inputs.",
            ids.len()
        ));
    }
    let pieces = ids.iter().map(|&id| tokenizer.piece(id)).collect();
    Ok((ids, pieces))
}

/// The model's tokens of the link's input: as [`model_tokens`], but a generated input (`n=`) longer
/// than the model reads is refused before its words are made (each word is at least one token).
pub fn model_input(
    tokenizer: &Tokenizer,
    input: &AttentionInput,
    (max_tokens, rows): (usize, u64),
) -> Result<(Vec<u32>, Vec<String>), String> {
    if let Some(n) = input.seq_tokens.filter(|&n| n as usize > max_tokens) {
        return Err(format!(
            "{} generated words make at least as many tokens; the trained model reads at most {max_tokens}, the length \
             it was trained on. Ask for fewer (n), or pick a synthetic layout for longer inputs.",
            format_thousands(n.into())
        ));
    }
    model_tokens(tokenizer, &model_text(input), (max_tokens, rows))
}

/// What the explorer computes for the trained model: every cell of the chosen heads (its inputs are
/// short), under the layer's own mask.
pub fn trained_request(
    explorer: &ExplorerParams,
    layout: LayerLayout,
    ids: Vec<u32>,
    pieces: Vec<String>,
) -> Result<Request, String> {
    let mask =
        Mask::of_layer(layout.kind).ok_or_else(|| format!("Layer {} has no attention to show.", layout.layer))?;
    let n = ids.len() as u32;
    Ok(Request {
        heads: explorer.heads.heads(layout.n_q_heads),
        pool: explorer.pool,
        map_cells: n,
        focus_cells: n,
        focus: None,
        mask,
        layout,
        tokens: Arc::new(pieces),
        kv_tokens: None,
        seed: 0,
        teach: false,
        ids: Some(Arc::new(ids)),
    })
}

/// The link's settings the trained model does not take, each with what it does instead.
pub fn ignored_settings(input: &AttentionInput, explorer: &ExplorerParams) -> Vec<String> {
    let mut out = Vec::new();
    if input.chosen_mask().is_some() {
        out.push("runs with the masks it was trained with, so mask= is left to the synthetic layouts".to_string());
    }
    if explorer.tok != TokenMode::Word {
        out.push("splits the text with its own tokenizer, so tok= is left to the synthetic layouts".into());
    }
    if explorer.src.is_some() {
        out.push("is decoder-only, so cross-attention (src=) is left to the synthetic layouts".into());
    }
    if explorer.steps || explorer.mix.is_some() {
        out.push("does not yet feed the step-through and the head mix, which show the synthetic weights".into());
    }
    out
}

/// One next-token candidate as the page shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ShownCandidate {
    pub id: u32,
    /// The decoded piece (what it would append to the text).
    pub text: String,
    pub prob: f64,
}

/// The most likely next tokens after the last one, decoded.
pub fn next_tokens(tokenizer: &Tokenizer, last_logits: &[f32]) -> Vec<ShownCandidate> {
    top_candidates(last_logits, SHOWN_CANDIDATES)
        .into_iter()
        .map(|c| ShownCandidate { id: c.id, text: tokenizer.decode(&[c.id]), prob: c.prob })
        .collect()
}

/// The text after appending token `id`: the model's text (the generated words, if `n=` chose them)
/// with the token's text after it.
pub fn with_token(tokenizer: &Tokenizer, input: &AttentionInput, id: u32) -> String {
    generated_text(tokenizer, &model_text(input), &[id])
}

/// Why `text` may not replace the text (a token appended past the explorer's limit of
/// [`MAX_TEXT_CHARS`] characters), or `None` when it may. A link's text is cut there with a notice;
/// an appended token is refused instead, so nothing the reader sees is silently dropped.
pub fn text_limit_reached(text: &str) -> Option<String> {
    (text.chars().count() > MAX_TEXT_CHARS).then(|| {
        format!("the text has reached the explorer's limit of {} characters", format_thousands(MAX_TEXT_CHARS as u128))
    })
}

/// The prompt's text with the `generated` tokens' text after it. Their bytes are decoded together,
/// and a character left unfinished at the end (a token can hold part of a multi-byte character) is
/// held back until the token that completes it, rather than written as U+FFFD.
pub fn generated_text(tokenizer: &Tokenizer, prompt: &str, generated: &[u32]) -> String {
    let bytes = tokenizer.decode_bytes(generated);
    let complete = match std::str::from_utf8(&bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    };
    prompt.to_string() + &String::from_utf8_lossy(&bytes[..complete])
}

/// The token Generate appends after `position` tokens: the most likely at temperature 0, else a draw
/// seeded by the link's `seed` and the position, so the same link and temperature generate the same text.
pub fn choose_next(logits: &[f32], temperature: f64, seed: u64, position: usize) -> u32 {
    let mut rng = SplitMix64::new(seed ^ (position as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let uniform = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    choose(logits, temperature, uniform)
}

/// The line above the next-token candidates: fresh ones are offered for appending; ones predicted for
/// an earlier text are shown as such while the new prediction runs.
pub fn candidates_hint(fresh: bool, n_tokens: usize) -> String {
    if fresh {
        format!("After the text's {n_tokens} tokens the model predicts (click one to append it):")
    } else {
        format!("Updating for the new text… (these followed its earlier {n_tokens} tokens)")
    }
}

/// A candidate's probability as the panel writes it, and its bar's width.
pub fn candidate_percent(prob: f64) -> (String, String) {
    let percent = prob * 100.0;
    (format!("{percent:.1} %"), format!("width: {:.1}%", percent.clamp(0.0, 100.0)))
}

/// The temperature typed, held to 0..=2; anything that is not a finite number is 0 (greedy).
pub fn temperature_of(typed: &str) -> f64 {
    let t = typed.parse::<f64>().unwrap_or(0.0);
    if t.is_finite() { t.clamp(0.0, 2.0) } else { 0.0 }
}

/// One click of Generate, as it ran: for the sentence the panel says after it.
pub struct GenerationRun {
    pub count: u32,
    /// Whether the logits came from the GPU's cached decoding (else whole CPU passes).
    pub on_gpu: bool,
    pub scheme: KvScheme,
    /// Bytes a token takes in a cache packed in the scheme's bits (the GPU's), `None` for f32 or CPU passes.
    pub packed_bytes_per_token: Option<u64>,
    /// The f32 cache's pool of pages on the GPU as the run left it, `None` for a packed cache or CPU passes.
    pub pool: Option<PoolUse>,
    pub prompt_len: usize,
    /// Wall time to the first generated token's logits (the prompt's pass).
    pub first_ms: f64,
    /// Wall time of each following token, when there were any.
    pub each_ms: Option<f64>,
}

/// What Generate did, where and how fast.
pub fn generation_summary(run: &GenerationRun) -> String {
    let place = if run.on_gpu {
        "with the KV cache on the GPU"
    } else {
        "on the CPU (no WebGPU here: a whole forward pass a token, no KV cache)"
    };
    let cache = match run.pool {
        Some(pool) => pool_phrase(&pool),
        None => generate_cache_phrase(run.scheme, run.packed_bytes_per_token),
    };
    let place = format!("{place}{cache}");
    let plural = if run.count == 1 { "" } else { "s" };
    let mut said = format!(
        "Generated {} token{plural} {place}: the {}-token prompt took {:.0} ms",
        run.count, run.prompt_len, run.first_ms
    );
    if let Some(each) = run.each_ms {
        said += &format!(", then {each:.1} ms a token (wall time, beside the heads' redrawing)");
    }
    said + "."
}

/// What Generate says of its KV cache after "Generated N tokens ...": nothing for the f32 cache; for
/// a quantised one on the GPU, packed in the scheme's bits (`packed_bytes_per_token`, every layer's K
/// and V, as the cache's buffers hold them) and dequantised by the attention kernel as it reads;
/// without one (the CPU's passes), each token rounded to the scheme's values and kept in f32.
/// fp8's scale is the prompt's, said as such.
pub fn generate_cache_phrase(scheme: KvScheme, packed_bytes_per_token: Option<u64>) -> String {
    let scales = match scheme {
        KvScheme::Fp8 { scope: ScaleScope::Tensor, .. } => {
            "; one f32 scale for each layer's K and V, set from the prompt".to_string()
        }
        KvScheme::Fp8 { scope: ScaleScope::Head, .. } => "; one f32 scale for each KV head, set from the prompt".into(),
        KvScheme::Kivi { group, recent, .. } => format!(
            "; K quantised in blocks of {group} tokens, V a token at a time, as they leave the recent {recent}, \
             which wait in f32"
        ),
        _ => String::new(),
    };
    let when = match scheme {
        KvScheme::Kivi { .. } => "each token once",
        _ => "each token once, as it joins",
    };
    match (scheme, packed_bytes_per_token) {
        (KvScheme::Fp32, _) => String::new(),
        (_, Some(bytes)) => format!(
            ", K and V stored as {} ({} bytes a token{scales}), read by the kernel",
            scheme.name(),
            format_thousands(u128::from(bytes))
        ),
        (_, None) => format!(", K and V rounded to {} ({when}{scales}; held in f32)", scheme.name()),
    }
}

/// What Generate says of the f32 cache's pool of pages after "Generated N tokens ...": the pages in
/// use for the tokens it holds (the prompt and every generated token but the last, which is never fed
/// back), of the pool's, and their bytes (whole pages: K and V of every layer's KV heads), and the
/// pages sliding windows dropped and took again.
pub fn pool_phrase(pool: &PoolUse) -> String {
    let recycled = match pool.recycled_pages {
        0 => String::new(),
        1 => "; 1 page a sliding window dropped was taken again".into(),
        n => format!("; {n} pages sliding windows dropped were taken again"),
    };
    format!(
        ", K and V in pages of {PAGE_TOKENS} tokens, read through page tables after the prompt: {} of the pool's {} \
         pages in use for {} cached tokens, the prompt and the generated ones but the last ({} of {} bytes){recycled}",
        pool.live_pages,
        pool.pages,
        pool.tokens,
        format_thousands(u128::from(pool.live_bytes())),
        format_thousands(u128::from(pool.bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::LinkParams;

    #[test]
    fn generate_says_how_many_pages_its_pool_uses() {
        // The trained model after 100 tokens (pages of 2 KV heads x 16 tokens x 32 dims x 4 B x (K, V)
        // = 8,192 B): the global layer holds pages_for(100) = 7, each of the three sliding layers
        // (window 64) tokens 32..100 on 5 pages: 22 pages, 180,224 B, of 3 x 5 + 8 = 23 (188,416 B).
        // Each sliding layer dropped pages 0 and 1 at tokens 80 and 96 and took one back at 80 and 96.
        let pool = PoolUse { pages: 23, live_pages: 22, page_bytes: 8192, recycled_pages: 6, tokens: 100 };
        assert_eq!(
            pool_phrase(&pool),
            ", K and V in pages of 16 tokens, read through page tables after the prompt: 22 of the pool's 23 pages \
             in use for 100 cached tokens, the prompt and the generated ones but the last (180,224 of 188,416 bytes); \
             6 pages sliding windows dropped were taken again"
        );
        // Two tokens generated after a 12-token prompt: 13 cached, one page in each of the 4 layers.
        let short = PoolUse { pages: 23, live_pages: 4, recycled_pages: 0, tokens: 13, ..pool };
        assert!(pool_phrase(&short).ends_with(
            "4 of the pool's 23 pages in use for 13 cached tokens, the prompt and the generated ones but the last \
             (32,768 of 188,416 bytes)"
        ));
        let run = GenerationRun {
            count: 2,
            on_gpu: true,
            scheme: KvScheme::Fp32,
            packed_bytes_per_token: None,
            pool: Some(short),
            prompt_len: 12,
            first_ms: 41.6,
            each_ms: Some(9.04),
        };
        assert!(
            generation_summary(&run).starts_with("Generated 2 tokens with the KV cache on the GPU, K and V in pages")
        );
        assert!(generation_summary(&run).ends_with(
            "(32,768 of 188,416 bytes): the 12-token prompt took 42 ms, then 9.0 ms a token (wall time, beside the \
             heads' redrawing)."
        ));
        assert_eq!(
            pool_phrase(&PoolUse { recycled_pages: 1, ..short }).matches("1 page a sliding window dropped").count(),
            1
        );
    }

    #[test]
    fn generate_names_how_its_cache_stores_the_tokens() {
        assert_eq!(generate_cache_phrase(KvScheme::Fp32, None), "");
        // The trained model's int4-g32 cache: 4 layers x 2 KV heads x (K, V) x 20 B = 320 B a token
        // (model::kv_packed's hand count).
        let int4 = KvScheme::IntGroup { bits: 4, group: 32 };
        assert_eq!(
            generate_cache_phrase(int4, Some(320)),
            ", K and V stored as int4-g32 (320 bytes a token), read by the kernel"
        );
        assert_eq!(
            generate_cache_phrase(KvScheme::Int8, None),
            ", K and V rounded to int8 (each token once, as it joins; held in f32)"
        );
        assert!(generate_cache_phrase(KvScheme::Fp16, Some(65_536)).contains("(65,536 bytes a token)"));
        // KIVI int2, G = 32, R = 16 on the trained model: K's block of 32 tokens is 32 x 2 code words
        // + 32 scale words = 96 words (12 B a token), V 3 words (12 B): 24 B x 8 heads = 192 B.
        let kivi = KvScheme::Kivi { bits: 2, group: 32, recent: 16 };
        assert_eq!(
            generate_cache_phrase(kivi, Some(192)),
            ", K and V stored as kivi-int2 (192 bytes a token; K quantised in blocks of 32 tokens, V a token at a \
             time, as they leave the recent 16, which wait in f32), read by the kernel"
        );
        assert!(generate_cache_phrase(kivi, None).starts_with(", K and V rounded to kivi-int2 (each token once; K"));
    }

    #[test]
    fn an_appended_token_past_the_text_limit_is_refused_by_name() {
        assert_eq!(text_limit_reached(&"é".repeat(MAX_TEXT_CHARS)), None);
        assert_eq!(
            text_limit_reached(&"é".repeat(MAX_TEXT_CHARS + 1)).as_deref(),
            Some("the text has reached the explorer's limit of 2,000 characters")
        );
    }

    fn tokenizer() -> Tokenizer {
        let json = include_str!("../../../www/models/attention-lab-tiny/tokenizer.json");
        Tokenizer::from_json(json).unwrap()
    }

    fn layout(layer: u32) -> LayerLayout {
        LayerLayout::of(crate::catalog::presets::preset("attention-lab-tiny").unwrap(), layer)
    }

    #[test]
    fn the_text_is_read_by_the_models_tokenizer_up_to_its_trained_length() {
        let tok = tokenizer();
        let (ids, pieces) = model_tokens(&tok, "fn main() {}", (128, 4096)).unwrap();
        assert_eq!(ids, tok.encode("fn main() {}"));
        assert_eq!(pieces.concat(), "fn main() {}", "the pieces spell the text");
        assert!(model_tokens(&tok, "", (128, 4096)).unwrap_err().starts_with("Type a sentence"));
        // The browser test's sentence (tests/browser/trained_model.test.mjs): its phrase repeats, so
        // induction can be measured on it.
        let (ids, _) =
            model_tokens(&tok, "The compiler checks the borrow, and the compiler checks the borrow", (128, 4096))
                .unwrap();
        assert_eq!(ids, [475, 940, 2508, 265, 1038, 12, 318, 265, 940, 2508, 265, 1038]);
        let long = "word ".repeat(200);
        let why = model_tokens(&tok, &long, (128, 4096)).unwrap_err();
        assert!(why.starts_with(&format!("This text is {} tokens", tok.encode(&long).len())), "{why}");
        assert!(why.contains("at most 128"), "{why}");
    }

    #[test]
    fn layers_keep_their_own_masks_and_every_cell_is_drawn() {
        let tok = tokenizer();
        let (ids, pieces) = model_tokens(&tok, "The cat sat on the mat.", (128, 4096)).unwrap();
        let n = ids.len() as u32;
        let req = trained_request(&ExplorerParams::default(), layout(0), ids.clone(), pieces.clone()).unwrap();
        // Layers 0-2 slide over 64 tokens, layer 3 is global (config.json's layer_types).
        assert_eq!(req.mask, Mask::Sliding { window_tokens: 64 });
        assert_eq!(trained_request(&ExplorerParams::default(), layout(3), ids, pieces).unwrap().mask, Mask::Causal);
        assert_eq!((req.n_q(), req.map_cells, req.focus_cells, req.exact()), (n, n, n, true));
        assert_eq!(req.heads, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn maps_carry_their_heads_probabilities_and_scores() {
        // 2 heads over 3 tokens "a b a": head 0 looks at the previous token, head 1 at the first.
        let req = Request {
            heads: vec![1, 0],
            ..trained_request(&ExplorerParams::default(), layout(3), vec![7, 8, 7], vec!["a".into(); 3]).unwrap()
        };
        let mut probs = vec![0.0; 8 * 9];
        for q in 0..3usize {
            probs[q * 3 + q.saturating_sub(1)] = 1.0;
            probs[9 + q * 3] = 1.0;
        }
        let maps = head_maps(&probs, &[7, 8, 7], &req);
        assert_eq!(maps.iter().map(|m| m.head).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(maps[1].values[3..6], [1.0, 0.0, 0.0]);
        assert_eq!(maps[1].scores.unwrap().previous, Some(1.0));
        assert_eq!(maps[0].scores.unwrap().sink, Some(1.0));
        // 8 query heads over 2 KV heads: heads 0-3 read KV head 0. Head 1's query 1 looks at key 0,
        // its previous token too: previous (1 + 0) / 2 = 0.5 earns that label as well.
        assert_eq!(maps[0].kv_head, 0);
        assert_eq!(maps[0].caption(), "Head 1 · KV 0 · previous-token · sink");
        // Probabilities cut short give the heads they hold (head 0's nine), never a panic.
        let short = head_maps(&probs[..10], &[7, 8, 7], &req);
        assert_eq!(short.iter().map(|m| m.head).collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn candidates_are_decoded_and_generation_appends_to_the_text() {
        let tok = tokenizer();
        let mut logits = vec![0.0f32; tok.vocab_size()];
        let space_the = tok.encode(" the")[0];
        logits[space_the as usize] = 10.0;
        let shown = next_tokens(&tok, &logits);
        assert_eq!(shown.len(), 5);
        assert_eq!((shown[0].id, shown[0].text.as_str()), (space_the, " the"));
        // e^10 / (e^10 + 4,095): 0.8432...
        assert!((shown[0].prob - 10f64.exp() / (10f64.exp() + 4095.0)).abs() < 1e-9);
        let mut input = AttentionInput::default();
        assert_eq!(with_token(&tok, &input, space_the), format!("{} the", input.text));
        input.set("n", "65536").unwrap();
        let why = model_input(&tok, &input, (128, 4096)).unwrap_err();
        // A text spelling out an added token the model has no row for is refused, naming it.
        let past = crate::views::heatmaps::checkpoint_files::tests::with_token_past_the_rows(false);
        let why_not = model_tokens(&past, "a <|image|> b", (128, 4096)).unwrap_err();
        assert!(why_not.starts_with("The text holds \"<|image|>\", a token of the tokenizer (id 4096)"), "{why_not}");
        assert!(model_tokens(&past, "a b", (128, 4096)).is_ok());
        assert!(why.starts_with("65,536 generated words make at least as many tokens"), "{why}");
        input.set("n", "4").unwrap();
        assert_eq!(model_input(&tok, &input, (128, 4096)).unwrap().0, tok.encode(&model_text(&input)));
        let words = model_text(&input);
        assert_eq!(words.split(' ').count(), 4);
        assert_eq!(with_token(&tok, &input, space_the), format!("{words} the"));
    }

    #[test]
    fn a_character_split_across_tokens_waits_for_its_second_half() {
        let tok = tokenizer();
        // "é" is two bytes; find a vocabulary whose tokens split it (byte-level BPE always has the
        // single bytes): 0xC3 then 0xA9.
        let ids = tok.encode("é");
        let bytes: Vec<Vec<u8>> = (0..tok.vocab_size() as u32).map(|id| tok.decode_bytes(&[id])).collect();
        let first = bytes.iter().position(|b| b == &[0xC3]).unwrap() as u32;
        let second = bytes.iter().position(|b| b == &[0xA9]).unwrap() as u32;
        assert_eq!(generated_text(&tok, "caf", &[first]), "caf", "held back");
        assert_eq!(generated_text(&tok, "caf", &[first, second]), "café");
        assert_eq!(tok.decode(&ids), "é");
        // A byte that can never start a character is not held back: it shows as U+FFFD.
        assert_eq!(generated_text(&tok, "x", &[second]), "x\u{FFFD}");
    }

    #[test]
    fn generation_is_greedy_at_zero_and_reproducible_when_sampled() {
        let logits = [1.0f32, 3.0, 2.0, 0.5];
        assert_eq!(choose_next(&logits, 0.0, 42, 7), 1);
        let draws: Vec<u32> = (0..200).map(|pos| choose_next(&logits, 1.0, 42, pos)).collect();
        assert_eq!(draws, (0..200).map(|pos| choose_next(&logits, 1.0, 42, pos)).collect::<Vec<_>>());
        // Softmax of 1, 3, 2, 0.5: 0.0854, 0.6308, 0.2321, 0.0518; every token turns up in 200 draws and
        // the likeliest most often.
        let count = |id| draws.iter().filter(|&&d| d == id).count();
        assert!((0..4).all(|id| count(id) > 0), "{draws:?}");
        assert!(count(1) > count(2) && count(2) > count(0), "{draws:?}");
        assert_ne!(draws, (0..200).map(|pos| choose_next(&logits, 1.0, 43, pos)).collect::<Vec<_>>());
    }

    #[test]
    fn settings_for_the_synthetic_layouts_are_named() {
        assert!(ignored_settings(&AttentionInput::default(), &ExplorerParams::default()).is_empty());
        let mut input = AttentionInput::default();
        input.set("mask", "full").unwrap();
        let mut explorer = ExplorerParams::default();
        explorer.set("src", "le chat").unwrap();
        explorer.set("tok", "char").unwrap();
        let said = ignored_settings(&input, &explorer).join("; ");
        for key in ["mask=", "src=", "tok="] {
            assert!(said.contains(key), "{said}");
        }
    }

    #[test]
    fn the_next_token_panel_says_whether_its_candidates_follow_this_text() {
        assert_eq!(candidates_hint(true, 5), "After the text's 5 tokens the model predicts (click one to append it):");
        assert_eq!(candidates_hint(false, 4), "Updating for the new text… (these followed its earlier 4 tokens)");
        assert_eq!(candidate_percent(0.1234), ("12.3 %".to_string(), "width: 12.3%".to_string()));
        assert_eq!(candidate_percent(1.5).1, "width: 100.0%");
        assert_eq!(temperature_of("0.7"), 0.7);
        assert_eq!(temperature_of("3"), 2.0);
        assert_eq!(temperature_of("-1"), 0.0);
        assert_eq!(temperature_of("warm"), 0.0);
        assert_eq!(temperature_of("NaN"), 0.0);
        assert_eq!(temperature_of("inf"), 0.0);
    }

    #[test]
    fn generation_summary_says_where_it_ran_and_how_fast() {
        let run = GenerationRun {
            count: 4,
            on_gpu: false,
            scheme: KvScheme::Fp32,
            packed_bytes_per_token: None,
            pool: None,
            prompt_len: 12,
            first_ms: 41.6,
            each_ms: Some(7.31),
        };
        assert_eq!(
            generation_summary(&run),
            "Generated 4 tokens on the CPU (no WebGPU here: a whole forward pass a token, no KV cache): the 12-token \
             prompt took 42 ms, then 7.3 ms a token (wall time, beside the heads' redrawing)."
        );
        let one = GenerationRun {
            count: 1,
            on_gpu: false,
            scheme: KvScheme::IntGroup { bits: 4, group: 32 },
            each_ms: None,
            ..run
        };
        assert_eq!(
            generation_summary(&one),
            "Generated 1 token on the CPU (no WebGPU here: a whole forward pass a token, no KV cache), K and V \
             rounded to int4-g32 (each token once, as it joins; held in f32): the 12-token prompt took 42 ms."
        );
        let packed = GenerationRun { on_gpu: true, packed_bytes_per_token: Some(320), ..one };
        assert_eq!(
            generation_summary(&packed),
            "Generated 1 token with the KV cache on the GPU, K and V stored as int4-g32 (320 bytes a token), read by \
             the kernel: the 12-token prompt took 42 ms."
        );
        let e4m3 = KvScheme::Fp8 { format: crate::model::kv_quant::Fp8::E4m3, scope: ScaleScope::Tensor };
        assert_eq!(
            generate_cache_phrase(e4m3, Some(512)),
            ", K and V stored as fp8-e4m3 (512 bytes a token; one f32 scale for each layer's K and V, set from the \
             prompt), read by the kernel"
        );
        assert_eq!(
            generate_cache_phrase(e4m3, None),
            ", K and V rounded to fp8-e4m3 (each token once, as it joins; one f32 scale for each layer's K and V, set \
             from the prompt; held in f32)"
        );
    }
}
