//! Property tests of everything that reads untrusted input: the link (query string → app state), the
//! compact model code (`cfg=`), an imported Hugging Face `config.json`, head lists, layer schedules,
//! lesson Markdown, and a tokenizer's `tokenizer.json` and the text it encodes. Whatever arrives, parsing must not panic, must not allocate in proportion to
//! a number written in the input (only to the input's length), and must keep its outputs inside the
//! documented limits. A state read from a link must write a link that reads back to the same state,
//! and that link must be a fixed point (written again, byte for byte the same).
//!
//! The query parser, the `cfg` decoder and the config importer get 10,000 cases each,
//! the rest fewer; the file runs in seconds unoptimised. Raise `FUZZ_CASES`
//! (a multiplier) for a longer hunt: `FUZZ_CASES=50 cargo test --test fuzz`.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Number, Value, json};

use attention_lab::catalog::{all_presets, import_hf_value, parse_config_json};
use attention_lab::lm::bpe::{Tokenizer, WordPattern};
use attention_lab::lm::checkpoint::Checkpoint;
use attention_lab::lm::forward::forward;
use attention_lab::model::config::bounds;
use attention_lab::model::encoding::MAX_ENCODED_LEN;
use attention_lab::model::{EncodingError, LayerKind, Model, Schedule, decode_model, encode_model};
use attention_lab::state::{AppState, WRITE_ORDER};
use attention_lab::views::heatmaps::params::{HeadSelection, MAX_TEXT_CHARS};
use attention_lab::views::lesson::format::parse_lesson;
use attention_lab::views::lesson::markup;
use attention_lab::views::lesson::walk::step_state;
use attention_lab::views::link::{MAX_LINK_PAIRS, encode_component};

/// `cases` property cases, times the `FUZZ_CASES` multiplier; nothing written to disk.
fn config(cases: u32) -> Config {
    let factor = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1u32);
    Config { cases: cases.saturating_mul(factor.max(1)), failure_persistence: None, ..Config::default() }
}

/// Numbers as a hostile link or config writes them: zero, negative, huge, fractional, not numbers.
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..70).prop_map(|n| n.to_string()),
        (0u32..20).prop_map(|p| (1u64 << p).to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[0-9]{15,30}",
        Just("-0".to_string()),
        Just("+7".to_string()),
        Just("007".to_string()),
        Just("1e999".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("24.5".to_string()),
        Just("0.0001".to_string()),
        Just("".to_string()),
    ]
}

/// Head lists: single heads and ranges, some of them enormous or reversed.
fn heads_text() -> impl Strategy<Value = String> {
    let bound = prop_oneof![0u32..40, Just(16_383), Just(16_384), Just(u32::MAX), any::<u32>()];
    let part = prop_oneof![
        bound.clone().prop_map(|a| a.to_string()),
        (bound.clone(), bound).prop_map(|(a, b)| format!("{a}-{b}")),
        Just("x".to_string()),
        Just(String::new()),
    ];
    prop_oneof![Just("all".to_string()), prop::collection::vec(part, 0..8).prop_map(|p| p.join(","))]
}

/// Values that some key accepts, so that parsed links get far past the first refusal.
fn known_value() -> impl Strategy<Value = String> {
    let words = "heatmaps kv compare lesson bench full causal sliding chunked fp32 fp16 bf16 fp8 int4 int2 on off 1 0 \
                 true log linear char word max mean last cpu auto kv-cache one-head masks rope sliding-hybrid gqa \
                 nope panic hooks 32 64 128 256 mha,gqa8,mqa mla512r64,sw4096,hybrid5w1024,xl2 published,kveqv";
    let presets: Vec<String> = all_presets().iter().map(|p| p.id.to_string()).collect();
    let codes: Vec<String> = all_presets().iter().map(|p| encode_model(&p.model)).collect();
    prop_oneof![
        prop::sample::select(words.split_whitespace().map(String::from).collect::<Vec<_>>()),
        prop::sample::select(presets),
        prop::sample::select(codes),
    ]
}

/// Any value: known, numeric, head lists, arbitrary Unicode, or text around the length limit.
fn any_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => known_value(),
        3 => number_text(),
        1 => heads_text(),
        2 => "\\PC{0,12}",
        1 => any::<String>(),
        1 => (MAX_TEXT_CHARS - 3..MAX_TEXT_CHARS + 3, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(n)),
    ]
}

/// A key of the link (almost always a real one, in any order, repeated or not).
fn any_key() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => prop::sample::select(WRITE_ORDER.to_vec()).prop_map(String::from),
        1 => Just("debug".to_string()),
        1 => "[a-zA-Z%&=+]{0,6}",
    ]
}

