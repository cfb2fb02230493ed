//! What a quantised KV cache costs, measured: for the whole model, the next-token distributions of a
//! pass over the cache against the full-precision pass on the same text (KL divergence, top-1
//! agreement, loss on the text); for each head, how its attention probabilities moved.

/// The model's next-token quality over a text, against the full-precision pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    /// KL(full ‖ quantised) of the next-token distributions, nats, averaged over every position.
    pub kl: f64,
    /// The share of positions whose most likely next token is the full-precision pass's.
    pub top1: f64,
    /// Mean -ln p(next token of the text), nats per token, over positions 0..tokens-1 (`None` for
    /// a one-token text: nothing to predict).
    pub loss: Option<f64>,
}

/// `full` and `got` are `[tokens, vocab]` logits of every position of `ids` (the full-precision
/// pass and the pass being judged).
pub fn quality(full: &[f32], got: &[f32], ids: &[u32]) -> Option<Quality> {
    let t = ids.len();
    if t == 0 || full.len() != got.len() || !full.len().is_multiple_of(t) {
        return None;
    }
    let vocab = full.len() / t;
    let (mut kl, mut agree, mut loss) = (0.0, 0usize, 0.0);
    for (i, (f, g)) in full.chunks_exact(vocab).zip(got.chunks_exact(vocab)).enumerate() {
        let (lf, lg) = (log_softmax(f), log_softmax(g));
        kl += lf.iter().zip(&lg).map(|(a, b)| a.exp() * (a - b)).sum::<f64>();
        agree += usize::from(argmax(f) == argmax(g));
        if let Some(&next) = ids.get(i + 1) {
            loss -= lg.get(next as usize).copied()?;
        }
    }
    let loss = (t > 1).then(|| loss / (t - 1) as f64);
    // KL is never negative; rounding can leave -1e-17 for identical rows.
    Some(Quality { kl: (kl / t as f64).max(0.0), top1: agree as f64 / t as f64, loss })
}

/// How one head's probabilities (`[tokens, tokens]`, row = query) moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadChange {
    /// The largest |p - p_full| of any query and key.
    pub max_abs: f64,
    /// The mean |p - p_full| over the causal pairs (key <= query): tokens (tokens + 1) / 2 of them.
    pub mean_abs: f64,
    /// Query rows whose most probable key is another one.
    pub top_key_changed: usize,
}

pub fn head_change(full: &[f32], got: &[f32], tokens: usize) -> Option<HeadChange> {
    if tokens == 0 || full.len() != tokens * tokens || got.len() != full.len() {
        return None;
    }
    let (mut max_abs, mut sum, mut changed) = (0.0f64, 0.0, 0);
    for (i, (f, g)) in full.chunks_exact(tokens).zip(got.chunks_exact(tokens)).enumerate() {
        for (a, b) in f[..=i].iter().zip(&g[..=i]) {
            let d = (f64::from(*a) - f64::from(*b)).abs();
            max_abs = max_abs.max(d);
            sum += d;
        }
        changed += usize::from(argmax(f) != argmax(g));
    }
    let pairs = tokens * (tokens + 1) / 2;
    Some(HeadChange { max_abs, mean_abs: sum / pairs as f64, top_key_changed: changed })
}

/// ‖got - full‖ / ‖full‖ (Euclidean), e.g. of a head's output; 0 where both are zero.
pub fn relative_error(full: &[f32], got: &[f32]) -> f64 {
    let diff: f64 = full.iter().zip(got).map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2)).sum();
    let norm: f64 = full.iter().map(|a| f64::from(*a).powi(2)).sum();
    if diff == 0.0 { 0.0 } else { (diff / norm).sqrt() }
}

/// ln softmax(x), in f64.
fn log_softmax(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let sum: f64 = x.iter().map(|&v| (f64::from(v) - max).exp()).sum();
    let log_z = max + sum.ln();
    x.iter().map(|&v| f64::from(v) - log_z).collect()
}

