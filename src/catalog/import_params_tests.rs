//! Parameter totals of imported families, each worked out module by module from the reference
//! modelling code (transformers' `modeling_*.py`, ChatGLM's remote code) for the saved config in
//! `tests/data/configs/`, and compared with the published count where there is one.

use super::import_families_tests::said;
use super::import_files_tests::import;
use crate::model::config::NormKind;
use crate::model::params::model_params;

fn total(file: &str) -> u128 {
    model_params(&import(file).model).total()
}

#[test]
fn mpt_norms_have_no_bias() {
    // MPT-7B (d 4096, 32 layers, 32 heads, expansion 4, vocab 50,432, no_bias): transformers sets
    // `bias = None` on norm_1, norm_2 and norm_f, whatever no_bias says; Wqkv, out_proj, up_proj and
    // down_proj have no bias. Per layer: Wqkv 3 * 4096^2 + out_proj 4096^2 = 67,108,864; MLP
    // 2 * 4096 * 16,384 = 134,217,728; two norm weights 8,192: 201,334,784, * 32 = 6,442,713,088.
    // Embeddings 50,432 * 4096 = 206,569,472 (tied); norm_f 4,096: 6,649,286,656, the published count.
    assert_eq!(import("mpt-7b.json").model.norm, NormKind::LayerNormNoBias);
    assert_eq!(total("mpt-7b.json"), 6_649_286_656);
}

#[test]
fn cohere_has_one_bias_free_norm_per_layer() {
    // Command-R v01 (d 8192, 40 layers, 64 heads = 64 KV heads, FFN 22,528, vocab 256,000, tied):
    // CohereLayerNorm holds a weight only, and attention and MLP run in parallel from one
    // input_layernorm. Per layer: attention 4 * 8192^2 = 268,435,456; SwiGLU 3 * 8192 * 22,528 =
    // 553,648,128; input_layernorm 8,192: 822,091,776, * 40 = 32,883,671,040. Embeddings 256,000 *
    // 8192 = 2,097,152,000 (tied, logit_scale is a constant); final norm 8,192: 34,980,831,232.
    assert_eq!(total("command-r-v01.json"), 34_980_831_232);
    // With use_qk_norm (Command R+), q_norm and k_norm are CohereLayerNorms over (heads, head_dim)
    // and (KV heads, head_dim): (64 + 64) * 128 = 16,384 more per layer, 655,360 over 40 layers.
    let mut v: serde_json::Value =
        serde_json::from_str(&super::import_files_tests::read("command-r-v01.json")).unwrap_or_default();
    v["use_qk_norm"] = serde_json::json!(true);
    let m = super::hf_import::import_hf_value(&v).unwrap_or_else(|e| panic!("{e}")).model;
    assert!(m.qk_norm && m.qk_norm_per_head);
    assert_eq!(model_params(&m).total(), 34_980_831_232 + 655_360);
}

#[test]
fn olmo_1_norms_have_no_parameters() {
    // OLMo-7B-hf (d 4096, 32 layers, 32 heads, FFN 11,008, vocab 50,304, untied): OlmoLayerNorm
    // calls layer_norm with no weight and no bias. Per layer: attention 4 * 4096^2 = 67,108,864;
    // SwiGLU 3 * 4096 * 11,008 = 135,266,304: 202,375,168, * 32 = 6,476,005,376. Embeddings and
    // lm_head 2 * 50,304 * 4096 = 412,090,368: 6,888,095,744, the published count.
    let m = import("olmo-7b-hf.json").model;
    assert_eq!((m.norm, model_params(&m).norms), (NormKind::NonParametric, 0));
    assert_eq!(total("olmo-7b-hf.json"), 6_888_095_744);
}

#[test]
fn olmo_2_qk_norms_span_the_projection() {
    // OLMo-2-1124-7B (d 4096, 32 layers, 32 heads = 32 KV heads of 128, FFN 11,008, vocab 100,352,
    // untied): q_norm and k_norm are RMSNorms over heads * head_dim = 4096 and KV heads * head_dim
    // = 4096. Per layer: attention 4 * 4096^2 + 8,192 = 67,117,056; SwiGLU 135,266,304;
    // post_attention_layernorm and post_feedforward_layernorm 8,192: 202,391,552, * 32 =
    // 6,476,529,664. Embeddings and lm_head 2 * 100,352 * 4096 = 822,083,584; final norm 4,096:
    // 7,298,617,344, the published count.
    let m = import("olmo-2-1124-7b.json").model;
    assert!(m.qk_norm && m.qk_norm_per_head && m.norms_per_layer == 2);
    assert_eq!(total("olmo-2-1124-7b.json"), 7_298_617_344);
}