fn query_of(pairs: &[(String, String)], question_mark: bool) -> String {
    let body: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v))).collect();
    format!("{}{}", if question_mark { "?" } else { "" }, body.join("&"))
}

/// Lessons a link may open (and one that does not exist).
const LESSON_IDS: &[&str] = &["one-head", "masks", "rope", "kv-cache", "gqa", "sliding-hybrid", "benchmark", "nope"];

/// What a state read from any link must satisfy, whatever the link said.
fn assert_within_limits(state: &AppState, notices: usize, pairs_in_link: usize) -> Result<(), TestCaseError> {
    prop_assert!(state.input.text.chars().count() <= MAX_TEXT_CHARS);
    prop_assert!(state.explorer.src.as_ref().is_none_or(|s| s.chars().count() <= MAX_TEXT_CHARS));
    let model = state.resolved_model();
    prop_assert!(model.validate().is_ok());
    prop_assert!(state.model.layer < model.n_layers());
    if let HeadSelection::List(list) = &state.explorer.heads {
        prop_assert!(!list.is_empty() && list.len() <= model.n_q_heads as usize);
        prop_assert!(list.windows(2).all(|w| w[0] < w[1]) && list.iter().all(|&h| h < model.n_q_heads));
    }
    prop_assert!(state.explorer.focus.is_none_or(|f| f < model.n_q_heads));
    // One notice per pair read at most, one for the pairs dropped, and the checks after reading:
    // lesson, layer, heads and focus.
    prop_assert!(notices <= pairs_in_link.min(MAX_LINK_PAIRS) + 5, "{notices} notices");
    Ok(())
}

