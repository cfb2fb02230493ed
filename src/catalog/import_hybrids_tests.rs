//! Import of state-space and hybrid models from the configs in `tests/data/configs/`: each family's
//! layer kinds and positions, KV bytes per token (bf16), recurrent state per sequence, mixer
//! parameters and parameter total, each worked out by hand beside the assertion, and a link round
//! trip of every imported model.

use super::hf_import::{Imported, import_hf_value};
use super::import_files_tests::{import, read};
use crate::model::config::{Model, Positional};
use crate::model::dtype::DType::Bf16;
use crate::model::encoding::{decode_model, encode_model};
use crate::model::kv_cache::{kv_bytes_per_token, state_bytes};
use crate::model::params::{mixer_params, model_params};
use crate::model::schedule::{LayerKind, StateMixer};

const SSM: LayerKind = LayerKind::Stateful(StateMixer::Ssm);
const LINEAR: LayerKind = LayerKind::Stateful(StateMixer::Linear);
const CONV: LayerKind = LayerKind::Stateful(StateMixer::Conv);

/// Layers of each kind, in order of first appearance.
fn kinds(m: &Model) -> Vec<(LayerKind, u32)> {
    m.schedule.counts().iter().map(|c| (c.kind, c.layers)).collect()
}

/// Indices of the layers of `kind`.
fn layers_of(m: &Model, kind: LayerKind) -> Vec<usize> {
    m.schedule.layers().iter().enumerate().filter(|(_, k)| **k == kind).map(|(i, _)| i).collect()
}

/// KV bytes per token (bf16), state bytes per sequence, and the parameter total.
fn figures(m: &Model) -> (u128, u128, u128) {
    (kv_bytes_per_token(m, Bf16).unwrap(), state_bytes(m).unwrap(), model_params(m).total())
}

fn read_as(imp: &Imported, words: &str) -> bool {
    imp.report.readings.iter().any(|s| s.contains(words))
}

