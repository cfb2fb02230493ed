//! Figures of the backward view, for the explorer's head and layer: the chosen row's softmax Jacobian
//! (its largest probability, that key's diagonal entry, the trace, the flat row's trace) and what the
//! layer's attention backward costs (the FLOPs by the FlashAttention convention, and the bytes of the
//! probabilities it recomputes instead of storing).

use super::sources::explorer;
use super::written::{Figure, Unit, number, whole};
use crate::attention::AttentionShape;
use crate::model::Model;
use crate::views::backward::jacobian::row_jacobian;
use crate::views::registry::Settings;

pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    match name {
        "jacobian_keys" | "jacobian_top_prob" | "jacobian_top_diagonal" | "jacobian_trace" | "jacobian_flat_trace" => {
            jacobian_figure(name, state, model)
        }
        _ => cost_figure(name, state, model),
    }
}

fn jacobian_figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let row = row_jacobian(state, model).ok()?;
    let top = row.facts.top_prob;
    Some(match name {
        "jacobian_keys" => whole(row.keys.len() as u128, Unit::Count),
        "jacobian_top_prob" => number(top, Unit::Number),
        // ∂p_i/∂s_i = p_i (1 − p_i): the diagonal entry of the likeliest key.
        "jacobian_top_diagonal" => number(top * (1.0 - top), Unit::Number),
        "jacobian_trace" => number(row.facts.trace, Unit::Number),
        _ => number(row.flat.trace, Unit::Number),
    })
}

fn cost_figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let request = explorer(state, model)?;
    let layout = &request.layout;
    let shape = AttentionShape {
        h_q: layout.n_q_heads,
        h_kv: layout.n_kv_heads,
        n_q: request.n_q(),
        n_kv: request.n_kv(),
        d: layout.head_dim,
    };
    // The forward's two n × n × d products (Q·Kᵀ, P·V) are 4 d FLOPs a pair; the backward's five
    // (S again, dV, dP, dQ, dK) are 2.5 times that.
    let forward = 4 * u128::from(shape.d) * u128::from(shape.attended_pairs(request.mask));
    let (unit, value) = match name {
        "backward_forward_flops" => (Unit::Flops, forward),
        "backward_flops" => (Unit::Flops, forward * 5 / 2),
        "backward_probs_bytes" => {
            (Unit::Bytes, u128::from(shape.h_q) * u128::from(shape.n_q) * u128::from(shape.n_kv) * 4)
        }
        "backward_lse_bytes" => (Unit::Bytes, u128::from(shape.h_q) * u128::from(shape.n_q) * 4),
        _ => return None,
    };
    Some(whole(value, unit))
}

#[cfg(test)]
mod tests {
    use super::super::tests::exact;

    #[test]
    fn gpt2_layer_costs_by_hand() {
        // GPT-2 small, 12 heads of 64, 8 tokens, causal: 8·9/2 = 36 pairs a head, 432 in all.
        // Forward 4 × 64 × 432 = 110,592 FLOPs; backward 2.5 × that = 276,480.
        let q = "model=gpt2-small&n=8&mask=causal";
        assert_eq!(exact("backward_forward_flops", q), "110592");
        assert_eq!(exact("backward_flops", q), "276480");
        // P: 12 × 8 × 8 × 4 B = 3,072; the log-sum-exp the forward keeps: 12 × 8 × 4 B = 384.
        assert_eq!(exact("backward_probs_bytes", q), "3072");
        assert_eq!(exact("backward_lse_bytes", q), "384");
    }

    #[test]
    fn the_jacobian_figures_agree_with_each_other() {
        let q = "model=gpt2-small&n=8&mask=causal";
        let number = |name: &str| exact(name, q).parse::<f64>().unwrap();
        // The last row sees all 8 keys; a flat row over them has trace 1 − 1/8 = 0.875.
        assert_eq!(exact("jacobian_keys", q), "8");
        assert_eq!(exact("jacobian_flat_trace", q), "0.875");
        let p = number("jacobian_top_prob");
        assert!((number("jacobian_top_diagonal") - p * (1.0 - p)).abs() < 1e-4);
        // A row's trace 1 − Σp² is at most the flat row's and at least the top key's p(1 − p).
        let trace = number("jacobian_trace");
        assert!(trace <= 0.875 + 1e-9 && trace + 1e-4 >= p * (1.0 - p), "{trace} {p}");
    }
}
