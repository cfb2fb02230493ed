//! From the logits after the last token to what the page shows and generates: the most likely next
//! tokens with their probabilities, and the choice of the next token (greedy, or sampled at a
//! temperature with a seeded generator, so a link reproduces the same text).

/// One candidate next token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub id: u32,
    /// Softmax probability over the whole vocabulary.
    pub prob: f64,
}

/// The `k` most likely next tokens, most likely first (ties: the lower id first).
pub fn top_candidates(logits: &[f32], k: usize) -> Vec<Candidate> {
    let probs = softmax(logits, 1.0);
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    ids.sort_by(|&a, &b| probs[b as usize].total_cmp(&probs[a as usize]).then(a.cmp(&b)));
    ids.into_iter().take(k).map(|id| Candidate { id, prob: probs[id as usize] }).collect()
}

/// The next token: the most likely at temperature 0 (or below), else a draw from the softmax of
/// `logits / temperature` using `uniform`, a number in [0, 1).
pub fn choose(logits: &[f32], temperature: f64, uniform: f64) -> u32 {
    if temperature <= 0.0 || !temperature.is_finite() {
        return top_candidates(logits, 1).first().map_or(0, |c| c.id);
    }
    let probs = softmax(logits, temperature);
    let mut left = uniform.clamp(0.0, 1.0);
    for (id, p) in probs.iter().enumerate() {
        if left < *p {
            return id as u32;
        }
        left -= p;
    }
    // Rounding left a sliver past the last token: the last one with any probability.
    probs.iter().rposition(|&p| p > 0.0).unwrap_or(0) as u32
}

/// Softmax of `logits / temperature` in f64.
fn softmax(logits: &[f32], temperature: f64) -> Vec<f64> {
    let mut scaled: Vec<f64> = logits.iter().map(|&l| f64::from(l) / temperature).collect();
    super::forward::softmax(&mut scaled);
    scaled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_by_hand() {
        // ln 1, ln 2, ln 3, ln 2: probabilities 1/8, 2/8, 3/8, 2/8.
        let logits = [0.0f32, 2f32.ln(), 3f32.ln(), 2f32.ln()];
        let top = top_candidates(&logits, 3);
        let ids: Vec<u32> = top.iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![2, 1, 3], "ties keep the lower id first");
        assert!((top[0].prob - 0.375).abs() < 1e-7 && (top[1].prob - 0.25).abs() < 1e-7);
        assert_eq!(top_candidates(&logits, 10).len(), 4);
    }

    #[test]
    fn greedy_and_sampled_choices() {
        let logits = [0.0f32, 2f32.ln(), 3f32.ln(), 2f32.ln()];
        assert_eq!(choose(&logits, 0.0, 0.99), 2);
        // At temperature 1 the cumulative probabilities are 1/8, 3/8, 6/8, 1.
        for (u, id) in [(0.0, 0), (0.124, 0), (0.126, 1), (0.5, 2), (0.76, 3), (0.999_999, 3)] {
            assert_eq!(choose(&logits, 1.0, u), id, "u = {u}");
        }
        // A very low temperature is greedy in effect; a huge one nearly uniform.
        assert_eq!(choose(&logits, 1e-6, 0.9), 2);
        assert_eq!(choose(&logits, 1e6, 0.3), 1);
    }
}