#[test]
fn gpt_oss_counts_sinks_and_every_bias() {
    // GPT-OSS (d 2880, 64 heads and 8 KV heads of 64, experts of 2880, vocab 201,088, untied,
    // attention_bias). Attention per layer: q and o 2 * 2880 * 4096 = 23,592,960; k and v
    // 2 * 2880 * 512 = 2,949,120; biases q 4096 + k, v 1,024 + o 2,880 = 8,000; sinks 64:
    // 26,550,144. One expert: gate_up 2880 * 5760 + down 2880 * 2880 = 24,883,200, its biases
    // 5,760 + 2,880: 24,891,840. Router 2880 E + E bias. Two RMSNorms 5,760.
    // 20B, 32 experts: MoE 32 * 2880 + 32 + 32 * 24,891,840 = 796,631,072; per layer 823,186,976,
    // * 24 = 19,756,487,424; embeddings and unembedding 2 * 201,088 * 2880 = 1,158,266,880; final
    // norm 2,880: 20,914,757,184 (published: 20.91B).
    // 120B, 128 experts: MoE 128 * 2880 + 128 + 128 * 24,891,840 = 3,186,524,288; per layer
    // 3,213,080,192, * 36 = 115,670,886,912; with 1,158,269,760: 116,829,156,672 (published 116.83B).
    let m = import("gpt-oss-20b.json").model;
    assert_eq!(crate::model::params::attn_params(&m, crate::model::schedule::LayerKind::Global).total(), 26_550_144);
    assert_eq!(total("gpt-oss-20b.json"), 20_914_757_184);
    assert_eq!(total("gpt-oss-120b.json"), 116_829_156_672);
    // Active: router and 4 experts per layer, 24 * (26,550,144 + 92,192 + 4 * 24,891,840 + 5,760)
    // + 1,158,269,760 = 4,187,440,704; less the embedding lookup 579,133,440 it is the published
    // 3.61B active. 120B: 36 * (26,550,144 + 368,768 + 99,567,360 + 5,760) + 1,158,269,760 =
    // 5,711,982,912 (5.13B active without the embedding).
    assert_eq!(model_params(&import("gpt-oss-20b.json").model).active(), 4_187_440_704);
    assert_eq!(model_params(&import("gpt-oss-120b.json").model).active(), 5_711_982_912);
}

#[test]
fn gemma_3n_says_what_altup_and_laurel_leave_out() {
    // Gemma 3n text model (d 2048, 8 heads and 2 KV heads of 256, per-layer width p 256, AltUp
    // n 4, LAuReL rank 64, vocab 262,400, per-layer vocab 262,144, tied), checkpoint layout (K and V
    // projections in every layer). Per layer: attention 2 * 2048 * 2048 + 2 * 2048 * 512 + q_norm,
    // k_norm 512 = 10,486,272 (v_norm has no scale); GeGLU 3 * 2048 * f; four norms 8,192; AltUp
    // 2048 + 16 + 64 + 8,192 + 2048 = 12,368; LAuReL 2 * 2048 * 64 + 2048 = 264,192; per-layer
    // input gate, projection and norm 2 * 2048 * 256 + 2048 = 1,050,624. Once: embeddings 262,400 *
    // 2048 = 537,395,200; per-layer table 262,144 * L * 256; per_layer_model_projection 2048 * L *
    // 256; per_layer_projection_norm 256; altup (un)embed projections 6 * 2048^2 = 25,165,824;
    // final norm 2048.
    // E2B (30 layers, f 8192): 30 * 62,153,296 + 2,591,557,888 = 4,456,156,768. The model counts
    // 4,424,598,528: no AltUp, LAuReL or per-layer norms (30 * 278,608 + 25,166,080 = 33,524,320),
    // and 256 * 30 * 256 = 1,966,080 table rows too many; 31,558,240 short.
    // E4B (35 layers, f 16,384): 35 * 112,484,944 + 2,929,723,648 = 6,866,696,688; counted
    // 6,834,073,088, 32,623,600 short. (transformers 5.24 builds no k_proj, v_proj or k_norm in the
    // KV-shared layers: 4,435,182,688 and 6,835,235,568 as its modules hold them.)
    for (file, counted, checkpoint, short) in [
        ("gemma-3n-e2b.json", 4_424_598_528u128, 4_456_156_768u128, 31_558_240u128),
        ("gemma-3n-e4b.json", 6_834_073_088, 6_866_696_688, 32_623_600),
    ] {
        let imp = import(file);
        assert_eq!(model_params(&imp.model).total(), counted, "{file}");
        let t = crate::model::units::format_thousands;
        let reading = format!(
            "The parameter total is {}, under the checkpoint's {} by {}: AltUp",
            t(counted),
            t(checkpoint),
            t(short)
        );
        assert!(said(&imp, &reading), "{file}: {:?}", imp.report);
    }
}

#[test]
fn starcoder2_ties_by_its_config_default() {
    // StarCoder2-15B (d 6144, 40 layers, 48 heads and 4 KV heads of 128, FFN 24,576, vocab 49,152,
    // use_bias; the file has no tie_word_embeddings and Starcoder2Config's default ties them).
    // Attention 2 * 6144^2 + 2 * 6144 * 512 + biases 6144 + 1024 + 6144 = 81,802,240; MLP
    // 2 * 6144 * 24,576 + 24,576 + 6,144 = 302,020,608; two LayerNorms with bias 24,576:
    // 383,847,424, * 40 = 15,353,896,960; embeddings 49,152 * 6144 = 301,989,888; final LayerNorm
    // 12,288: 15,655,899,136 (untied, as before, it was 15,957,889,024).
    assert!(import("starcoder2-15b.json").model.tie_embeddings);
    assert_eq!(total("starcoder2-15b.json"), 15_655_899_136);
}

