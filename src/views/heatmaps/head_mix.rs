//! How the output projection W_O mixes a layer's heads. The layer's attention output for token `t` is
//! `concat(O_0[t], …, O_{h-1}[t]) · W_O`; since W_O's rows come in one block of `d` per head, that is
//! the sum over heads of `O_h[t] · W_O[h·d .. (h+1)·d, :]`: every head adds a vector of its own.
//! [`head_mix`] computes those vectors for one query token from the explorer's seeded inputs and their
//! seeded W_O, and how large each one is.

use super::step_through::step_through;
use crate::attention::layer_inputs::{D_MODEL, LayerInputs};
use crate::attention::{AttentionProblem, AttentionShape};
use crate::model::Mask;

/// Most multiply-adds one mixing may cost (the projections of every head dominate); longer inputs are
/// refused with a reason rather than freezing the page.
pub const MIX_WORK_MAX: u64 = 1 << 28;

/// What one query head adds to the token's output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadShare {
    pub head: u32,
    /// Euclidean norm of `O_h[t] · W_O`'s block for head `h`.
    pub norm: f64,
    /// `norm` over the sum of every head's norm (the shares add up to 1).
    pub share: f64,
}

/// Every head's part in one token's attention output.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadMix {
    /// The query token (row), from 0.
    pub row: usize,
    /// One entry per query head of the layer, in head order.
    pub heads: Vec<HeadShare>,
    /// The token's output, `concat(O_h[t]) · W_O` (the sum of every head's vector), `D_MODEL` wide.
    pub output: Vec<f64>,
}

impl HeadMix {
    /// The head that adds the largest vector (the lowest such head on a tie).
    pub fn top(&self) -> Option<HeadShare> {
        self.heads.iter().copied().reduce(|best, h| if h.norm > best.norm { h } else { best })
    }

    pub fn output_norm(&self) -> f64 {
        norm(&self.output)
    }
}

/// The row the mixing reads: the requested query token, the last one when none is asked for or the
/// one asked for lies past the text.
pub fn mix_row(requested: Option<u32>, n_q: usize) -> usize {
    let last = n_q.saturating_sub(1);
    requested.map_or(last, |r| (r as usize).min(last))
}