/// The first index of the largest value.
fn argmax(x: &[f32]) -> usize {
    x.iter().enumerate().fold(0, |best, (i, &v)| if v > x[best] { i } else { best })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_passes_cost_nothing() {
        let logits = [1.0, 2.0, 0.5, -1.0, 0.0, 3.0];
        let q = quality(&logits, &logits, &[0, 2]).unwrap();
        assert_eq!((q.kl, q.top1), (0.0, 1.0));
    }

    #[test]
    fn kl_top1_and_loss_by_hand() {
        // Two positions over a vocabulary of 2. Position 0: full logits [0, 0] -> p = (1/2, 1/2);
        // judged [ln 3, 0] -> q = (3/4, 1/4). KL = 1/2 ln(2/3) + 1/2 ln(2) = 1/2 ln(4/3) = 0.143841.
        // Position 1: both [0, ln 3] -> KL 0. Mean KL = 0.0719205.
        // Top-1: position 0's full row is a tie (first index, 0), judged picks 0: agree; position 1
        // agrees: 1.0. Loss: the text is [1, 1]; position 0 predicts token 1 with q = 1/4: ln 4 =
        // 1.386294 over one predicted token.
        let l3 = 3f32.ln();
        let q = quality(&[0.0, 0.0, 0.0, l3], &[l3, 0.0, 0.0, l3], &[1, 1]).unwrap();
        assert!((q.kl - 0.5 * (4f64 / 3.0).ln() / 2.0).abs() < 1e-7, "{q:?}");
        assert_eq!(q.top1, 1.0);
        assert!((q.loss.unwrap() - 4f64.ln()).abs() < 1e-7, "{q:?}");
        // Judged [0, ln 3] at position 0 instead: top-1 1 against the full row's 0, agreement 1/2.
        let q = quality(&[0.0, 0.0, 0.0, l3], &[0.0, l3, 0.0, l3], &[1, 1]).unwrap();
        assert_eq!(q.top1, 0.5);
        // One token: nothing predicted, no loss; mismatched sizes: nothing.
        assert_eq!(quality(&[0.0, 1.0], &[0.0, 1.0], &[1]).unwrap().loss, None);
        assert_eq!(quality(&[0.0, 1.0], &[0.0], &[1]), None);
        // A next token outside the vocabulary is no measurement.
        assert_eq!(quality(&[0.0, 0.0, 0.0, 0.0], &[0.0; 4], &[0, 7]), None);
    }

    #[test]
    fn head_change_by_hand() {
        // Two tokens: full [[1, 0], [0.75, 0.25]], judged [[1, 0], [0.25, 0.75]]. Causal pairs: 3.
        // |diffs| 0, 0.5, 0.5: max 0.5, mean 1/3; row 1's top key moved from 0 to 1.
        let h = head_change(&[1.0, 0.0, 0.75, 0.25], &[1.0, 0.0, 0.25, 0.75], 2).unwrap();
        assert_eq!(h.max_abs, 0.5);
        assert!((h.mean_abs - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(h.top_key_changed, 1);
        assert_eq!(head_change(&[1.0], &[1.0, 0.0], 1), None);
    }

    #[test]
    fn relative_error_by_hand() {
        // ‖(3, 4)‖ = 5; the difference (0, 1) has norm 1: 0.2.
        assert!((relative_error(&[3.0, 4.0], &[3.0, 5.0]) - 0.2).abs() < 1e-12);
        assert_eq!(relative_error(&[0.0], &[0.0]), 0.0);
    }

    /// The README's quantisation table: the shipped model over the text its eviction table is measured
    /// on (`cargo test --lib kv_quality -- --nocapture` prints its rows), at the memory view's default
    /// G = 32 and R = 16.
    #[test]
    fn the_shipped_model_over_each_scheme_s_cache() {
        use crate::lm::forward::{CpuPass, OWNERSHIP_RULES, forward};
        use crate::lm::shipped_model::{shipped, shipped_tokenizer};
        use crate::model::kv_quant::KvScheme;
        let ck = shipped();
        let tokenizer = shipped_tokenizer();
        let ids = tokenizer.encode(OWNERSHIP_RULES);
        let full = forward(&ck, &ids).unwrap().logits;
        // Each row as the README rounds it: bytes, KL to three digits, top-1 and loss.
        let readme = [
            (2048, "0.00e0", "1.000", "3.5691"),
            (1024, "1.68e-7", "1.000", "3.5692"),
            (512, "2.07e-3", "0.980", "3.5588"),
            (512, "7.57e-3", "0.939", "3.5845"),
            (576, "5.77e-5", "1.000", "3.5675"),
            (320, "1.16e-2", "0.929", "3.5809"),
            (192, "3.51e-1", "0.694", "3.8105"),
            (320, "9.24e-3", "0.929", "3.5975"),
            (192, "2.42e-1", "0.735", "3.7907"),
        ];
        assert_eq!(ids.len(), 98, "the README's table is over 98 tokens");
        let schemes = KvScheme::compared(32, 16);
        assert_eq!(schemes.len(), readme.len());
        for (scheme, want) in schemes.into_iter().zip(readme) {
            let mut pass = CpuPass::new(&ck, &ids, ids.len()).unwrap().with_kv_scheme(scheme);
            while pass.step() {}
            let q = quality(&full, &pass.finish().logits, &ids).unwrap();
            let bytes = scheme.bytes_per_token(4, 2, 32);
            println!("| {} | {bytes} | {:.3e} | {:.3} | {:.4} |", scheme.name(), q.kl, q.top1, q.loss.unwrap());
            let got = (bytes, format!("{:.2e}", q.kl), format!("{:.3}", q.top1), format!("{:.4}", q.loss.unwrap()));
            assert_eq!(got, (want.0, want.1.into(), want.2.into(), want.3.into()), "{}", scheme.name());
        }
    }
}