proptest! {
    #![proptest_config(config(10_000))]

    /// Any string at all as the query (also unencoded and with stray `%`, `&`, `=`, `?`).
    #[test]
    fn any_query_string_is_read_without_panic(query in prop_oneof![
        any::<String>(),
        "[?&=%+a-z0-9A-F]{0,60}",
        prop::collection::vec(("[a-z]{1,8}", "[^&]{0,10}"), 0..10)
            .prop_map(|p| p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")),
    ]) {
        let (state, notices) = AppState::from_query(&query);
        assert_within_limits(&state, notices.len(), query.split('&').count())?;
        let written = state.to_query();
        prop_assert_eq!(AppState::from_query(&written).0.to_query(), written);
        let restart = AppState::restart_query(&query);
        prop_assert!(restart.is_empty() || restart.starts_with("view="));
    }

    /// Links of real keys with hostile values: read, written and read back to the same state, and
    /// the written link is a fixed point.
    #[test]
    fn links_of_real_keys_round_trip_to_a_fixed_point(
        lesson_step in prop::option::of((prop::sample::select(LESSON_IDS.to_vec()), number_text())),
        pairs in prop::collection::vec((any_key(), any_value()), 0..14),
        debug in prop::option::of(prop::sample::select(vec!["panic", "hooks", "other"])),
        question_mark in any::<bool>(),
    ) {
        // Half the links open a lesson step, whose link is written differently (just the step, or
        // `edited=on` and the whole state).
        let pairs: Vec<(String, String)> = lesson_step
            .into_iter()
            .flat_map(|(id, step)| [("view", "lesson".to_string()), ("lesson", id.to_string()), ("step", step)])
            .map(|(k, v)| (k.to_string(), v))
            .chain(pairs)
            .chain(debug.map(|d| ("debug".to_string(), d.to_string())))
            .collect();
        let query = query_of(&pairs, question_mark);
        let (state, notices) = AppState::from_query(&query);
        assert_within_limits(&state, notices.len(), pairs.len())?;
        // A text cut to the limit is never cut in silence.
        let cut = pairs.iter().any(|(k, v)| ["text", "src"].contains(&k.as_str()) && v.chars().count() > MAX_TEXT_CHARS);
        if cut {
            prop_assert!(notices.iter().any(|n| n.0.contains(&MAX_TEXT_CHARS.to_string())), "{notices:?}");
        }
        let written = state.to_query();
        let (again, again_notices) = AppState::from_query(&written);
        prop_assert_eq!(&again, &state, "link {} wrote {}", query, written);
        prop_assert!(again_notices.is_empty(), "{written}: {again_notices:?}");
        prop_assert_eq!(again.to_query(), written);
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// Too many pairs: only the first [`MAX_LINK_PAIRS`] are read, and the page says so.
    #[test]
    fn long_links_are_cut_with_a_notice(
        extra in 1usize..400,
        pair in (any_key(), prop_oneof![known_value(), number_text()]),
    ) {
        let pairs = vec![pair; MAX_LINK_PAIRS + extra];
        let (state, notices) = AppState::from_query(&query_of(&pairs, true));
        assert_within_limits(&state, notices.len(), pairs.len())?;
        prop_assert!(notices.iter().any(|n| n.0.contains(&MAX_LINK_PAIRS.to_string())), "{notices:?}");
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// Head lists, with ranges up to `u32::MAX` and many overlapping ones: the list is merged before
    /// it is expanded, so no range is ever materialised beyond the head limit.
    #[test]
    fn head_lists_stay_bounded(
        text in heads_text(),
        repeats in 1usize..2000,
        huge in any::<bool>(),
    ) {
        let text = if huge { vec!["0-16383"; repeats].join(",") + "," + &text } else { text };
        if let Ok(HeadSelection::List(list)) = HeadSelection::parse(&text) {
            prop_assert!(!list.is_empty() && list.len() <= 1 << 14);
            prop_assert!(list.windows(2).all(|w| w[0] < w[1]));
            let param = HeadSelection::List(list.clone()).to_param();
            prop_assert_eq!(HeadSelection::parse(&param), Ok(HeadSelection::List(list)));
        }
    }
}

/// A token of the compact model code, valid or not.
fn code_token() -> impl Strategy<Value = String> {
    let names = [
        "L", "d", "h", "kv", "hd", "keqv", "gkv", "ghd", "gkeqv", "xl", "xg", "fs", "fg", "fm", "v", "tie", "sin",
        "nope", "alibi", "learned", "gnope", "galibi", "gsin", "bqkv", "bo", "bffn", "ln", "np", "qkn", "ple", "ctx",
        "bas", "bal", "bav", "lnw", "lnn", "qknf", "sink",
    ];
    let simple = (prop::sample::select(names.to_vec()), prop_oneof![Just(String::new()), number_text()])
        .prop_map(|(n, v)| format!("{n}{v}"));
    let n = || prop_oneof![0u64..9, Just(64), Just(1024), Just(1 << 20), Just(u64::MAX), any::<u64>()];
    let kind = prop_oneof![
        Just("g".to_string()),
        n().prop_map(|w| format!("w{w}")),
        n().prop_map(|c| format!("c{c}")),
        Just("x".to_string()),
        prop::sample::select(vec!["s", "l", "v", "f"]).prop_map(String::from),
    ];
    let runs = prop::collection::vec((n(), kind), 1..6)
        .prop_map(|r| r.iter().map(|(c, k)| format!("{c}{k}")).collect::<Vec<_>>().join("-"));
    let rope =
        (prop::sample::select(vec!["rope", "grope"]), n(), prop::option::of(n()), any::<bool>(), prop::option::of(n()))
            .prop_map(|(name, theta, p, h, x)| {
                let p = p.map(|p| format!("p{p}")).unwrap_or_default();
                let x = x.map(|x| format!("x{x}")).unwrap_or_default();
                format!("{name}{theta}{p}{}{x}", if h { "h" } else { "" })
            });
    prop_oneof![
        6 => simple,
        2 => runs.prop_map(|r| format!("pat{r}")),
        2 => rope,
        1 => prop::collection::vec(n(), 5).prop_map(|v| format!("mla{}-{}-{}-{}-{}", v[0], v[1], v[2], v[3], v[4])),
        // Recurrent state: conv and state elements, their bytes per element, mixer parameters.
        2 => (prop::sample::select(vec!["ssm", "lin", "cnv"]), prop::collection::vec(n(), 5))
            .prop_map(|(name, v)| format!("{name}{}-{}-{}-{}-{}", v[0], v[1], v[2], v[3], v[4])),
        1 => prop::collection::vec(n(), 6)
            .prop_map(|v| format!("moe{}-{}-{}-{}-{}-{}", v[0], v[1], v[2], v[3], v[4], v[5])),
        1 => "[a-z0-9.-]{0,12}",
    ]
}

/// Compact codes: a mostly valid base (so decoding goes deep) and hostile tokens after it.
fn model_code() -> impl Strategy<Value = String> {
    let base = (1u32..80, prop::sample::select(vec![1u32, 2, 4, 8, 16]), prop::sample::select(vec![8u64, 16, 64, 128]))
        .prop_map(|(l, h, hd)| format!("L{l}.d{}.h{h}", u64::from(h) * hd));
    // Valid layers and heads around a width that may be anything.
    let wide = (1u32..80, prop::sample::select(vec![1u32, 2, 4]), number_text(), any::<bool>())
        .prop_map(|(l, h, d, hd)| format!("L{l}.d{d}.h{h}{}", if hd { ".hd64" } else { "" }));
    prop_oneof![
        1 => wide,
        4 => (base, prop::collection::vec(code_token(), 0..6)).prop_map(|(b, t)| {
            std::iter::once(b).chain(t).collect::<Vec<_>>().join(".")
        }),
        1 => prop::collection::vec(code_token(), 0..10).prop_map(|t| t.join(".")),
        1 => any::<String>(),
    ]
}

/// A decoded (or imported) model's code decodes to the same model and is a fixed point.
fn assert_code_round_trips(model: &Model) -> Result<(), TestCaseError> {
    prop_assert!(model.validate().is_ok());
    let code = encode_model(model);
    prop_assert!(code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'), "{}", code);
    let back = match decode_model(&code) {
        Ok(back) => back,
        // A schedule with a very long repeating unit can outgrow what a link carries.
        Err(EncodingError::TooLong(_)) => return Ok(()),
        Err(e) => return Err(TestCaseError::fail(format!("{code}: {e}"))),
    };
    prop_assert_eq!(encode_model(&back), code);
    Ok(())
}

proptest! {
    #![proptest_config(config(10_000))]

    /// The compact model code (`cfg=`): never a panic, and whatever decodes re-encodes exactly.
    #[test]
    fn model_codes_decode_without_panic_and_round_trip(code in model_code()) {
        if let Ok(model) = decode_model(&code) {
            prop_assert!(code.len() <= MAX_ENCODED_LEN);
            assert_code_round_trips(&model)?;
            let back = decode_model(&encode_model(&model)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back, model);
        }
    }
}

/// Arbitrary JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,10}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A number field as a hostile config writes it: huge, negative, zero, fractional, NaN-like strings.
fn json_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..130).prop_map(Value::from),
        (0u32..24).prop_map(|p| Value::from(1u64 << p)),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![0.0001, 0.25, 0.5, 1.0, 1.5, 2.5, 1e-300, 1e18, 1e19, 1e300, -1.0])
            .prop_map(|f| json!(f)),
        prop::sample::select(vec!["NaN", "inf", "-inf", "1e999", "4096", ""]).prop_map(|s| json!(s)),
        Just(Value::Null),
        Just(json!(true)),
        Just(json!([1, 2])),
    ]
}

