//! What lessons 04 and 21 say of the shipped model's heads, checked on the very texts and layers
//! their steps show: the app's CPU forward pass over the shipped weights, scored as the page scores
//! them. A retrained model that behaves otherwise fails here until the lessons change too.

use super::lesson;
use crate::lm::bpe::Tokenizer;
use crate::lm::forward::forward;
use crate::lm::forward_tests::{shipped, shipped_file};
use crate::lm::head_scores::HeadScores;

/// One step's text, as the model's token ids and pieces, and its layer's heads' scores and maps.
struct StepHeads {
    ids: Vec<u32>,
    pieces: Vec<String>,
    scores: Vec<HeadScores>,
    /// [head] -> (tokens x tokens) probabilities.
    probs: Vec<Vec<f32>>,
}

fn step_heads(lesson_id: &str, step: usize) -> StepHeads {
    let step = &lesson(lesson_id).unwrap().steps[step - 1];
    let param = |key: &str| step.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap();
    let (text, layer) = (param("text"), param("layer").parse::<usize>().unwrap());
    let tokenizer = Tokenizer::from_json(&String::from_utf8(shipped_file("tokenizer.json")).unwrap()).unwrap();
    let ids = tokenizer.encode(&text);
    let pieces = ids.iter().map(|&id| tokenizer.decode(&[id])).collect();
    let ck = shipped();
    let pass = forward(&ck, &ids).unwrap();
    let heads = 0..ck.model.n_q_heads as usize;
    let probs: Vec<Vec<f32>> = heads.map(|h| pass.head(layer, h).to_vec()).collect();
    let scores = probs.iter().map(|p| HeadScores::measure(p, &ids, ck.layers[layer].mask)).collect();
    StepHeads { ids, pieces, scores, probs }
}

fn earns(scores: &HeadScores, label: &str) -> bool {
    scores.labels().contains(&label)
}

#[test]
fn lesson_04_step_3_head_7_of_layer_0_looks_one_token_back() {
    let step = step_heads("many-heads", 3);
    let head = &step.scores[7];
    assert!(earns(head, "previous-token") && earns(head, "local"), "{head:?}");
}

#[test]
fn lesson_21_layer_0_has_a_previous_token_head_and_a_head_on_the_token_itself() {
    let step = step_heads("trained-heads", 1);
    assert!(earns(&step.scores[7], "previous-token") && earns(&step.scores[7], "local"), "{:?}", step.scores[7]);
    let step = step_heads("trained-heads", 2);
    let head = &step.scores[4];
    assert!(earns(head, "local") && !earns(head, "previous-token"), "{head:?}");
    assert!(head.previous.unwrap() < 0.05, "{head:?}");
    // "its diagonal is lit": a token's weight on itself is nearly all of it.
    let t = step.ids.len();
    let on_itself = (0..t).map(|q| f64::from(step.probs[4][q * t + q])).sum::<f64>() / t as f64;
    assert!(on_itself > 0.9, "head 4 on itself: {on_itself}");
}

#[test]
fn lesson_21_layer_2_has_four_induction_heads_on_an_unseen_repeated_sentence() {
    let step = step_heads("trained-heads", 3);
    let inducting: Vec<usize> = (0..8).filter(|&h| earns(&step.scores[h], "induction")).collect();
    assert_eq!(inducting, [4, 5, 6, 7], "{:?}", step.scores);
    assert!(step.scores[..4].iter().all(|s| s.induction.unwrap() < 0.1), "{:?}", step.scores);
    // The second "man" looks most at the "sat" that followed the first.
    let man: Vec<usize> = (0..step.ids.len()).filter(|&i| step.pieces[i] == " man").collect();
    assert_eq!(man.len(), 2, "{:?}", step.pieces);
    let t = step.ids.len();
    let row = &step.probs[7][man[1] * t..][..t];
    let top = (0..t).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
    assert_eq!((top, step.pieces[top].as_str()), (man[0] + 1, " sat"));
    // No training text holds the sentence, so what the heads find they find in the text itself.
    let corpus = format!("{}/tools/train/data/corpus/train.txt", env!("CARGO_MANIFEST_DIR"));
    assert!(!std::fs::read_to_string(corpus).unwrap().contains("man sat under a tree"));
}

#[test]
fn the_model_copies_the_word_that_followed_last_time() {
    // The browser test `trained_model` asks the page the same.
    let once = "The old man sat under a tree and read a long letter from his brother.";
    let tokenizer = Tokenizer::from_json(&String::from_utf8(shipped_file("tokenizer.json")).unwrap()).unwrap();
    let ids = tokenizer.encode(&format!("{once} The old man"));
    let pass = forward(&shipped(), &ids).unwrap();
    let logits = pass.logits_at(ids.len() - 1);
    let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
    assert_eq!(tokenizer.decode(&[best as u32]), " sat");
}

#[test]
fn lesson_21_layer_1_head_4_is_a_sink_on_rust_prose_only_and_the_last_text_repeats_no_token() {
    let step = step_heads("trained-heads", 4);
    let sinks: Vec<usize> = (0..8).filter(|&h| earns(&step.scores[h], "sink")).collect();
    assert_eq!(sinks, [4], "{:?}", step.scores);
    // "paste the sentence about the old man ... below the sink threshold"
    let old_man = step_heads("trained-heads", 1);
    assert_eq!(old_man.ids.len(), 20);
    let on_old_man = {
        let ck = shipped();
        let pass = forward(&ck, &old_man.ids).unwrap();
        HeadScores::measure(pass.head(1, 4), &old_man.ids, ck.layers[1].mask)
    };
    assert!(!earns(&on_old_man, "sink"), "{on_old_man:?}");
    let step = step_heads("trained-heads", 5);
    assert!(step.scores.iter().all(|s| s.induction.is_none()), "{:?}", step.pieces);
}