/// Sums what each head adds: `per_head` holds, per query head, its output row `O_h[t]` (`d` wide) and
/// its block of W_O (`[d, d_out]`).
pub fn mix(row: usize, per_head: &[(u32, Vec<f64>, Vec<f32>)], d_out: usize) -> HeadMix {
    let mut output = vec![0.0; d_out];
    let mut norms = Vec::with_capacity(per_head.len());
    for (head, o, w) in per_head {
        let mut added = vec![0.0; d_out];
        for (c, &oc) in o.iter().enumerate() {
            for (a, &wv) in added.iter_mut().zip(&w[c * d_out..][..d_out]) {
                *a += oc * f64::from(wv);
            }
        }
        output.iter_mut().zip(&added).for_each(|(y, a)| *y += a);
        norms.push((*head, norm(&added)));
    }
    let total: f64 = norms.iter().map(|(_, n)| n).sum();
    let heads = norms
        .into_iter()
        .map(|(head, norm)| HeadShare { head, norm, share: if total > 0.0 { norm / total } else { 0.0 } })
        .collect();
    HeadMix { row, heads, output }
}

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// Every query head's part in the output of query token `row` (the last token when past the text),
/// under `mask` (the explorer's mask for the layer; cross-attention sees every key).
pub fn head_mix(inputs: &LayerInputs, mask: Mask, row: usize) -> Result<HeadMix, String> {
    let layout = &inputs.layout;
    let (n_q, n_kv) = (inputs.q_tokens().len(), inputs.kv_tokens().len());
    if n_q == 0 || n_kv == 0 {
        return Err("Type a sentence to see how the heads mix.".into());
    }
    let d = layout.head_dim as usize;
    let work = u64::from(layout.n_q_heads) * (n_q + n_kv) as u64 * (D_MODEL * d) as u64;
    if work > MIX_WORK_MAX {
        return Err(format!(
            "{n_q} tokens over {} heads is too much to mix here: try a shorter text.",
            layout.n_q_heads
        ));
    }
    let row = row.min(n_q - 1);
    // In self-attention query `row` sits at position `row`; a causal-type mask shows it no key past
    // that, so the keys are cut there and the query is the last row of its own keys.
    let (mask, keys) = match (inputs.is_cross(), mask) {
        (true, _) => (Mask::Full, n_kv),
        (false, Mask::Full) => (Mask::Full, n_kv),
        (false, m) => (m, row + 1),
    };
    let mut kv = None::<(u32, Vec<f32>, Vec<f32>)>;
    let mut per_head = Vec::with_capacity(layout.n_q_heads as usize);
    for h in 0..layout.n_q_heads {
        let g = layout.kv_head(h);
        if kv.as_ref().is_none_or(|(cached, _, _)| *cached != g) {
            let (k, v) = inputs.kv_head(g);
            kv = Some((g, k, v));
        }
        let Some((_, k, v)) = &kv else { continue };
        let q = &inputs.q_head(h)[row * d..][..d];
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 1, n_kv: keys as u32, d: d as u32 };
        let scale = 1.0 / (d as f32).sqrt();
        let steps = step_through(&AttentionProblem::new(q, &k[..keys * d], &v[..keys * d], shape, mask, scale));
        per_head.push((h, steps.out, inputs.w_o_block(h)));
    }
    Ok(mix(row, &per_head, D_MODEL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::inputs::word_tokens;
    use crate::attention::layer_inputs::LayerLayout;
    use crate::catalog::presets::preset;
    use crate::cpu::reference;

    #[test]
    fn two_heads_by_hand() {
        // d = 1, d_out = 2. Head 0 outputs 2 with W_O block (1, 0): it adds (2, 0), norm 2.
        // Head 1 outputs 1 with block (0, 3): it adds (0, 3), norm 3. Output (2, 3); shares 2/5 and 3/5.
        let m = mix(4, &[(0, vec![2.0], vec![1.0, 0.0]), (1, vec![1.0], vec![0.0, 3.0])], 2);
        assert_eq!(m.output, vec![2.0, 3.0]);
        assert_eq!(
            m.heads,
            vec![HeadShare { head: 0, norm: 2.0, share: 0.4 }, HeadShare { head: 1, norm: 3.0, share: 0.6 }]
        );
        assert_eq!((m.row, m.top().map(|h| h.head)), (4, Some(1)));
        assert_eq!(m.output_norm(), 13f64.sqrt());
        // Heads that cancel: (1, 0) and (-1, 0) add nothing together, yet each has norm 1.
        let cancel = mix(0, &[(0, vec![1.0], vec![1.0, 0.0]), (1, vec![-1.0], vec![1.0, 0.0])], 2);
        assert_eq!((cancel.output_norm(), cancel.heads[1].share), (0.0, 0.5));
    }

    #[test]
    fn rows_past_the_text_read_the_last_token() {
        assert_eq!((mix_row(None, 6), mix_row(Some(2), 6), mix_row(Some(9), 6), mix_row(None, 0)), (5, 2, 5, 0));
    }

    #[test]
    fn equals_concatenating_the_heads_and_multiplying_by_w_o() {
        // GPT-2 small (12 heads of 64) and Llama 3 8B (GQA: 32 query heads over 8 KV heads), causal.
        for (id, mask) in [("gpt2-small", Mask::Causal), ("llama-3-8b", Mask::Sliding { window_tokens: 3 })] {
            let layout = LayerLayout::of(preset(id).unwrap(), 1);
            let (h_q, d) = (layout.n_q_heads, layout.head_dim as usize);
            let inputs = LayerInputs::new(layout.clone(), word_tokens("the cat sat on the mat"), None, 5, true);
            let row = 3;
            let m = head_mix(&inputs, mask, row).unwrap();
            // The whole layer through the CPU reference, then row 3 of concat(O) · W_O.
            let q: Vec<f32> = (0..h_q).flat_map(|h| inputs.q_head(h)).collect();
            let (mut k, mut v) = (Vec::new(), Vec::new());
            for g in 0..layout.n_kv_heads {
                let (kg, vg) = inputs.kv_head(g);
                k.extend(kg);
                v.extend(vg);
            }
            let shape = AttentionShape { h_q, h_kv: layout.n_kv_heads, n_q: 6, n_kv: 6, d: d as u32 };
            let o =
                reference::flash_attention(&AttentionProblem::new(&q, &k, &v, shape, mask, 1.0 / (d as f32).sqrt())).o;
            let mut expected = vec![0.0f64; D_MODEL];
            for h in 0..h_q as usize {
                let w = inputs.w_o_block(h as u32);
                for c in 0..d {
                    let oc = f64::from(o[(h * 6 + row) * d + c]);
                    for (e, &wv) in expected.iter_mut().zip(&w[c * D_MODEL..][..D_MODEL]) {
                        *e += oc * f64::from(wv);
                    }
                }
            }
            let worst = m.output.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(worst < 1e-4, "{id}: {worst}");
            assert_eq!(m.heads.len(), h_q as usize);
            assert!((m.heads.iter().map(|h| h.share).sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn cross_attention_and_long_inputs() {
        let layout = LayerLayout::of(preset("gpt2-small").unwrap(), 0);
        let cross = LayerInputs::new(layout.clone(), word_tokens("a b"), Some(word_tokens("x y z")), 1, false);
        assert_eq!(head_mix(&cross, Mask::Causal, 7).unwrap().row, 1);
        let long: Vec<String> = (0..30_000).map(|i| format!("w{}", i % 50)).collect();
        let err = head_mix(&LayerInputs::new(layout, long, None, 1, false), Mask::Causal, 0).unwrap_err();
        assert!(err.contains("too much"), "{err}");
    }
}
