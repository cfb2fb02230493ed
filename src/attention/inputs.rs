//! Deterministic inputs for attention: tokens, embeddings, positions and seeded projections.
//!
//! Everything here is a pure function of (text, seed), so a shared link reproduces the exact numbers.

/// SplitMix64: a tiny seeded generator (no OS randomness, identical on every platform).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn next_signed_unit(&mut self) -> f32 {
        // 24 random bits give every f32 in the range an exact representation.
        ((self.next_u64() >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }
}

/// FNV-1a: a stable hash of a token's text, so the same word always gets the same embedding.
pub fn token_hash(token: &str) -> u64 {
    token.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Splits text into word tokens: runs of letters/digits (with inner apostrophes), and each punctuation
/// mark on its own. Whitespace separates tokens and is dropped.
pub fn word_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || (c == '\'' && !word.is_empty()) {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

/// Token embeddings `[n, d_model]`: each distinct (lower-cased) token gets a seeded random vector of
/// unit-ish scale, so repeated words share an embedding.
pub fn embed(tokens: &[String], d_model: usize, seed: u64) -> Vec<f32> {
    let mut out = Vec::with_capacity(tokens.len() * d_model);
    for token in tokens {
        let mut rng = SplitMix64::new(seed ^ token_hash(&token.to_lowercase()));
        out.extend((0..d_model).map(|_| rng.next_signed_unit()));
    }
    out
}

/// Adds the sinusoidal position encoding of "Attention Is All You Need" to `x` (`[n, d_model]`):
/// even dims get `sin(pos / 10000^(2i/d))`, odd dims the matching cosine.
pub fn add_sinusoidal_positions(x: &mut [f32], d_model: usize) {
    let half = d_model / 2;
    let freqs: Vec<f64> = (0..half).map(|pair| 10000f64.powf(-2.0 * pair as f64 / d_model as f64)).collect();
    let (sin, cos) = super::rope::angle_table(x.len() / d_model.max(1), &freqs);
    for (pos, row) in x.chunks_mut(d_model).enumerate() {
        for pair in 0..half {
            row[2 * pair] += sin[pos * half + pair] as f32;
            row[2 * pair + 1] += cos[pos * half + pair] as f32;
        }
    }
}

/// A seeded projection matrix `[d_in, d_out]` with entries scaled by `1/sqrt(d_in)`, so projected
/// vectors keep roughly the scale of their inputs.
pub fn projection(d_in: usize, d_out: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    let scale = 1.0 / (d_in as f32).sqrt();
    (0..d_in * d_out).map(|_| rng.next_signed_unit() * scale).collect()
}

/// `x [n, d_in] · w [d_in, d_out] -> [n, d_out]`.
pub fn matmul(x: &[f32], w: &[f32], d_in: usize, d_out: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len() / d_in * d_out];
    for (x_row, out_row) in x.chunks(d_in).zip(out.chunks_mut(d_out)) {
        for (c, &xc) in x_row.iter().enumerate() {
            for (o, &wv) in out_row.iter_mut().zip(&w[c * d_out..][..d_out]) {
                *o += xc * wv;
            }
        }
    }
    out
}

/// The inputs of one attention head for a sentence: its tokens and Q, K, V `[n, d_head]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadInputs {
    pub tokens: Vec<String>,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub d_head: usize,
}

/// Embedding width of the small demonstration model.
pub const DEMO_D_MODEL: usize = 64;
/// Head width of the small demonstration model.
pub const DEMO_D_HEAD: usize = 16;

/// Tokens -> embeddings + sinusoidal positions -> seeded W_q, W_k, W_v for one head.
pub fn single_head_inputs(text: &str, seed: u64) -> HeadInputs {
    let tokens = word_tokens(text);
    let mut x = embed(&tokens, DEMO_D_MODEL, seed);
    add_sinusoidal_positions(&mut x, DEMO_D_MODEL);
    // Distinct streams for the three projections, all derived from the one seed.
    let project = |stream: u64| {
        matmul(
            &x,
            &projection(DEMO_D_MODEL, DEMO_D_HEAD, seed.wrapping_mul(31).wrapping_add(stream)),
            DEMO_D_MODEL,
            DEMO_D_HEAD,
        )
    };
    HeadInputs { q: project(1), k: project(2), v: project(3), tokens, d_head: DEMO_D_HEAD }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words_and_punctuation() {
        assert_eq!(
            word_tokens("The cat's hat, on  the mat."),
            vec!["The", "cat's", "hat", ",", "on", "the", "mat", "."]
        );
        assert!(word_tokens("   ").is_empty());
        assert_eq!(word_tokens("'quoted'"), vec!["'", "quoted'"]);
    }

    #[test]
    fn same_token_same_embedding_and_seed_changes_it() {
        let tokens: Vec<String> = ["cat", "dog", "Cat"].iter().map(|s| s.to_string()).collect();
        let e = embed(&tokens, 8, 7);
        assert_eq!(e[0..8], e[16..24]);
        assert_ne!(e[0..8], e[8..16]);
        assert_ne!(embed(&tokens, 8, 8)[0..8], e[0..8]);
    }

    #[test]
    fn sinusoid_by_hand() {
        let mut x = vec![0.0f32; 3 * 4];
        add_sinusoidal_positions(&mut x, 4);
        // pos 0: sin 0 = 0, cos 0 = 1 on both pairs.
        assert_eq!(&x[0..4], &[0.0, 1.0, 0.0, 1.0]);
        // pos 1, pair 1: angle = 1 / 10000^(2/4) = 0.01.
        assert!((x[4] - 1f32.sin()).abs() < 1e-6);
        assert!((x[6] - 0.01f32.sin()).abs() < 1e-6);
        assert!((x[7] - 0.01f32.cos()).abs() < 1e-6);
    }

    #[test]
    fn matmul_by_hand() {
        // [1 2] · [[1 0 2], [0 1 3]] = [1 2 8]
        assert_eq!(matmul(&[1.0, 2.0], &[1.0, 0.0, 2.0, 0.0, 1.0, 3.0], 2, 3), vec![1.0, 2.0, 8.0]);
    }

    #[test]
    fn generator_is_deterministic_and_in_range() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..1000 {
            let x = a.next_signed_unit();
            assert_eq!(x, b.next_signed_unit());
            assert!((-1.0..1.0).contains(&x));
        }
    }

    #[test]
    fn head_inputs_are_reproducible() {
        let a = single_head_inputs("attention is all you need", 1);
        assert_eq!(a, single_head_inputs("attention is all you need", 1));
        assert_eq!(a.q.len(), 5 * DEMO_D_HEAD);
        assert_ne!(a.q, single_head_inputs("attention is all you need", 2).q);
    }
}