/// Fields the importer reads, with the kind of value each expects.
const NUMBER_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "rope_theta",
    "partial_rotary_factor",
    "sliding_window",
    "sliding_window_pattern",
    "attention_chunk_size",
    "num_kv_shared_layers",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "n_routed_experts",
    "num_experts_per_tok",
    "n_shared_experts",
    "moe_intermediate_size",
    "first_k_dense_replace",
    "moe_layer_freq",
    "global_head_dim",
    "num_global_key_value_heads",
    "no_rope_layer_interval",
    "max_window_layers",
    "hidden_size_per_layer_input",
    "rope_local_base_freq",
    // Other families' names: Falcon, ChatGLM, MPT, BLOOM, GPT-NeoX.
    "num_kv_heads",
    "n_head_kv",
    "multi_query_group_num",
    "kv_channels",
    "num_layers",
    "n_layers",
    "n_heads",
    "d_model",
    "n_embed",
    "n_layer",
    "n_head",
    "rotary_pct",
    "rotary_emb_base",
    "rope_ratio",
    "expansion_ratio",
    "padded_vocab_size",
    "seq_length",
    "ffn_hidden_size",
    "max_seq_len",
];

/// Switches and nested sections of those families, set to anything at all.
const OTHER_FIELDS: &[&str] = &[
    "multi_query",
    "new_decoder_architecture",
    "multi_query_attention",
    "alibi",
    "parallel_attn",
    "attn_config",
    "layer_types",
    "intermediate_size",
    "text_config",
];

/// The real configs of every family the tests hold (`tests/data/configs`, not the broken ones).
fn real_configs() -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/configs");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("the test configs").flatten().map(|e| e.path()).collect();
    files.sort();
    files
        .iter()
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("bad-")))
        .map(|p| parse_config_json(&std::fs::read_to_string(p).expect("readable")).expect("valid JSON"))
        .collect()
}

/// A real config of any family with numbers made hostile, fields removed or set to anything.
fn mutated_real_config() -> impl Strategy<Value = Value> {
    let configs = real_configs();
    let count = configs.len();
    let numbers = prop::collection::vec((prop::sample::select(NUMBER_FIELDS.to_vec()), json_number()), 0..4);
    let others = prop::collection::vec((prop::sample::select(OTHER_FIELDS.to_vec()), any_json()), 0..2);
    let removed = prop::collection::vec(any::<prop::sample::Index>(), 0..3);
    (0..count, numbers, others, removed).prop_map(move |(i, numbers, others, removed)| {
        let mut v = configs[i].clone();
        let Some(obj) = v.as_object_mut() else { return v };
        for index in removed {
            if !obj.is_empty() {
                let key = obj.keys().nth(index.index(obj.len())).cloned().expect("an index within the object");
                obj.remove(&key);
            }
        }
        for (k, value) in numbers.into_iter().chain(others) {
            obj.insert(k.to_string(), value);
        }
        v
    })
}

