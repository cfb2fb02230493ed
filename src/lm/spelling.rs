//! How a vocabulary spells text, and so what a word's first symbols are before any merge:
//! GPT-2's byte alphabet (byte-level BPE: Llama 3, Qwen, SmolLM, GPT-2) or SentencePiece's text with
//! `▁` for a space and `<0xNN>` tokens for bytes (Llama 2, Mistral).

use foldhash::HashMap;

use super::pre_tokenize::METASPACE;

/// How a word becomes its first symbols, and what each token stands for.
#[derive(Debug, Clone)]
pub enum Spelling {
    /// Every byte is one printable character of GPT-2's alphabet, and has its own token.
    ByteLevel { byte_ids: Box<[u32; 256]>, alphabet: Box<[char; 256]> },
    /// Tokens are text. A character without a token of its own falls back on its UTF-8 bytes'
    /// `<0xNN>` tokens if the model has them all (`byte_fallback`), else on the unknown token (runs
    /// of them fused into one with `fuse_unk`), else is left out, as the library does.
    Text { char_ids: HashMap<char, u32>, fallback: Option<Box<[Option<u32>; 256]>>, unk: Option<u32>, fuse_unk: bool },
}

impl Spelling {
    /// A word's symbols before merging.
    pub fn first_symbols(&self, word: &str) -> Vec<u32> {
        match self {
            Spelling::ByteLevel { byte_ids, .. } => word.bytes().map(|b| byte_ids[usize::from(b)]).collect(),
            Spelling::Text { char_ids, fallback, unk, fuse_unk } => {
                text_symbols(word, char_ids, fallback.as_deref(), *unk, *fuse_unk)
            }
        }
    }

    /// The word as the vocabulary writes it (for `ignore_merges`, which looks the whole word up).
    pub fn spelt(&self, word: &str) -> String {
        match self {
            Spelling::ByteLevel { alphabet, .. } => word.bytes().map(|b| alphabet[usize::from(b)]).collect(),
            Spelling::Text { .. } => word.to_string(),
        }
    }
}

/// The library's `BPE::merge_word` before merging, for a text vocabulary. An unknown character is
/// held back until a known one follows, so a byte fallback right after it comes first: the library's
/// order, kept.
fn text_symbols(
    word: &str,
    char_ids: &HashMap<char, u32>,
    fallback: Option<&[Option<u32>; 256]>,
    unk: Option<u32>,
    fuse_unk: bool,
) -> Vec<u32> {
    let mut ids = Vec::with_capacity(word.len());
    let mut pending_unk: Option<u32> = None;
    for c in word.chars() {
        if let Some(&id) = char_ids.get(&c) {
            ids.extend(pending_unk.take());
            ids.push(id);
            continue;
        }
        let mut buf = [0; 4];
        let bytes: Option<Vec<u32>> =
            fallback.and_then(|f| c.encode_utf8(&mut buf).bytes().map(|b| f[usize::from(b)]).collect());
        if let Some(bytes) = bytes {
            ids.extend(bytes);
        } else if let Some(unk) = unk {
            if !fuse_unk {
                ids.extend(pending_unk.take());
            }
            pending_unk = Some(unk);
        }
    }
    ids.extend(pending_unk);
    ids
}

/// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 (controls, the
/// space, 0x7F-0xA0, the soft hyphen) for U+0100 onwards in byte order: the space is `Ġ` (U+0120).
pub fn byte_alphabet() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut shifted = 0x100;
    std::array::from_fn(|b| {
        let b = b as u8;
        if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(shifted - 1).unwrap_or(char::REPLACEMENT_CHARACTER)
        }
    })
}

/// The alphabet's inverse: char -> the byte it stands for.
pub fn alphabet_bytes(alphabet: &[char; 256]) -> HashMap<char, u8> {
    (0..=u8::MAX).map(|b| (alphabet[usize::from(b)], b)).collect()
}

/// A byte-level vocabulary entry's bytes. As the library's decoder: a token with a char outside the
/// alphabet is taken as its own UTF-8 whole (added tokens such as `<|endoftext|>` are inside it anyway).
pub fn byte_level_bytes(token: &str, bytes: &HashMap<char, u8>) -> Box<[u8]> {
    let spelt: Option<Vec<u8>> = token.chars().map(|c| bytes.get(&c).copied()).collect();
    spelt.unwrap_or_else(|| token.as_bytes().to_vec()).into()
}

/// A text vocabulary entry's bytes, as its decoder makes them: `<0xNN>` is that byte (with a
/// `ByteFallback` decoder), and `▁` a space.
pub fn text_bytes(token: &str, byte_tokens: bool) -> Box<[u8]> {
    if byte_tokens && let Some(b) = byte_token_value(token) {
        return Box::new([b]);
    }
    token.replace(METASPACE, " ").into_bytes().into()
}

/// `<0xNN>` (two upper-case hex digits, as the library writes them) -> NN.
fn byte_token_value(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    let upper = hex.len() == 2 && hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b));
    upper.then(|| u8::from_str_radix(hex, 16).ok()).flatten()
}

/// The name of byte `b`'s fallback token.
pub fn byte_token(b: u8) -> String {
    format!("<0x{b:02X}>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_read_both_ways() {
        assert_eq!(byte_token(0x0a), "<0x0A>");
        assert_eq!(byte_token_value("<0x0A>"), Some(0x0a));
        assert_eq!(byte_token_value("<0xff>"), None);
        assert_eq!(byte_token_value("<0x0A0>"), None);
        assert_eq!(&*text_bytes("<0xE2>", true), &[0xe2]);
        assert_eq!(&*text_bytes("<0xE2>", false), b"<0xE2>");
        assert_eq!(&*text_bytes("\u{2581}the", true), b" the");
    }

    #[test]
    fn unknown_characters_fall_back_as_the_library_does() {
        let char_ids: HashMap<char, u32> = [('a', 1), ('b', 2)].into_iter().collect();
        let mut table = [None; 256];
        for b in 0..=0x7fu8 {
            table[usize::from(b)] = Some(100 + u32::from(b));
        }
        // 'é' (0xC3 0xA9) has no byte tokens here, so it is unknown; '!' falls back to its byte.
        let spell = |fallback, unk, fuse| text_symbols("aé!éb", &char_ids, fallback, unk, fuse);
        assert_eq!(spell(Some(&table), Some(0), true), [1, 100 + 0x21, 0, 2]);
        assert_eq!(spell(Some(&table), Some(0), false), [1, 100 + 0x21, 0, 0, 2]);
        assert_eq!(spell(None, Some(0), true), [1, 0, 2]);
        assert_eq!(spell(None, None, true), [1, 2]);
        assert_eq!(text_symbols("éé", &char_ids, None, Some(0), true), [0]);
    }
}
