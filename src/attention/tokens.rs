//! Token streams for the explorer: word or character tokens of typed text, and generated sequences of
//! any length (a seeded walk over a small vocabulary whose second half repeats the first, so
//! previous-occurrence and induction-like patterns have something to find).

use std::fmt;
use std::str::FromStr;

use super::inputs::{SplitMix64, word_tokens};

/// How typed text becomes tokens (URL `tok=word|char`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TokenMode {
    /// Runs of letters/digits and single punctuation marks (whitespace dropped): see [`word_tokens`].
    #[default]
    Word,
    /// Every character is a token, spaces included.
    Char,
}

impl TokenMode {
    pub const ALL: [TokenMode; 2] = [TokenMode::Word, TokenMode::Char];

    pub fn name(self) -> &'static str {
        match self {
            TokenMode::Word => "word",
            TokenMode::Char => "char",
        }
    }
}

impl fmt::Display for TokenMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TokenMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "word" => Ok(TokenMode::Word),
            "char" => Ok(TokenMode::Char),
            _ => Err(format!("unknown tokens \"{s}\" (expected word or char)")),
        }
    }
}

/// Character tokens: one per Unicode scalar value, whitespace included.
pub fn char_tokens(text: &str) -> Vec<String> {
    text.chars().map(|c| c.to_string()).collect()
}

/// Tokens of `text` in the given mode.
pub fn tokenize(text: &str, mode: TokenMode) -> Vec<String> {
    match mode {
        TokenMode::Word => word_tokens(text),
        TokenMode::Char => char_tokens(text),
    }
}

/// How a token is printed on an axis: whitespace made visible.
pub fn display_token(token: &str) -> String {
    match token {
        " " => "␣".into(),
        "\n" => "⏎".into(),
        "\t" => "⇥".into(),
        t => t.into(),
    }
}

/// The vocabulary of generated sequences.
pub const GENERATED_VOCAB: [&str; 24] = [
    "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "and", "then", "it", "saw", "bird", "flew",
    "over", "tree", "red", "blue", "big", "small", "we", "go",
];

/// `n` tokens: the first `ceil(n / 2)` drawn from [`GENERATED_VOCAB`] by a seeded generator, the rest a
/// copy of them (token `i >= half` equals token `i - half`). Deterministic in (`n`, `seed`).
pub fn generated_tokens(n: usize, seed: u64) -> Vec<String> {
    let half = n.div_ceil(2);
    let mut rng = SplitMix64::new(seed ^ 0x6765_6E65_7261_7465);
    let first: Vec<&str> =
        (0..half).map(|_| GENERATED_VOCAB[(rng.next_u64() % GENERATED_VOCAB.len() as u64) as usize]).collect();
    (0..n).map(|i| first[if i < half { i } else { i - half }].to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_tokens_keep_spaces() {
        assert_eq!(char_tokens("a b"), vec!["a", " ", "b"]);
        assert_eq!(char_tokens("né"), vec!["n", "é"]);
        assert_eq!(tokenize("a b.", TokenMode::Word), vec!["a", "b", "."]);
        assert_eq!(display_token(" "), "␣");
        assert_eq!("char".parse::<TokenMode>(), Ok(TokenMode::Char));
        assert!("bpe".parse::<TokenMode>().is_err());
    }

    #[test]
    fn generated_sequences_repeat_and_are_deterministic() {
        let t = generated_tokens(9, 3);
        assert_eq!(t.len(), 9);
        // half = 5: tokens 5..9 repeat 0..4.
        assert_eq!(t[5..9], t[0..4]);
        assert_eq!(t, generated_tokens(9, 3));
        assert_ne!(generated_tokens(64, 3), generated_tokens(64, 4));
        assert_eq!(generated_tokens(32768, 1).len(), 32768);
        assert!(generated_tokens(0, 1).is_empty());
    }
}