/// A real-looking config (Llama, Gemma, Qwen, Llama 4, GPT-2) with some fields made hostile.
fn hostile_config() -> impl Strategy<Value = Value> {
    let family =
        prop::sample::select(vec!["llama", "gemma3", "gemma2", "qwen2", "llama4_text", "gpt2", "deepseek_v3", "samba"]);
    let overrides = prop::collection::vec((prop::sample::select(NUMBER_FIELDS.to_vec()), json_number()), 0..5);
    let extra = prop::collection::vec(
        (
            prop::sample::select(vec![
                "layer_types",
                "no_rope_layers",
                "rope_scaling",
                "rope_parameters",
                "text_config",
                "attn",
            ]),
            any_json(),
        ),
        0..2,
    );
    let scaling = (prop::sample::select(vec!["linear", "proportional", "yarn", "default"]), json_number())
        .prop_map(|(t, f)| json!({"rope_type": t, "factor": f}));
    (family, overrides, extra, prop::option::of(scaling)).prop_map(|(family, overrides, extra, scaling)| {
        let mut v = json!({
            "model_type": family, "num_hidden_layers": 12, "hidden_size": 256, "num_attention_heads": 8,
            "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 32000, "rope_theta": 10000.0,
            "sliding_window": 64, "use_sliding_window": true, "attention_chunk_size": 128,
        });
        let obj = v.as_object_mut().expect("an object literal");
        if let Some(s) = scaling {
            obj.insert("rope_scaling".into(), s);
        }
        for (k, value) in overrides
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .chain(extra.into_iter().map(|(k, v)| (k.to_string(), v)))
        {
            obj.insert(k, value);
        }
        v
    })
}

proptest! {
    #![proptest_config(config(10_000))]

    /// Hugging Face `config.json` import: any JSON, configs of every family the tests hold with hostile
    /// numbers, fields removed or set to anything, import or fail with an error; an imported model is
    /// valid and its link code round-trips.
    #[test]
    fn imported_configs_never_panic_and_make_valid_links(
        config in prop_oneof![any_json(), hostile_config(), mutated_real_config()]
    ) {
        if let Ok(imported) = import_hf_value(&config) {
            prop_assert!(imported.model.n_layers() <= bounds::MAX_LAYERS);
            assert_code_round_trips(&imported.model)?;
        }
    }
}

/// A layer kind out of a small alphabet, so schedules repeat.
fn layer_kind() -> impl Strategy<Value = LayerKind> {
    prop_oneof![
        Just(LayerKind::Global),
        (1u64..3).prop_map(|w| LayerKind::Sliding { window_tokens: w * 512 }),
        Just(LayerKind::Chunked { chunk_tokens: 8192 }),
    ]
}

/// The period by its definition, checked every way (quadratic: for short schedules only).
fn period_by_hand(layers: &[LayerKind]) -> usize {
    let n = layers.len();
    (1..=n).find(|&p| (0..n).all(|i| layers[i] == layers[i % p])).unwrap_or(n)
}

proptest! {
    #![proptest_config(config(256))]

    /// Layer schedules: the period is the smallest repeating unit, and rebuilding from the unit gives
    /// the schedule back; long schedules (up to the layer limit) take linear time.
    #[test]
    fn schedule_periods_are_exact(
        unit in prop::collection::vec(layer_kind(), 1..12),
        n_layers in 1u32..=bounds::MAX_LAYERS,
        noise in prop::collection::vec((any::<prop::sample::Index>(), layer_kind()), 0..3),
    ) {
        let mut layers = Schedule::periodic(n_layers, &unit.iter().map(|&k| (1, k)).collect::<Vec<_>>()).layers().to_vec();
        for (at, kind) in noise {
            let i = at.index(layers.len());
            layers[i] = kind;
        }
        let schedule = Schedule::from_layers(layers.clone());
        let p = schedule.period();
        prop_assert!((1..=layers.len()).contains(&p));
        prop_assert!((0..layers.len()).all(|i| layers[i] == layers[i % p]));
        if layers.len() <= 200 {
            prop_assert_eq!(p, period_by_hand(&layers));
        }
        prop_assert_eq!(&Schedule::periodic(n_layers, &schedule.unit_runs()), &schedule);
        prop_assert!(!schedule.summary().is_empty());
    }
}

