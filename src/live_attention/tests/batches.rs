//! A batch's inputs and maps: query chunks of cross-attention put back in order, a stopped batch,
//! each head's map made with its group, tokens and pooled rows.

use super::*;
use crate::attention::pooled::PooledMap;
use crate::live_attention::batch::{HeadMaker, KCache, Steering, batch_inputs, head_values};

fn words(text: &str) -> Arc<Vec<String>> {
    Arc::new(text.split(' ').map(str::to_owned).collect())
}

/// "the cat sat on mats" attending to "le chat": 5 queries over 2 keys, Llama 3 8B layer 0.
fn cross_request() -> Request {
    Request {
        tokens: words("the cat sat on mats"),
        kv_tokens: Some(words("le chat")),
        mask: Mask::Full,
        ..llama_request(5, vec![0, 1], (5, 5))
    }
}

fn cross_inputs() -> LayerInputs {
    cross_request().inputs()
}

fn steer() -> Steering<'static> {
    Steering { keep_going: &|| true, progress: &|_| {}, now_ms: &|| 0.0 }
}

/// Query `i`'s softmax over two keys, by hand in f64: 1 / (1 + e^(s_other - s_this)).
fn two_key_softmax(q: &[f32], k: &[f32], d: usize, i: usize) -> [f64; 2] {
    let dot = |j: usize| (0..d).map(|c| f64::from(q[i * d + c]) * f64::from(k[j * d + c])).sum::<f64>();
    let (s0, s1) = (dot(0) / (d as f64).sqrt(), dot(1) / (d as f64).sqrt());
    [1.0 / (1.0 + (s1 - s0).exp()), 1.0 / (1.0 + (s0 - s1).exp())]
}

#[test]
fn chunks_of_queries_put_together_equal_the_whole_rows() {
    // 5 queries over 2 keys run as three calls (rows 0-1, 2-3, 4); their rows, put back in order,
    // are each query's softmax over both keys.
    let engine = Engine::Cpu { reason: "test".into() };
    let inputs = cross_inputs();
    let batch = pollster::block_on(batch_inputs(&inputs, &[0, 1], &mut KCache::new(), &|| true)).unwrap();
    let values =
        pollster::block_on(head_values(&engine, &inputs, &batch, Mask::Full, MapOutput::Exact, &mut 0.0, &steer()))
            .unwrap();
    for (slot, h) in [0u32, 1].into_iter().enumerate() {
        let (q, k) = (inputs.q_head(h), inputs.k_head(inputs.layout.kv_head(h)));
        assert_eq!(values[slot].len(), 10);
        for i in 0..5 {
            let want = two_key_softmax(&q, &k, 128, i);
            for j in 0..2 {
                let got = f64::from(values[slot][i * 2 + j]);
                assert!((got - want[j]).abs() < 1e-6, "head {h} row {i} key {j}: {got} vs {}", want[j]);
            }
        }
    }
}

#[test]
fn a_stopped_batch_returns_what_it_has() {
    let engine = Engine::Cpu { reason: "test".into() };
    let inputs = cross_inputs();
    let batch = pollster::block_on(batch_inputs(&inputs, &[2], &mut KCache::new(), &|| true)).unwrap();
    let stop = Steering { keep_going: &|| false, ..steer() };
    // A newer request stops the inputs too, before their first piece, and nothing is cached.
    let mut cache = KCache::new();
    assert!(pollster::block_on(batch_inputs(&inputs, &[2], &mut cache, &|| false)).is_none());
    assert!(cache.is_empty());
    let values =
        pollster::block_on(head_values(&engine, &inputs, &batch, Mask::Full, MapOutput::Exact, &mut 0.0, &stop));
    assert_eq!(values.unwrap(), vec![Vec::<f32>::new()]);
}

#[test]
fn maps_know_their_head_group_tokens_and_pooled_rows() {
    let maker = HeadMaker::new(Arc::new(cross_inputs()), &cross_request());
    let exact = maker.make(5, vec![0.5; 10], MapOutput::Exact);
    // Llama 3 8B: 4 query heads per KV head, so head 5 reads KV head 1.
    assert_eq!((exact.kv_head, exact.rows, exact.cols, exact.q_offset), (1, 5, 2, 0));
    assert_eq!((exact.row_tokens.len(), exact.col_tokens[1].as_str()), (5, "chat"));
    // Pooled in three query chunks of 2, 2 and 1 rows over 2 columns: 5 rows came back.
    let map = PooledMap::whole(5, 5, 2, Pool::Mean);
    let pooled = maker.make(0, vec![0.5; 10], MapOutput::Pooled(map));
    assert_eq!((pooled.rows, pooled.cols, pooled.pooled), (5, 2, Some(Pool::Mean)));
}