/// Families the model already expressed: the totals were right before this audit and stay so.
#[test]
fn llama_like_and_gpt_2_era_families_match_their_published_counts() {
    for (file, published) in [
        // Phi-3-mini-4k (d 3072, 32 layers, 32 heads, FFN 8192, vocab 32,064, untied): qkv_proj
        // 3 * 3072^2 + o_proj 3072^2 = 37,748,736; gate_up_proj 3072 * 16,384 + down_proj 8192 * 3072 =
        // 75,497,472; two RMSNorms 6,144: 113,252,352, * 32 = 3,624,075,264; embeddings and lm_head
        // 2 * 32,064 * 3072 = 197,001,216; final norm 3,072: 3,821,079,552, the published count.
        ("phi-3-mini-4k-instruct.json", 3_821_079_552),
        // Phi-4 (d 5120, 40 layers, 40 heads and 10 KV heads of 128, FFN 17,920, vocab 100,352,
        // untied): attention 2 * 5120^2 + 2 * 5120 * 1280 = 65,536,000; MLP 3 * 5120 * 17,920 =
        // 275,251,200; norms 10,240: 340,797,440, * 40 = 13,631,897,600; 2 * 100,352 * 5120 =
        // 1,027,604,480; final 5,120: 14,659,507,200, the published count.
        ("phi-4.json", 14_659_507_200),
        // GPT-NeoX-20B (d 6144, 44 layers, FFN 24,576, vocab 50,432, untied): query_key_value
        // 3 * 6144^2 + 3 * 6144, dense 6144^2 + 6144 = 151,019,520; MLP 2 * 6144 * 24,576 + 24,576 +
        // 6,144 = 302,020,608; two LayerNorms 24,576: 453,064,704, * 44 = 19,934,846,976; embed_in and
        // embed_out 2 * 50,432 * 6144 = 619,708,416; final LayerNorm 12,288: 20,554,567,680 (published).
        ("gpt-neox-20b.json", 20_554_567_680),
        // Pythia-160M (d 768, 12 layers, FFN 3072, vocab 50,304, untied): attention 4 * 768^2 + 4 * 768
        // = 2,362,368; MLP 2 * 768 * 3072 + 3072 + 768 = 4,722,432; LayerNorms 3,072: 7,087,872, * 12 =
        // 85,054,464; 2 * 50,304 * 768 = 77,266,944; final 1,536: 162,322,944 (published).
        ("pythia-160m.json", 162_322_944),
        // Falcon-7B (d 4544, 32 layers, 71 heads of 64, multi-query, no bias, tied, vocab 65,024):
        // query_key_value 4544 * (4544 + 2 * 64) = 21,229,568; dense 4544^2 = 20,647,936; MLP
        // 2 * 4544 * 18,176 = 165,183,488; one input_layernorm (parallel_attn) 9,088: 207,070,080,
        // * 32 = 6,626,242,560; embeddings 65,024 * 4544 = 295,469,056; ln_f 9,088: 6,921,720,704 (published).
        ("falcon-7b.json", 6_921_720_704),
        // Falcon-40B (d 8192, 60 layers, 128 heads and 8 KV heads of 64, new decoder architecture):
        // query_key_value 8192 * (8192 + 2 * 512) = 75,497,472; dense 67,108,864; MLP 2 * 8192 * 32,768
        // = 536,870,912; ln_attn and ln_mlp 32,768: 679,510,016, * 60 = 40,770,600,960; embeddings
        // 65,024 * 8192 = 532,676,608; ln_f 16,384: 41,303,293,952 (published).
        ("falcon-40b.json", 41_303_293_952),
        ("falcon-40b-refinedweb.json", 41_303_293_952),
        // ChatGLM3-6B (d 4096, 28 layers, 32 heads and 2 KV groups of 128, FFN 13,696, padded vocab
        // 65,024, add_qkv_bias, no add_bias_linear, RMSNorm, untied): query_key_value 4096 * 4608 + 4608
        // = 18,878,976; dense 4096^2 = 16,777,216; dense_h_to_4h 4096 * 27,392 + dense_4h_to_h
        // 13,696 * 4096 = 168,296,448; two RMSNorms 8,192: 203,960,832, * 28 = 5,710,903,296; embedding
        // and output_layer 2 * 65,024 * 4096 = 532,676,608; final 4,096: 6,243,584,000 (published).
        ("chatglm3-6b.json", 6_243_584_000),
        // GLM-4-9B-chat: 40 such layers, 8,158,433,280; 2 * 151,552 * 4096 = 1,241,513,984; final
        // 4,096: 9,399,951,360 (published).
        ("glm-4-9b-chat.json", 9_399_951_360),
    ] {
        assert_eq!(total(file), published, "{file}");
    }
}