/// Lesson-like Markdown: headings, fences, `set`/`check` blocks, braces and nesting markers.
fn lesson_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("# Title".to_string()),
        Just("## Step".to_string()),
        Just("```set".to_string()),
        Just("```check".to_string()),
        Just("```".to_string()),
        Just("~~~".to_string()),
        Just("view: kv".to_string()),
        Just("answer: {kv_bytes_per_token}".to_string()),
        Just("question: how many?".to_string()),
        Just("choices: a | b".to_string()),
        "[a-z_]{1,8}: [ -~]{0,12}",
        "[ -~]{0,30}",
        "[>*#`{}\\[\\]()!_~ -]{0,30}",
        any::<String>(),
    ];
    let free = prop::collection::vec(line, 0..30).prop_map(|l| l.join("\n"));
    let set_line = prop_oneof![
        8 => (prop::sample::select(WRITE_ORDER.to_vec()), any_value())
            .prop_map(|(k, v)| format!("{k}: {}", v.replace(['\n', '\r'], " "))),
        1 => Just("highlight: head 0".to_string()),
        1 => "[ -~]{0,20}",
    ];
    let answer = prop_oneof![
        2 => Just("answer: {kv_bytes_per_token}".to_string()),
        2 => Just("answer: a\nchoices: a | b".to_string()),
        1 => "answer: [ -~]{0,12}",
    ];
    let check = (answer, prop::collection::vec("[a-z]{1,9}: [ -~]{0,16}", 0..=1)).prop_map(|(answer, extra)| {
        format!("```check\nquestion: q?\n{answer}\nhint: h\nexplain: e\n{}\n```\n", extra.join("\n"))
    });
    let step =
        (prop::collection::vec(set_line, 0..5), prop::collection::vec("[ -~]{0,40}", 0..4), prop::option::of(check))
            .prop_map(|(set, text, check)| {
                let check = check.unwrap_or_default();
                format!("## Step\n\n```set\nview: kv\n{}\n```\n\n{}\n\n{check}", set.join("\n"), text.join("\n"))
            });
    // Lessons shaped as the format asks (so parsing goes as far as the checks), or anything.
    let shaped =
        prop::collection::vec(step, 1..4).prop_map(|steps| format!("# Title\n\nThe goal.\n\n{}", steps.concat()));
    prop_oneof![3 => shaped, 1 => free]
}

proptest! {
    #![proptest_config(config(256))]

    /// The lesson parser (steps, `set` and `check` blocks) and the Markdown it renders: any text
    /// parses or is refused with a reason; figures in the text are well-formed names.
    #[test]
    fn lesson_markdown_never_panics(text in lesson_text(), blowup in 0usize..3, len in 0usize..20_000) {
        // Long runs of what costs a naive parser the most: unclosed braces, nesting, fences.
        let text = match blowup {
            1 => format!("{text}{}", "{".repeat(len)),
            2 => format!("{}{text}", ">".repeat(len * 5)),
            _ => text,
        };
        if let Ok(lesson) = parse_lesson("01-fuzz.md", &text) {
            prop_assert!(!lesson.steps.is_empty());
        }
        let nodes = markup::parse(&text);
        for name in markup::figure_names(&nodes) {
            prop_assert!(!name.is_empty() && name.len() <= 40);
        }
        let _ = markup::plain_text(&nodes);
        for step in parse_lesson("01-fuzz.md", &text).map(|l| l.steps).unwrap_or_default() {
            let (state, _) = step_state(&step);
            prop_assert!(state.resolved_model().validate().is_ok());
        }
    }
}

/// The project's tokenizer.json, parsed once.
fn tokenizer_json() -> &'static Value {
    static JSON: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    JSON.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/train/data/tokenizer.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("tokenizer.json")).expect("tokenizer.json is JSON")
    })
}

/// Text where byte-level BPE is easy to get wrong: whitespace runs, apostrophes, the special token
/// and pieces of it, characters split across tokens; or anything at all.
fn tokenizer_text() -> impl Strategy<Value = String> {
    let part = prop::sample::select(vec![
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\u{a0}",
        "\u{3000}",
        "'s",
        "'S",
        "'ll",
        "'",
        "<|endoftext|>",
        "<|",
        "|>",
        "a",
        "Ab",
        "é",
        "e\u{301}",
        "7",
        "٣",
        "3.14",
        "🦀",
        "数字",
        "fn",
        "{",
        "::",
        "!!",
        "\u{200d}",
        "\u{fffd}",
    ]);
    prop_oneof![prop::collection::vec(part, 0..40).prop_map(|parts| parts.concat()), any::<String>(), "\\PC{0,60}"]
}