/// A config file with some fields changed (a `null` writes an explicit null) or removed.
fn import_edited(name: &str, set: serde_json::Value, remove: &[&str]) -> Imported {
    let mut v: serde_json::Value = serde_json::from_str(&read(name)).unwrap();
    let o = v.as_object_mut().unwrap();
    for key in remove {
        o.remove(*key);
    }
    for (key, val) in set.as_object().unwrap() {
        o.insert(key.clone(), val.clone());
    }
    import_hf_value(&v).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn mamba_2_8b() {
    let imp = import("mamba-2.8b-hf.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(SSM, 64)]);
    // H 2560, I = 2 H = 5120, N 16, K 4, R 160 (time_step_rank), conv bias, no other biases:
    // in_proj 2560*10240 = 26,214,400; conv 5120*4 + 5120 = 25,600; x_proj 5120*(160+32) = 983,040;
    // dt_proj 160*5120 + 5120 = 824,320; A_log 5120*16 = 81,920; D 5120; out_proj 13,107,200
    // = 41,241,600.
    assert_eq!(mixer_params(m, SSM), 41_241_600);
    // torch_dtype float32: conv 5120*4 el * 4 B = 81,920; SSM 5120*16 el * 4 B = 327,680;
    // 64 * 409,600 = 26,214,400 (the spec's 23,592,960 assumes a bf16 run).
    // Tied: 50280*2560 = 128,716,800 + 64*(41,241,600 + 2560) + 2560 = 2,768,345,600.
    assert_eq!(figures(m), (0, 26_214_400, 2_768_345_600));
    assert!(read_as(&imp, "4-input convolution window in float32 and the SSM state in float32"));
    // The runtimes that keep kernel - 1 inputs are named beside the count.
    assert!(read_as(&imp, "(vLLM and TensorRT-LLM keep 3 inputs of the window, one fewer: the newest is in hand)"));
}

#[test]
fn mamba2_codestral() {
    let imp = import("mamba-codestral-7b-v0.1.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(SSM, 64)]);
    // H 4096, I 8192, 128 heads of 64, G 8, N 128, K 4. conv_dim = 8192 + 2*8*128 = 10,240;
    // in_proj 4096*(8192 + 10,240 + 128) = 76,021,760; conv 10,240*4 + 10,240 = 51,200;
    // dt_bias, A_log, D 3*128 = 384; norm 8192; out_proj 33,554,432 = 109,635,968.
    assert_eq!(mixer_params(m, SSM), 109_635_968);
    // State per layer: conv 40,960 el * 2 B = 81,920; SSM 128*64*128 = 1,048,576 el * 4 B = 4,194,304;
    // 64 * 4,276,224 = 273,678,336. Untied: 2*32768*4096 = 268,435,456 + 64*(109,635,968 + 4096)
    // + 4096 = 7,285,403,648 (the published count). The file's `Infinity` is read as null.
    assert_eq!(figures(m), (0, 273_678_336, 7_285_403_648));
}

#[test]
fn jamba_v0_1() {
    // The hub's file (ai21labs/Jamba-v0.1 at 871ab2b, 1,310 bytes): its context is `n_ctx`.
    assert_eq!(read("jamba-v0.1.json").len(), 1_310);
    let imp = import("jamba-v0.1.json");
    let m = &imp.model;
    assert_eq!(m.max_position_embeddings, 262_144);
    assert!(imp.report.used.iter().any(|(k, v)| k == "n_ctx" && v == "262144"), "{:?}", imp.report.used);
    // transformers' Jamba always norms dt, B and C (counted below); the original code's switch for them
    // is listed as not read, not silently taken.
    assert!(imp.report.unread.iter().any(|k| k == "mamba_inner_layernorms"), "{:?}", imp.report);
    assert_eq!(layers_of(m, LayerKind::Global), vec![4, 12, 20, 28]);
    assert_eq!(m.positional, Positional::NoPe);
    // Mamba-1 plus norms on dt (256) and B, C (16 each): H 4096, I 8192, N 16, K 4, R 256:
    // 67,108,864 + 40,960 + 8192*288 = 2,359,296 + 256*8192 + 8192 = 2,105,344 + 131,072 + 8192
    // + 33,554,432 + 288 = 105,308,448.
    assert_eq!(mixer_params(m, SSM), 105_308_448);
    // KV: 4 layers * 2 * 8 * 128 * 2 B = 16,384. State: 28 * (32,768*2 + 131,072*4) = 28 * 589,824
    // = 16,515,072. Total: embeddings + head 2*65536*4096 = 536,870,912; attention 4 * 41,943,040
    // = 167,772,160; mixers 28 * 105,308,448 = 2,948,636,544; 16 dense MLPs 3*4096*14336 =
    // 176,160,768 each = 2,818,572,288; 16 MoE (16*176,160,768 + router 16*4096 = 2,818,637,824)
    // = 45,098,205,184; norms (2*32 + 1)*4096 = 266,240; sum 51,570,323,328.
    assert_eq!(figures(m), (16_384, 16_515_072, 51_570_323_328));
    // Active: the MoE layers use 2 experts: 16*(2*176,160,768 + 65,536) = 5,638,193,152 instead.
    assert_eq!(model_params(m).active(), 12_110_311_296);
}

#[test]
fn bamba_9b() {
    // The hub's text (blame page at 43f2151, "886 Bytes"): json.dumps(indent=2) and a newline.
    assert_eq!((read("bamba-9b.json").len(), read("bamba-9b.json").lines().count()), (886, 40));
    let imp = import("bamba-9b.json");
    let m = &imp.model;
    assert_eq!(layers_of(m, LayerKind::Global), vec![9, 18, 27]);
    assert!(
        matches!(m.positional, Positional::Rope { theta, partial_rotary_factor, .. } if theta == 10_000.0 && partial_rotary_factor == 0.5)
    );
    // Mamba-2, I 8192, 128 heads of 64, G 1, N 128: conv_dim 8448; in_proj 4096*(8192+8448+128)
    // = 68,681,728; conv 8448*5 = 42,240; 384; norm 8192; out 33,554,432 = 102,286,976.
    assert_eq!(mixer_params(m, SSM), 102_286_976);
    // KV 3*2*8*128*2 = 12,288. State 29*(33,792*2 + 1,048,576*4) = 29*4,261,888 = 123,594,752.
    // Total: 2*128256*4096 = 1,050,673,152 + 3*41,943,040 + 29*102,286,976 + 32*176,160,768
    // + 65*4096 = 1,050,673,152 + 125,829,120 + 2,966,322,304 + 5,637,144,576 + 266,240
    // = 9,780,235,392.
    assert_eq!(figures(m), (12_288, 123_594_752, 9_780_235_392));
}

#[test]
fn bamba_s_rotary_dimensions_are_read_and_a_count_other_than_half_is_warned_of() {
    // The published file's attn_rotary_emb 64 of 128 is half, as transformers fixes it.
    let imp = import("bamba-9b.json");
    assert!(read_as(&imp, "attn_rotary_emb = 64 of each 128-wide head rotated (partial rotary factor 0.5)"));
    assert!(imp.report.warnings.is_empty(), "{:?}", imp.report.warnings);
    // 32 of 128: recent vLLM rotates a quarter, transformers still half; the file's count is taken,
    // warned of.
    let imp = import_edited("bamba-9b.json", serde_json::json!({"attn_rotary_emb": 32}), &[]);
    assert!(
        matches!(imp.model.positional, Positional::Rope { partial_rotary_factor, .. } if partial_rotary_factor == 0.25)
    );
    assert!(
        imp.report.warnings.iter().any(|w| w.contains("transformers' Bamba (and older vLLM) rotates half (64)")),
        "{:?}",
        imp.report
    );
    // Absent: the class's half, said to be an assumption (recent vLLM rotates the whole head).
    let imp = import_edited("bamba-9b.json", serde_json::json!({}), &["attn_rotary_emb"]);
    assert!(
        matches!(imp.model.positional, Positional::Rope { partial_rotary_factor, .. } if partial_rotary_factor == 0.5)
    );
    assert!(imp.report.assumed.iter().any(|s| s.contains("as transformers' Bamba fixes it (recent vLLM")), "{imp:?}");
    // More than the head, odd, zero: refused with the field named.
    for bad in [256, 33, 0] {
        let mut v: serde_json::Value = serde_json::from_str(&read("bamba-9b.json")).unwrap();
        v["attn_rotary_emb"] = bad.into();
        let err = import_hf_value(&v).map(|_| ()).unwrap_err().to_string();
        assert!(err.starts_with("attn_rotary_emb: "), "{bad}: {err}");
    }
}

#[test]
fn granite_4_h_small() {
    let imp = import("granite-4.0-h-small.json");
    let m = &imp.model;
    assert_eq!(layers_of(m, LayerKind::Global), vec![5, 15, 25, 35]);
    assert_eq!(m.positional, Positional::NoPe);
    assert_eq!(mixer_params(m, SSM), 102_286_976);
    // The shared MLP (3*4096*1536 = 18,874,368) is exactly 2 shared experts of 768.
    assert_eq!(m.moe.map(|e| (e.n_routed_experts, e.n_shared_experts, e.expert_ffn_size)), Some((72, 2, 768)));
    // KV 4*2*8*128*2 = 16,384. State 36*4,261,888 = 153,427,968. Total (tied): 100352*4096 =
    // 411,041,792 + 4*41,943,040 = 167,772,160 + 36*102,286,976 = 3,682,331,136 + 40*(18,874,368 +
    // 72*3*4096*768 = 679,477,248 + router 294,912) = 40*698,646,528 = 27,945,861,120 + 81*4096 =
    // 331,776; sum 32,207,337,984.
    assert_eq!(figures(m), (16_384, 153_427_968, 32_207_337_984));
    assert_eq!(model_params(m).active(), 8_803_121_664);
}

#[test]
fn nemotron_h_8b() {
    let imp = import("nemotron-h-8b-base-8k.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(SSM, 24), (LayerKind::FeedForward, 24), (LayerKind::Global, 4)]);
    assert_eq!(layers_of(m, LayerKind::Global), vec![7, 18, 29, 40]);
    assert_eq!(m.positional, Positional::NoPe);
    // I = 128 heads * 64 = 8192, G 8, N 128: the Codestral mixer, 109,635,968.
    assert_eq!(mixer_params(m, SSM), 109_635_968);
    // KV 16,384. State 24*(81,920 + 4,194,304) = 102,629,376. Total: 2*131072*4096 = 1,073,741,824
    // + 24*109,635,968 = 2,631,263,232 + 4*41,943,040 = 167,772,160 + 24 relu2 MLPs 2*4096*21504 =
    // 176,160,768 each = 4,227,858,432 + (52 + 1)*4096 = 217,088; sum 8,100,852,736.
    assert_eq!(figures(m), (16_384, 102_629_376, 8_100_852_736));
}

#[test]
fn falcon_h1_7b() {
    let imp = import("falcon-h1-7b-base.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(LayerKind::Global, 44)]);
    assert_eq!(m.states.beside_attention, Some(StateMixer::Ssm));
    assert_eq!(m.positional, Positional::rope(1e11));
    // Mamba-2 with I = mamba_d_ssm 3072, 24 heads of 128, G 1, N 256, no gated norm: conv_dim 3584;
    // in_proj 3072*(3072+3584+24) = 20,520,960; conv 3584*5 = 17,920; 72; out 9,437,184 = 29,976,136.
    assert_eq!(mixer_params(m, LayerKind::Global), 29_976_136);
    // KV 44*2*2*128*2 = 45,056. State 44*(14,336*2 + 786,432*4) = 44*3,174,400 = 139,673,600.
    // Total: 2*130048*3072 = 799,014,912 + 44*(11,010,048 + 29,976,136 + 3*3072*12288 =
    // 113,246,208) = 44*154,232,392 = 6,786,225,248 + 89*3072 = 273,408; sum 7,585,513,568.
    assert_eq!(figures(m), (45_056, 139_673_600, 7_585_513_568));
}

#[test]
fn falcon_h1_mamba_d_ssm_absent_is_the_class_default_1024_and_null_is_expand_times_hidden() {
    // Absent: FalconH1Config's default 1024. With 8 heads of "auto" = 128, G 1, N 256: conv_dim
    // 1024 + 512 = 1536; in_proj 3072*(1024 + 1536 + 8) = 7,888,896; conv 1536*5 = 7,680; 24;
    // out 1024*3072 = 3,145,728; sum 11,042,328.
    let set = serde_json::json!({"mamba_n_heads": 8, "mamba_d_head": "auto"});
    let imp = import_edited("falcon-h1-7b-base.json", set, &["mamba_d_ssm"]);
    assert_eq!(mixer_params(&imp.model, LayerKind::Global), 11_042_328);
    assert!(imp.report.assumed.iter().any(|s| s.contains("mamba_d_ssm: absent, so 1024")), "{:?}", imp.report);
    // State (conv cache d_conv wide, as for the 7B) 44*(1536*4*2 + 8*128*256*4) = 44*(12,288 +
    // 1,048,576) = 44*1,060,864 = 46,678,016.
    assert_eq!(state_bytes(&imp.model).unwrap(), 46_678_016);
    // Explicit null: mamba_expand 2 * 3072 = 6144, 24 heads of "auto" = 256: conv_dim 6656;
    // in_proj 3072*(6144 + 6656 + 24) = 39,395,328; conv 33,280; 72; out 18,874,368; sum 58,303,048.
    let set = serde_json::json!({"mamba_d_ssm": null, "mamba_d_head": "auto"});
    let imp = import_edited("falcon-h1-7b-base.json", set, &[]);
    assert_eq!(mixer_params(&imp.model, LayerKind::Global), 58_303_048);
    assert!(read_as(&imp, "mamba_d_ssm is null"), "{:?}", imp.report.readings);
}

#[test]
fn zamba_7b() {
    // The hub's text (blame page at 82116e2, "886 Bytes").
    assert_eq!((read("zamba-7b-v1.json").len(), read("zamba-7b-v1.json").lines().count()), (886, 37));
    let imp = import("zamba-7b-v1.json");
    let m = &imp.model;
    let hybrid = vec![2, 7, 13, 19, 25, 31, 37, 43, 49, 55, 61, 67, 73];
    assert_eq!(layers_of(m, LayerKind::Global), hybrid);
    assert_eq!((m.attn.n_kv_heads, m.attn.head_dim, m.positional), (16, 464, Positional::NoPe));
    // Mamba-1, H 3712, I 7424, N 16, K 4, R 232: 55,115,776 + 37,120 + 1,959,936 + 1,729,792
    // + 118,784 + 7424 + 27,557,888 = 86,526,720, in all 76 layers.
    assert_eq!(mixer_params(m, SSM), 86_526_720);
    assert_eq!(mixer_params(m, LayerKind::Global), 86_526_720);
    // KV 13*2*16*464*2 = 386,048. State 76*(29,696*2 + 118,784*4) = 76*534,528 = 40,624,128.
    // Model: 32000*3712 = 118,784,000 + 76*86,526,720 = 6,576,030,720 + 13 attentions from H:
    // 4*3712*7424 = 110,231,552 each = 1,433,010,176 + 77*3712 = 285,824; sum 8,128,110,720.
    // Checkpoint: shared block once (attention from 2H 192,905,216 + MLP 3*3712*14848 = 165,347,328
    // + norms 11,136) + 13 linears 3712^2 = 179,126,272, no per-layer attention:
    // 8,128,110,720 - 1,433,010,176 + 358,263,680 + 179,126,272 = 7,232,490,496; over by 895,620,224.
    assert_eq!(figures(m), (386_048, 40_624_128, 8_128_110_720));
    assert!(read_as(&imp, "over the checkpoint's 7,232,490,496 by 895,620,224"), "{:?}", imp.report.readings);
}

#[test]
fn zamba2_2_7b() {
    let imp = import("zamba2-2.7b.json");
    let m = &imp.model;
    assert_eq!(layers_of(m, LayerKind::Global), vec![6, 12, 18, 24, 30, 36, 42, 47, 51]);
    // head_dim 2*2560/32 = 160, not the file's kv_channels 80.
    assert_eq!((m.attn.n_kv_heads, m.attn.head_dim, m.positional), (32, 160, Positional::NoPe));
    // Mamba-2, I 5120, 80 heads of 64, G 1, N 64: conv_dim 5248; in_proj 2560*10448 = 26,746,880;
    // conv 5248*5 = 26,240; 240; norm 5120; out 13,107,200 = 39,885,680.
    assert_eq!(mixer_params(m, SSM), 39_885_680);
    // KV 9*2*32*160*2 = 184,320. State 54*(20,992*2 + 327,680*4) = 54*1,352,704 = 73,046,016.
    // Model: 81,920,000 + 54*39,885,680 = 2,153,826,720 + 9*4*2560*5120 = 471,859,200 + 55*2560
    // = 140,800; sum 2,707,746,720. Checkpoint: 2 blocks of (3*5120^2 + 5120*2560 = 91,750,400
    // + 3*2560*10240 = 78,643,200 + 7680) = 340,802,560, 9 linears 2560^2 = 58,982,400, 9 MLP
    // adapters 2560*128 + 128*20480 = 2,949,120 → 26,542,080; no per-layer attention:
    // 2,707,746,720 - 471,859,200 + 340,802,560 + 58,982,400 + 26,542,080 = 2,662,214,560.
    assert_eq!(figures(m), (184_320, 73_046_016, 2_707_746_720));
    assert!(read_as(&imp, "over the checkpoint's 2,662,214,560 by 45,532,160"), "{:?}", imp.report.readings);
}

#[test]
fn qwen3_next_80b() {
    let imp = import("qwen3-next-80b-a3b-instruct.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(LINEAR, 36), (LayerKind::Global, 12)]);
    assert_eq!(layers_of(m, LayerKind::Global), (0..12).map(|i| 4 * i + 3).collect::<Vec<_>>());
    assert!(m.qk_norm);
    assert!(
        matches!(m.positional, Positional::Rope { theta, partial_rotary_factor, .. } if theta == 1e7 && partial_rotary_factor == 0.25)
    );
    // Gated DeltaNet: key_dim 16*128 = 2048, value_dim 32*128 = 4096, conv_dim 8192:
    // 2048*12288 = 25,165,824 + 2048*64 = 131,072 + 8192*4 = 32,768 + 64 + 128 + 4096*2048 =
    // 8,388,608 = 33,718,464.
    assert_eq!(mixer_params(m, LINEAR), 33_718_464);
    // KV 12*2*2*256*2 = 24,576. State 36*(32,768*2 + 32*128*128*4) = 36*2,162,688 = 77,856,768.
    // Model: 2*151936*2048 = 622,329,856 + 36*33,718,464 = 1,213,864,704 + 12 attentions (q, o
    // 8,388,608 each, k, v 1,048,576 each, QK-norm 512) = 12*18,874,880 = 226,498,560 + 48 MoE
    // (router 1,048,576 + 513 experts * 3*2048*512) = 48*1,614,807,040 = 77,510,737,920 + 97*2048
    // = 198,656; sum 79,573,629,696. The checkpoint adds the output gate 12*2048*16*256 =
    // 100,663,296 and the shared expert's gate 48*2048 = 98,304: 79,674,391,296.
    assert_eq!(figures(m), (24_576, 77_856_768, 79_573_629_696));
    assert!(read_as(&imp, "under the checkpoint's 79,674,391,296 by 100,761,600"), "{:?}", imp.report.readings);
}

#[test]
fn rwkv_4_169m() {
    // The hub's text (blame page at dc37d17, "521 Bytes").
    assert_eq!(read("rwkv-4-169m-pile.json").len(), 521);
    let imp = import("rwkv-4-169m-pile.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(LINEAR, 12)]);
    // Time mix 4*768^2 + 3*768 + 2*768 = 2,363,136, plus the channel mix's receptance 768^2 and two
    // mix vectors 1536 = 2,954,496; the FFN counts key and value, 2*768*3072 = 4,718,592.
    assert_eq!(mixer_params(m, LINEAR), 2_954_496);
    // float32: 12 * 5 * 768 * 4 = 184,320. Model: 2*50277*768 = 77,225,472 + 12*(2,954,496 +
    // 4,718,592) = 92,077,056 + LayerNorms (2*12 + 1)*1536 = 38,400; sum 169,340,928, under the
    // checkpoint's 169,342,464 by layer 0's pre-LayerNorm, 1536.
    assert_eq!(figures(m), (0, 184_320, 169_340_928));
    assert!(read_as(&imp, "under the checkpoint's 169,342,464 by 1,536"));
}

#[test]
fn rwkv6_finch_1_6b() {
    let imp = import("rwkv6-1.6b-finch.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(LINEAR, 24)]);
    // D = K = V 2048, r 32, g 64: 10*32*2048 = 655,360 + 12,288 + 8,388,608 + 64*4096 = 262,144 +
    // 4096 + 8,388,608 + 4096 + 4,194,304 = 21,909,504, plus the channel mix's 2048^2 + 4096 =
    // 4,198,400: 26,107,904. FFN 2*2048*7168 = 29,360,128.
    assert_eq!(mixer_params(m, LINEAR), 26_107_904);
    // State 24*(2*2048*2 + 32*64*64*4) = 24*532,480 = 12,779,520. Model: 2*65536*2048 =
    // 268,435,456 + 24*55,468,032 = 1,331,232,768 + 49*4096 = 200,704; sum 1,599,868,928 (the
    // checkpoint's 1,599,873,024 less layer 0's pre-norm, 4096).
    assert_eq!(figures(m), (0, 12_779_520, 1_599_868_928));
}

#[test]
fn rwkv6_finch_1_6b_in_the_rwkv_org_layout() {
    // The hub's text of RWKV/rwkv-6-world-1b6 (blame page, refs/pr/1, "610 Bytes"), most likely the
    // earlier name of RWKV/v6-Finch-1B6-HF; the page's own layout, auto_map indented by six.
    assert_eq!(read("rwkv-6-world-1b6.json").len(), 610);
    // The RWKV org's layout names head_size and attention_hidden_size, not num_heads or expand_k:
    // 2048 / 64 = 32 heads of 64 x 64, not FLA's defaults (4 heads, K = 1024, V = 2048, a state 4x
    // as large).
    let imp = import("rwkv-6-world-1b6.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(LINEAR, 24)]);
    // intermediate_size null: int(2048 * 3.5 // 32 * 32) = 7168.
    assert_eq!(m.ffn_size, 7168);
    // 6d 12,288 + time_maa_w1/w2 10*32*2048 = 655,360 + time_decay, time_faaaa 4096 + decay LoRA
    // 64*(2048 + 2048) = 262,144 + r, k, v, g, output 5*2048^2 = 20,971,520 + ln_x 4096 =
    // 21,909,504, plus the channel mix's 2048^2 + 4096 = 4,198,400: 26,107,904 (as FLA's layout).
    assert_eq!(mixer_params(m, LINEAR), 26_107_904);
    // The file names no dtype: the token shifts are taken as bfloat16, said in the report.
    assert!(
        imp.report
            .assumed
            .iter()
            .any(|s| s == "torch_dtype: absent, so bfloat16 (2 bytes) for the convolution window or token shifts")
    );
    // State 24*(2*2048*2 + 32*64*64*4) = 24*(8,192 + 524,288) = 24*532,480 = 12,779,520. Model:
    // 2*65536*2048 = 268,435,456 + 24*(26,107,904 + 2*2048*7168 = 29,360,128) = 1,331,232,768 +
    // 49*4096 = 200,704; sum 1,599,868,928, under the checkpoint by layer 0's pre_ln, 4096.
    assert_eq!(figures(m), (0, 12_779_520, 1_599_868_928));
    assert!(read_as(&imp, "under the checkpoint's 1,599,873,024 by 4,096"), "{:?}", imp.report.readings);
    assert!(read_as(&imp, "32 heads of 64"));
    assert!(imp.report.warnings.iter().any(|s| s.contains("num_attention_heads 64 is ignored")));
    assert!(!imp.report.assumed.iter().any(|s| s.contains("expand_k") || s.contains("num_heads")));

    // head_size alone marks the layout: attention_hidden_size is then hidden_size.
    let imp = import_edited("rwkv-6-world-1b6.json", serde_json::json!({}), &["attention_hidden_size"]);
    assert_eq!(figures(&imp.model), (0, 12_779_520, 1_599_868_928));

    // Finch 7B (hidden_size 4096, 32 layers): the remote code doubles both LoRAs to 64 and 128.
    // 6d 24,576 + 10*64*4096 = 2,621,440 + 8192 + 128*8192 = 1,048,576 + 5*4096^2 = 83,886,080 +
    // 8192 + 4096^2 + 8192 = 16,785,408: 104,382,464. State 32*(2*4096*2 + 64*64*64*4) =
    // 32*(16,384 + 1,048,576) = 34,078,720.
    let set = serde_json::json!({"hidden_size": 4096, "attention_hidden_size": 4096, "num_hidden_layers": 32});
    let imp = import_edited("rwkv-6-world-1b6.json", set, &["num_attention_heads"]);
    assert_eq!(imp.model.ffn_size, 14_336);
    assert_eq!(mixer_params(&imp.model, LINEAR), 104_382_464);
    assert_eq!(state_bytes(&imp.model).unwrap(), 34_078_720);
}

#[test]
fn rwkv7_goose_1_5b() {
    // The hub's text (blob page; the file list at 848422f gives config.json 966 bytes).
    assert_eq!(read("rwkv7-1.5b-world.json").len(), 966);
    let imp = import("rwkv7-1.5b-world.json");
    let m = &imp.model;
    assert_eq!(kinds(m), vec![(LINEAR, 24)]);
    // Layers 1-23: 9*2048 + 4*2048^2 + w, a LoRAs (2*2048*96 + 2048 = 395,264 each) + gate LoRA
    // 2*2048*256 = 1,048,576 + value LoRA 2*2048*64 + 2048 = 264,192 + GroupNorm 4096 = 18,903,040,
    // plus the channel mix's mix vector 2048 = 18,905,088 (layer 0, without the value LoRA, holds
    // 264,192 fewer).
    assert_eq!(mixer_params(m, LINEAR), 18_905_088);
    // The checkpoint is float32 (torch_dtype), so the two token shifts a layer are 4 B a value, and
    // the 32 heads' 64 x 64 states f32 as always: 24*(2*2048*4 + 32*64*64*4) = 24*(16,384 +
    // 524,288) = 24*540,672 = 12,976,128. Model: 268,435,456 + 24*(18,905,088 + 2*2048*8192 =
    // 33,554,432) = 1,259,028,480 + 200,704 = 1,527,664,640; the checkpoint holds 1,527,404,544
    // (over by 264,192 - 4096 = 260,096).
    assert_eq!(figures(m), (0, 12_976_128, 1_527_664_640));
    assert!(read_as(&imp, "layer 0 has no value LoRA and holds 264,192 fewer"));
    assert!(read_as(&imp, "over the checkpoint's 1,527,404,544 by 260,096"));
}

#[test]
fn lfm2_1_2b() {
    let imp = import("lfm2-1.2b.json");
    let m = &imp.model;
    assert_eq!(layers_of(m, LayerKind::Global), vec![2, 5, 8, 10, 12, 14]);
    assert_eq!(kinds(m).iter().find(|(k, _)| *k == CONV), Some(&(CONV, 10)));
    assert_eq!(m.positional, Positional::rope(1e6));
    // block_ff_dim 12288 → int(2*12288/3) = 8192 → *1.0 → a multiple of 256: 8192.
    assert_eq!(m.ffn_size, 8192);
    // Conv: 4*2048^2 + 2048*3 = 16,783,360.
    assert_eq!(mixer_params(m, CONV), 16_783_360);
    // KV 6*2*8*64*2 = 12,288. State 10*2048*3*2 = 122,880. Total (tied): 65536*2048 = 134,217,728
    // + 10*16,783,360 + 6*(4,194,304*2 + 1,048,576*2 + QK-norm 128 = 10,485,888) + 16*3*2048*8192
    // + 33*2048 = 134,217,728 + 167,833,600 + 62,915,328 + 805,306,368 + 67,584 = 1,170,340,608.
    assert_eq!(figures(m), (12_288, 122_880, 1_170_340_608));
    assert!(read_as(&imp, "last 3 inputs (conv_L_cache, the kernel size)"));
    assert!(read_as(&imp, "(vLLM keeps 2 inputs of the window, one fewer"));
}

#[test]
fn recurrentgemma_2b() {
    let imp = import("recurrentgemma-2b.json");
    let m = &imp.model;
    let sliding = LayerKind::Sliding { window_tokens: 2048 };
    assert_eq!(layers_of(m, sliding), vec![2, 5, 8, 11, 14, 17, 20, 23]);
    assert!(
        matches!(m.positional, Positional::Rope { theta, partial_rotary_factor, .. } if theta == 10_000.0 && partial_rotary_factor == 0.5)
    );
    // RG-LRU block, D = W 2560, 10 heads, conv width 4: 2*(2560^2 + 2560) + 2560^2 + 2560 +
    // 2560*4 + 2560 + 2560 + 2*(2560^2/10 + 2560) = 13,112,320 + 6,556,160 + 12,800 + 2560 +
    // 1,315,840 = 20,999,680.
    assert_eq!(mixer_params(m, SSM), 20_999_680);
    // KV 8*2*1*256*2 = 8,192. State (float32) 18*(2560*3*4 + 2560*4) = 18*40,960 = 737,280.
    // Total (tied): 256000*2560 = 655,360,000 + 18*20,999,680 + 8*(2*6,553,600 + 2*655,360 +
    // o bias 2560 = 14,420,480) + 26*(3*2560*7680 + 2*7680 + 2560 = 59,000,320) + 53*2560
    // = 655,360,000 + 377,994,240 + 115,363,840 + 1,534,008,320 + 135,680 = 2,682,862,080.
    assert_eq!(figures(m), (8_192, 737_280, 2_682_862_080));
    assert!(read_as(&imp, "read as a 2048-token window"));
}

#[test]
fn samba_in_fla_layout() {
    let imp = import("samba-fla-1.3b.json");
    let m = &imp.model;
    let sliding = LayerKind::Sliding { window_tokens: 2048 };
    assert_eq!(layers_of(m, sliding), vec![1, 3, 5, 7, 9, 11, 13, 15, 17]);
    assert_eq!(kinds(m), vec![(SSM, 9), (sliding, 9)]);
    assert_eq!((m.n_q_heads, m.attn.n_kv_heads, m.attn.head_dim), (18, 18, 128));
    assert_eq!(m.positional, Positional::rope(10_000.0));
    // fla's GatedMLP: floor(2/3 * 2304 * 4) = 6144, already a multiple of 256.
    assert_eq!(m.ffn_size, 6144);
    // Mamba-1, H 2304, I 4608 (the file's intermediate_size), N 16, K 4, R 144, conv bias:
    // in_proj 2304*9216 = 21,233,664; conv 18,432 + 4,608; x_proj 4608*176 = 811,008;
    // dt_proj 144*4608 + 4608 = 668,160; A_log 73,728; D 4,608; out_proj 10,616,832 = 33,431,040.
    assert_eq!(mixer_params(m, SSM), 33_431_040);
    // KV: 9 layers * 2 * 18 * 128 * 2 B = 82,944 per token. State: 9 * (4608*4 el * 2 B + 4608*16
    // el * 4 B) = 9 * (36,864 + 294,912) = 2,985,984. Total (untied): 2*32000*2304 = 147,456,000 +
    // 9 mixers 300,879,360 + 9 attention (4 * 2304^2) 191,102,976 + 18 MLPs (3*2304*6144)
    // 764,411,904 + norms (2*18 + 1)*2304 = 85,248; sum 1,403,935,488.
    assert_eq!(figures(m), (82_944, 2_985_984, 1_403_935_488));
    assert!(read_as(&imp, "Recurrent state as fla's Mamba layer caches it: a 4-input convolution window in bf16"));
    assert!(read_as(&imp, "The MLP is 6144 wide"));
}

#[test]
fn samba_reads_fla_defaults_and_refuses_a_bad_attention_object() {
    use serde_json::json;
    // Without `attn`, fla's default attention; GQA, QKV biases and no window when the object says so.
    let bare = import_edited("samba-fla-1.3b.json", json!({}), &["attn"]);
    assert_eq!(layers_of(&bare.model, LayerKind::Sliding { window_tokens: 2048 }).len(), 9);
    assert!(bare.report.assumed.iter().any(|a| a.starts_with("attn: absent")));
    let gqa = import_edited(
        "samba-fla-1.3b.json",
        json!({"attn": {"layers": [0, 17], "num_heads": 18, "num_kv_heads": 6, "qkv_bias": true,
            "window_size": null, "rope_theta": 500000.0}}),
        &[],
    );
    let m = &gqa.model;
    assert_eq!(layers_of(m, LayerKind::Global), vec![0, 17]);
    assert_eq!((m.attn.n_kv_heads, m.biases.qkv, m.positional), (6, true, Positional::rope(500_000.0)));
    // KV 2 layers * 2 * 6 * 128 * 2 B = 6,144 per token, every token kept.
    assert_eq!(kv_bytes_per_token(m, Bf16), Ok(6_144));
    // Keys missing from the object are assumed aloud (fla itself would stop at them).
    let sparse = import_edited("samba-fla-1.3b.json", json!({"attn": {"layers": [1]}}), &[]);
    for key in ["attn.num_heads", "attn.num_kv_heads", "attn.qkv_bias", "attn.window_size", "attn.rope_theta"] {
        assert!(sparse.report.assumed.iter().any(|a| a.starts_with(key)), "{key}: {:?}", sparse.report.assumed);
    }
    let mut v: serde_json::Value = serde_json::from_str(&read("samba-fla-1.3b.json")).unwrap();
    for (attn, field) in [
        (json!({"layers": [1, 18], "num_heads": 18}), "attn.layers"),
        (json!({"num_heads": 18}), "attn.layers"),
        (json!({"layers": [1], "num_heads": 18, "num_kv_heads": 4}), "attn.num_kv_heads"),
        (json!({"layers": [1], "num_heads": 7}), "attn.num_heads"),
        (json!({"layers": [1], "num_heads": 18, "window_size": 0}), "attn.window_size"),
    ] {
        v["attn"] = attn;
        let err = import_hf_value(&v).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
}

#[test]
fn whole_caches_at_a_long_context_by_hand() {
    // At 131,072 tokens in bf16 a global attention layer holds every token: the cache is the bytes
    // per token times 131,072. RecurrentGemma's sliding layers stop at their 2,048-token window, and
    // the state-space models cache nothing, whatever the context.
    let n = 131_072;
    for (file, bytes) in [
        ("jamba-v0.1.json", 2_147_483_648u128),              // 16,384 x 131,072
        ("bamba-9b.json", 1_610_612_736),                    // 12,288 x 131,072
        ("granite-4.0-h-small.json", 2_147_483_648),         // 16,384 x 131,072
        ("nemotron-h-8b-base-8k.json", 2_147_483_648),       // 16,384 x 131,072
        ("falcon-h1-7b-base.json", 5_905_580_032),           // 45,056 x 131,072
        ("zamba-7b-v1.json", 50_600_083_456),                // 386,048 x 131,072
        ("zamba2-2.7b.json", 24_159_191_040),                // 184,320 x 131,072
        ("qwen3-next-80b-a3b-instruct.json", 3_221_225_472), // 24,576 x 131,072
        ("lfm2-1.2b.json", 1_610_612_736),                   // 12,288 x 131,072
        ("recurrentgemma-2b.json", 16_777_216),              // 8 layers x 1,024 B x 2,048 tokens
        ("samba-fla-1.3b.json", 169_869_312),                // 82,944 B x 2,048 tokens (window)
        ("mamba-2.8b-hf.json", 0),
        ("rwkv7-1.5b-world.json", 0),
    ] {
        let m = import(file).model;
        assert_eq!(crate::model::kv_cache::kv_total_bytes(&m, n, Bf16), Ok(bytes), "{file}");
    }
}

#[test]
fn every_hybrid_survives_a_link() {
    for file in [
        "mamba-2.8b-hf.json",
        "mamba-codestral-7b-v0.1.json",
        "jamba-v0.1.json",
        "bamba-9b.json",
        "granite-4.0-h-small.json",
        "nemotron-h-8b-base-8k.json",
        "falcon-h1-7b-base.json",
        "zamba-7b-v1.json",
        "zamba2-2.7b.json",
        "qwen3-next-80b-a3b-instruct.json",
        "rwkv-4-169m-pile.json",
        "rwkv6-1.6b-finch.json",
        "rwkv-6-world-1b6.json",
        "rwkv7-1.5b-world.json",
        "lfm2-1.2b.json",
        "recurrentgemma-2b.json",
        "samba-fla-1.3b.json",
    ] {
        let imp = import(file);
        assert!(read_as(&imp, "Recurrent state as"), "{file}: {:?}", imp.report.readings);
        let back = decode_model(&encode_model(&imp.model)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(figures(&back), figures(&imp.model), "{file}");
        assert_eq!(back.schedule, imp.model.schedule, "{file}");
        assert_eq!(back.states, imp.model.states, "{file}");
    }
}