/// A stage of a tokenizer's pipeline as real files write them, with hostile settings mixed in:
/// normalizers, pre-tokenizers (the Split patterns read and others), templates with any ids, decoders.
fn pipeline_stage() -> impl Strategy<Value = Value> {
    let text = prop::sample::select(vec!["", " ", "\u{2581}", "a", "aaaa", "<|endoftext|>", "Ġ"]);
    let pattern = prop::sample::select(vec![
        attention_lab::lm::pre_tokenize::LLAMA3_PATTERN,
        attention_lab::lm::pre_tokenize::QWEN2_PATTERN,
        attention_lab::lm::pre_tokenize::GPT2_PATTERN,
        "\\p{N}",
        "",
    ]);
    let scheme = prop::sample::select(vec!["first", "always", "never", "sometimes"]);
    prop_oneof![
        Just(json!({"type": "NFC"})),
        Just(json!({"type": "NFKC"})),
        text.clone().prop_map(|t| json!({"type": "Prepend", "prepend": t})),
        (text.clone(), text.clone()).prop_map(|(p, c)| json!({"type": "Replace", "pattern": {"String": p}, "content": c})),
        (pattern, any::<bool>()).prop_map(|(p, invert)| {
            json!({"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": invert})
        }),
        (any::<bool>(), any::<bool>()).prop_map(|(prefix, regex)| {
            json!({"type": "ByteLevel", "add_prefix_space": prefix, "use_regex": regex})
        }),
        (scheme, any::<bool>(), any::<Option<bool>>()).prop_map(|(scheme, split, prefix)| {
            json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": scheme, "split": split, "add_prefix_space": prefix})
        }),
        Just(json!({"type": "Digits", "individual_digits": true})),
        (prop::collection::vec(any::<u32>(), 0..4), any::<bool>()).prop_map(|(ids, text_first)| {
            let special = json!({"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}});
            let a = json!({"Sequence": {"id": "A", "type_id": 0}});
            let single = if text_first { json!([a, special]) } else { json!([special, a, special]) };
            json!({"type": "TemplateProcessing", "single": single, "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": ids}}})
        }),
        Just(json!({"type": "ByteFallback"})),
        Just(json!({"type": "Fuse"})),
        Just(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0})),
    ]
}

/// The real tokenizer.json with a few parts set to hostile values.
fn mutated_tokenizer_json() -> impl Strategy<Value = String> {
    let pointer = prop::sample::select(vec![
        "",
        "/model",
        "/model/type",
        "/model/dropout",
        "/model/unk_token",
        "/model/byte_fallback",
        "/model/vocab",
        "/model/vocab/Ġthe",
        "/model/vocab/Ġ",
        "/model/vocab/<|endoftext|>",
        "/model/merges",
        "/model/merges/0",
        "/model/merges/0/1",
        "/model/merges/3838",
        "/added_tokens",
        "/added_tokens/0",
        "/added_tokens/0/id",
        "/added_tokens/0/content",
        "/added_tokens/0/normalized",
        "/pre_tokenizer",
        "/pre_tokenizer/use_regex",
        "/decoder",
        "/normalizer",
        "/post_processor",
        "/model/fuse_unk",
        "/model/ignore_merges",
        "/model/continuing_subword_prefix",
        "/version",
    ]);
    let value = prop_oneof![
        any_json(),
        json_number(),
        pipeline_stage(),
        prop::collection::vec(pipeline_stage(), 0..6).prop_map(|stages| {
            json!({"type": "Sequence", "normalizers": stages, "pretokenizers": stages, "processors": stages, "decoders": stages})
        }),
        prop::sample::select(vec!["Ġ", "Ġthe", "<|endoftext|>", "", "a b", "BPE", "ByteLevel", "1.0"])
            .prop_map(|s| json!(s)),
    ];
    prop::collection::vec((pointer, value), 1..4).prop_map(|changes| {
        let mut json = tokenizer_json().clone();
        for (pointer, value) in changes {
            if let Some(slot) = json.pointer_mut(pointer) {
                *slot = value;
            }
        }
        json.to_string()
    })
}

proptest! {
    #![proptest_config(config(1_000))]

    /// The hand-written pre-tokenizer cuts any text as GPT-2's pattern does in the library's regex
    /// engine (fancy-regex, which has the pattern's look-ahead).
    #[test]
    fn words_are_gpt2_pattern(text in tokenizer_text()) {
        static RE: std::sync::OnceLock<fancy_regex::Regex> = std::sync::OnceLock::new();
        let re = RE.get_or_init(|| {
            fancy_regex::Regex::new(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
                .expect("GPT-2's pattern")
        });
        let gpt2: Vec<&str> = re.find_iter(&text).map(|m| m.expect("no backtracking limit here").as_str()).collect();
        prop_assert_eq!(WordPattern::Gpt2.words(&text).collect::<Vec<_>>(), gpt2);
    }

    /// Any text encodes to ids in the vocabulary and decodes back to itself.
    #[test]
    fn any_text_encodes_and_round_trips(text in tokenizer_text()) {
        static TOK: std::sync::OnceLock<Tokenizer> = std::sync::OnceLock::new();
        let tok = TOK.get_or_init(|| Tokenizer::from_json(&tokenizer_json().to_string()).expect("the real tokenizer"));
        let ids = tok.encode(&text);
        prop_assert!(ids.iter().all(|&id| (id as usize) < tok.vocab_size()));
        prop_assert_eq!(tok.decode(&ids), text);
    }
}

proptest! {
    #![proptest_config(config(200))]

    /// A damaged tokenizer.json loads or fails with an error, never a panic; one that loads encodes
    /// into its own vocabulary.
    #[test]
    fn damaged_tokenizer_files_never_panic(json in mutated_tokenizer_json()) {
        if let Ok(tok) = Tokenizer::from_json(&json) {
            let ids = tok.encode("fn main() {\n    println!(\"it's 3.14 → 🦀\");\n}<|endoftext|>");
            prop_assert!(ids.iter().all(|&id| (id as usize) < tok.vocab_size()));
        }
    }
}

/// A file of the shipped model (`www/models/attention-lab-tiny/`).
fn shipped(name: &str) -> &'static [u8] {
    static FILES: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    let (config, weights) = FILES.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("www/models/attention-lab-tiny");
        let read = |f: &str| std::fs::read(dir.join(f)).expect("the shipped model");
        (read("config.json"), read("model.safetensors"))
    });
    if name == "config.json" { config } else { weights }
}

/// The shipped config.json with a few fields set to hostile values.
fn mutated_model_config() -> impl Strategy<Value = String> {
    let pointer = prop::sample::select(vec![
        "/model_type",
        "/hidden_size",
        "/intermediate_size",
        "/num_hidden_layers",
        "/num_attention_heads",
        "/num_key_value_heads",
        "/head_dim",
        "/vocab_size",
        "/sliding_window",
        "/layer_types",
        "/layer_types/0",
        "/layer_types/3",
        "/rope_theta",
        "/rms_norm_eps",
        "/max_position_embeddings",
        "/tie_word_embeddings",
    ]);
    prop::collection::vec((pointer, prop_oneof![any_json(), json_number()]), 1..4).prop_map(|changes| {
        let mut json: Value = serde_json::from_slice(shipped("config.json")).expect("config.json");
        for (pointer, value) in changes {
            if let Some(slot) = json.pointer_mut(pointer) {
                *slot = value;
            }
        }
        json.to_string()
    })
}

/// The shipped safetensors with its header edited (shapes, offsets, dtypes), or cut short.
fn mutated_safetensors() -> impl Strategy<Value = Vec<u8>> {
    let pointer = prop::sample::select(vec![
        "/model.norm.weight/shape/0",
        "/model.norm.weight/data_offsets/1",
        "/model.embed_tokens.weight/shape",
        "/model.embed_tokens.weight/dtype",
        "/model.layers.0.self_attn.q_proj.bias/data_offsets/0",
        "/model.layers.3.mlp.down_proj.weight/shape/1",
        "/model.layers.1.self_attn.k_proj.weight",
    ]);
    let edits = prop::collection::vec((pointer, prop_oneof![any_json(), json_number()]), 0..3);
    (edits, any::<Option<prop::sample::Index>>()).prop_map(|(changes, cut)| {
        let bytes = shipped("model.safetensors");
        let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
        let mut header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).expect("header");
        for (pointer, value) in changes {
            if let Some(slot) = header.pointer_mut(pointer) {
                *slot = value;
            }
        }
        let header = header.to_string();
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&bytes[8 + header_len..]);
        if let Some(at) = cut {
            out.truncate(at.index(out.len()));
        }
        out
    })
}

proptest! {
    #![proptest_config(config(60))]

    /// A damaged config.json or safetensors file loads or fails with an error, never a panic; a model
    /// that loads runs a short input or says why not.
    #[test]
    fn damaged_checkpoints_never_panic(config in mutated_model_config(), weights in mutated_safetensors()) {
        for (config, weights) in [(config.as_str(), shipped("model.safetensors")), (std::str::from_utf8(shipped("config.json")).unwrap(), &weights[..])] {
            if let Ok(model) = Checkpoint::load(config, weights) {
                let _ = forward(&model, &[0, 1, 2, 3]);
            }
        }
    }
}
