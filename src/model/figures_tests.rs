//! Every preset's headline figures, each recomputed by hand in the comment beside it.
//! Byte figures are exact integers; "naive" lines show what a calculator that ignores GQA, windows
//! or MLA would print, and the tests check the model does *not* produce that.

use super::config::Model;
use super::dtype::DType;
use super::kv_cache::{kv_bytes_per_token, kv_total_bytes};
use super::params::{attn_params, model_params};
use super::schedule::LayerKind;
use crate::catalog::presets::preset;

const K8: u64 = 8192;
const K128: u64 = 131_072;

fn model(id: &str) -> &'static Model {
    preset(id).unwrap_or_else(|| panic!("preset {id} missing"))
}

fn per_token(id: &str, d: DType) -> u128 {
    kv_bytes_per_token(model(id), d).unwrap_or_else(|e| panic!("{id}: {e}"))
}

fn total(id: &str, n: u64, d: DType) -> u128 {
    kv_total_bytes(model(id), n, d).unwrap_or_else(|e| panic!("{id}: {e}"))
}

fn attn(id: &str, kind: LayerKind) -> u128 {
    attn_params(model(id), kind).total()
}

const SW: fn(u64) -> LayerKind = |w| LayerKind::Sliding { window_tokens: w };
const G: LayerKind = LayerKind::Global;

#[test]
fn transformer_base() {
    // 6 layers * 8 heads * 2 (K,V) * 64 dims * 2 bytes = 12,288
    assert_eq!(per_token("transformer-base", DType::Fp16), 12_288);
    // fp32: 6 * 8 * 2 * 64 * 4 = 24,576
    assert_eq!(per_token("transformer-base", DType::Fp32), 24_576);
    // 12,288 * 8192 = 100,663,296; * 131072 = 1,610,612,736
    assert_eq!(total("transformer-base", K8, DType::Fp16), 100_663_296);
    assert_eq!(total("transformer-base", K128, DType::Fp16), 1_610_612_736);
    // 4 * 512 * 512 + 3 * 512 (QKV bias) + 512 (O bias) = 1,048,576 + 2,048 = 1,050,624
    assert_eq!(attn("transformer-base", G), 1_050_624);
}

#[test]
fn gpt2_small() {
    // 12 layers * 12 heads * 2 * 64 * 2 bytes = 36,864
    assert_eq!(per_token("gpt2-small", DType::Fp16), 36_864);
    // INT4: 12 * 12 * 2 * 64 * 4 bits / 8 = 9,216
    assert_eq!(per_token("gpt2-small", DType::Int4), 9_216);
    // 36,864 * 8192 = 301,989,888; * 131072 = 4,831,838,208
    assert_eq!(total("gpt2-small", K8, DType::Fp16), 301_989_888);
    assert_eq!(total("gpt2-small", K128, DType::Fp16), 4_831_838_208);
    // 4 * 768^2 + 3 * 768 + 768 = 2,359,296 + 3,072 = 2,362,368
    assert_eq!(attn("gpt2-small", G), 2_362_368);
    // the well-known 124,439,808 parameters
    assert_eq!(model_params(model("gpt2-small")).total(), 124_439_808);
}

#[test]
fn llama_2_7b() {
    // MHA: 32 layers * 32 kv heads * 2 * 128 * 2 bytes = 524,288
    assert_eq!(per_token("llama-2-7b", DType::Fp16), 524_288);
    // FP8: 32 * 32 * 2 * 128 * 1 = 262,144
    assert_eq!(per_token("llama-2-7b", DType::Fp8), 262_144);
    // 524,288 * 8192 = 4,294,967,296 (4 GiB); * 131072 = 68,719,476,736 (64 GiB)
    assert_eq!(total("llama-2-7b", K8, DType::Fp16), 4_294_967_296);
    assert_eq!(total("llama-2-7b", K128, DType::Fp16), 68_719_476_736);
    // 4 * 4096 * 4096 = 67,108,864
    assert_eq!(attn("llama-2-7b", G), 67_108_864);
    assert_eq!(model_params(model("llama-2-7b")).total(), 6_738_415_616);
}

#[test]
fn llama_2_70b_and_llama_3_70b() {
    for id in ["llama-2-70b", "llama-3-70b"] {
        // 80 layers * 8 kv heads * 2 * 128 * 2 bytes = 327,680
        assert_eq!(per_token(id, DType::Fp16), 327_680);
        // naive (64 heads, ignoring GQA): 80 * 64 * 2 * 128 * 2 = 2,621,440
        assert_ne!(per_token(id, DType::Fp16), 2_621_440);
        // INT4: 80 * 8 * 2 * 128 * 4 / 8 = 81,920
        assert_eq!(per_token(id, DType::Int4), 81_920);
        // 327,680 * 8192 = 2,684,354,560; * 131072 = 42,949,672,960
        assert_eq!(total(id, K8, DType::Fp16), 2_684_354_560);
        assert_eq!(total(id, K128, DType::Fp16), 42_949_672_960);
        // Q 8192*8192 + K 8192*1024 + V 8192*1024 + O 8192*8192
        // = 67,108,864 * 2 + 8,388,608 * 2 = 150,994,944
        assert_eq!(attn(id, G), 150_994_944);
    }
    assert_eq!(model_params(model("llama-2-70b")).total(), 68_976_648_192);
    assert_eq!(model_params(model("llama-3-70b")).total(), 70_553_706_496);
}

#[test]
fn llama_3_8b() {
    // 32 layers * 8 kv heads * 2 * 128 * 2 bytes = 131,072
    assert_eq!(per_token("llama-3-8b", DType::Fp16), 131_072);
    // naive (32 heads): 524,288
    assert_ne!(per_token("llama-3-8b", DType::Fp16), 524_288);
    // FP8: 65,536; 2-bit: 32 * 8 * 2 * 128 * 2 / 8 = 16,384
    assert_eq!(per_token("llama-3-8b", DType::Fp8), 65_536);
    assert_eq!(per_token("llama-3-8b", DType::Int2), 16_384);
    // 131,072 * 8192 = 1,073,741,824 (1 GiB); * 131072 = 17,179,869,184 (16 GiB)
    assert_eq!(total("llama-3-8b", K8, DType::Fp16), 1_073_741_824);
    assert_eq!(total("llama-3-8b", K128, DType::Fp16), 17_179_869_184);
    // Q 4096^2 + K 4096*1024 + V 4096*1024 + O 4096^2 = 2 * 16,777,216 + 2 * 4,194,304 = 41,943,040
    assert_eq!(attn("llama-3-8b", G), 41_943_040);
    assert_eq!(model_params(model("llama-3-8b")).total(), 8_030_261_248);
}

#[test]
fn llama_4_maverick_and_scout() {
    for id in ["llama-4-maverick", "llama-4-scout"] {
        let m = model(id);
        assert_eq!(m.schedule.summary(), "3 chunked : 1 global");
        // 48 layers * 8 kv heads * 2 * 128 * 2 bytes = 196,608 (one token, every layer growing)
        assert_eq!(per_token(id, DType::Fp16), 196_608);
        // At 8192 every layer holds 8192 tokens: 196,608 * 8192 = 1,610,612,736
        assert_eq!(total(id, K8, DType::Fp16), 1_610_612_736);
        // At 128K: 36 chunked layers * 4096 B * 8192 + 12 global layers * 4096 B * 131072
        // = 1,207,959,552 + 6,442,450,944 = 7,650,410,496
        assert_eq!(total(id, K128, DType::Fp16), 7_650_410_496);
        // naive (every layer global): 196,608 * 131072 = 25,769,803,776
        assert_ne!(total(id, K128, DType::Fp16), 25_769_803_776);
        // FP8 halves it: 3,825,205,248
        assert_eq!(total(id, K128, DType::Fp8), 3_825_205_248);
        // Q 5120*5120 + K,V 5120*1024 each + O 5120*5120 = 2 * 26,214,400 + 2 * 5,242,880 = 62,914,560
        assert_eq!(attn(id, G), 62_914_560);
        assert_eq!(attn(id, LayerKind::Chunked { chunk_tokens: 8192 }), 62_914_560);
    }
    // Published totals: about 400B and 109B (the latter with the vision encoder).
    let maverick = model_params(model("llama-4-maverick")).total();
    assert!((399_000_000_000..402_000_000_000).contains(&maverick), "{maverick}");
    let scout = model_params(model("llama-4-scout")).total();
    assert!((107_000_000_000..110_000_000_000).contains(&scout), "{scout}");
}

#[test]
fn mistral_7b() {
    // 32 layers * 8 kv heads * 2 * 128 * 2 bytes = 131,072 per token
    assert_eq!(per_token("mistral-7b", DType::Fp16), 131_072);
    // Window 4096: at 8192 and 128K each layer holds 4096 tokens: 131,072 * 4096 = 536,870,912
    assert_eq!(total("mistral-7b", K8, DType::Fp16), 536_870_912);
    assert_eq!(total("mistral-7b", K128, DType::Fp16), 536_870_912);
    // naive (no window): 131,072 * 131072 = 17,179,869,184
    assert_ne!(total("mistral-7b", K128, DType::Fp16), 17_179_869_184);
    // INT4: 536,870,912 / 4 = 134,217,728
    assert_eq!(total("mistral-7b", K128, DType::Int4), 134_217_728);
    assert_eq!(attn("mistral-7b", SW(4096)), 41_943_040);
    assert_eq!(model_params(model("mistral-7b")).total(), 7_241_732_096);
}

#[test]
fn qwen3_8b() {
    // 36 layers * 8 kv heads * 2 * 128 * 2 bytes = 147,456
    assert_eq!(per_token("qwen3-8b", DType::Fp16), 147_456);
    // 147,456 * 8192 = 1,207,959,552; * 131072 = 19,327,352,832
    assert_eq!(total("qwen3-8b", K8, DType::Fp16), 1_207_959_552);
    assert_eq!(total("qwen3-8b", K128, DType::Fp16), 19_327_352_832);
    // BF16 is the same width as FP16
    assert_eq!(total("qwen3-8b", K128, DType::Bf16), 19_327_352_832);
    // 41,943,040 projections + 2 * 128 QK-norm = 41,943,296
    assert_eq!(attn("qwen3-8b", G), 41_943_296);
    assert_eq!(model_params(model("qwen3-8b")).total(), 8_190_735_360);
}

#[test]
fn gemma_3_27b() {
    let m = model("gemma-3-27b");
    assert_eq!(m.schedule.summary(), "5 sliding : 1 global");
    // per layer per token: 16 kv heads * 2 * 128 * 2 bytes = 8,192; 62 layers: 507,904
    assert_eq!(per_token("gemma-3-27b", DType::Fp16), 507_904);
    // 8192: 52 sliding * 8,192 B * 1024 + 10 global * 8,192 B * 8192
    //     = 436,207,616 + 671,088,640 = 1,107,296,256
    assert_eq!(total("gemma-3-27b", K8, DType::Fp16), 1_107_296_256);
    // 128K: 436,207,616 + 10 * 8,192 * 131072 (10,737,418,240) = 11,173,625,856
    assert_eq!(total("gemma-3-27b", K128, DType::Fp16), 11_173_625_856);
    // naive (all 62 layers global): 507,904 * 131072 = 66,571,993,088
    assert_ne!(total("gemma-3-27b", K128, DType::Fp16), 66_571_993_088);
    // FP8: 5,586,812,928
    assert_eq!(total("gemma-3-27b", K128, DType::Fp8), 5_586_812_928);
    // Q 5376*4096 (22,020,096) + K,V 5376*2048 (11,010,048) each + O 22,020,096 + QK-norm 256 = 66,060,544
    assert_eq!(attn("gemma-3-27b", G), 66_060_544);
    assert_eq!(attn("gemma-3-27b", SW(1024)), 66_060_544);
    assert_eq!(model_params(m).total(), 27_009_346_304);
}

#[test]
fn gemma_4_12b() {
    let m = model("gemma-4-12b");
    assert_eq!(m.schedule.summary(), "5 sliding : 1 global");
    assert_eq!(m.schedule.counts().iter().map(|c| c.layers).collect::<Vec<_>>(), [40, 8]);
    // sliding per layer per token: 8 kv heads * 2 * 256 * 2 B = 8,192
    // global (1 kv head, K=V, 512 dims): 1 * 1 * 512 * 2 B = 1,024
    // per token: 40 * 8,192 + 8 * 1,024 = 327,680 + 8,192 = 335,872
    assert_eq!(per_token("gemma-4-12b", DType::Fp16), 335_872);
    // 8192: 40 * 8,192 * 1024 (335,544,320) + 8 * 1,024 * 8192 (67,108,864) = 402,653,184
    assert_eq!(total("gemma-4-12b", K8, DType::Fp16), 402_653_184);
    // 128K: 335,544,320 + 8 * 1,024 * 131072 (1,073,741,824) = 1,409,286,144
    // (seed 004 prints 671 MB for the sliding part, twice 335.5 MB, and ~2.4 GB in total)
    assert_eq!(total("gemma-4-12b", K128, DType::Fp16), 1_409_286_144);
    // hypothetical MHA with 48 global layers: 48 * 16 * 2 * 256 * 131072 * 2 = 103,079,215,104
    // = 103.08 GB (96 GiB); seed 004 prints "201 GB" and an 84x reduction, but the real ratio is
    // 103,079,215,104 / 1,409,286,144 = 73.1x.
    let mha = super::variants::mha_baseline(m);
    assert_eq!(kv_total_bytes(&mha, K128, DType::Fp16), Ok(103_079_215_104));
    // INT4: 1,409,286,144 / 4 = 352,321,536
    assert_eq!(total("gemma-4-12b", K128, DType::Int4), 352_321_536);
    // sliding: Q 3840*4096 (15,728,640) + K,V 3840*2048 (7,864,320) each + O 15,728,640 + QK-norm 512
    //        = 47,186,432
    assert_eq!(attn("gemma-4-12b", SW(1024)), 47_186_432);
    // global: Q 3840*8192 (31,457,280) + K 3840*512 (1,966,080) + no V + O 31,457,280 + QK-norm 1024
    //       = 64,881,664
    assert_eq!(attn("gemma-4-12b", G), 64_881_664);
}

#[test]
fn gemma_4_e4b() {
    let m = model("gemma-4-e4b");
    // 42 layers, globals at 5, 11, ..., 41: 35 sliding + 7 global; the last 18 reuse caches,
    // so layers 0..=23 store: 20 sliding + 4 global.
    assert_eq!(m.schedule.counts().iter().map(|c| c.layers).collect::<Vec<_>>(), [35, 7]);
    // sliding per layer per token: 2 * 2 * 256 * 2 B = 2,048; global: 2 * 2 * 512 * 2 B = 4,096
    // per token: 20 * 2,048 + 4 * 4,096 = 40,960 + 16,384 = 57,344
    assert_eq!(per_token("gemma-4-e4b", DType::Fp16), 57_344);
    // naive (no sharing): 35 * 2,048 + 7 * 4,096 = 100,352
    assert_ne!(per_token("gemma-4-e4b", DType::Fp16), 100_352);
    // 8192: 20 * 2,048 * 512 (20,971,520) + 4 * 4,096 * 8192 (134,217,728) = 155,189,248
    assert_eq!(total("gemma-4-e4b", K8, DType::Fp16), 155_189_248);
    // 128K: 20,971,520 + 4 * 4,096 * 131072 (2,147,483,648) = 2,168,455,168
    assert_eq!(total("gemma-4-e4b", K128, DType::Fp16), 2_168_455_168);
    // FP8: 1,084,227,584
    assert_eq!(total("gemma-4-e4b", K128, DType::Fp8), 1_084_227_584);
    // sliding: Q 2560*2048 (5,242,880) + K,V 2560*512 (1,310,720) each + O 5,242,880 + 512 = 13,107,712
    assert_eq!(attn("gemma-4-e4b", SW(512)), 13_107_712);
    // global: Q 2560*4096 (10,485,760) + K,V 2560*1024 (2,621,440) each + O 10,485,760 + 1024 = 26,215,424
    assert_eq!(attn("gemma-4-e4b", G), 26_215_424);
}

#[test]
fn deepseek_v2() {
    // MLA: 60 layers * (512 + 64) * 2 bytes = 69,120
    assert_eq!(per_token("deepseek-v2", DType::Fp16), 69_120);
    // naive MHA (128 heads of 128): 60 * 128 * 2 * 128 * 2 = 3,932,160
    assert_ne!(per_token("deepseek-v2", DType::Fp16), 3_932_160);
    // 69,120 * 8192 = 566,231,040; * 131072 = 9,059,696,640
    assert_eq!(total("deepseek-v2", K8, DType::Fp16), 566_231_040);
    assert_eq!(total("deepseek-v2", K128, DType::Fp16), 9_059_696_640);
    // FP8: 34,560 per token
    assert_eq!(per_token("deepseek-v2", DType::Fp8), 34_560);
    // Q 5120*1536 + 1536*128*192 = 7,864,320 + 37,748,736; KV down 5120*576 = 2,949,120;
    // KV up 512*128*256 = 16,777,216; O 128*128*5120 = 83,886,080; norms 1536 + 512
    // = 149,227,520
    assert_eq!(attn("deepseek-v2", G), 149_227_520);
    let t = model_params(model("deepseek-v2")).total();
    assert_eq!(t, 235_741_434_880); // published: 236B
}

#[test]
fn deepseek_v3() {
    // 61 layers * 576 * 2 bytes = 70,272
    assert_eq!(per_token("deepseek-v3", DType::Fp16), 70_272);
    // 70,272 * 8192 = 575,668,224; * 131072 = 9,210,691,584
    assert_eq!(total("deepseek-v3", K8, DType::Fp16), 575_668_224);
    assert_eq!(total("deepseek-v3", K128, DType::Fp16), 9_210_691_584);
    // INT4: 61 * 576 * 4 / 8 = 17,568
    assert_eq!(per_token("deepseek-v3", DType::Int4), 17_568);
    // 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 + 2,048 = 187,107,328
    assert_eq!(attn("deepseek-v3", G), 187_107_328);
    let p = model_params(model("deepseek-v3"));
    // published: 671B total, 37B active
    assert!((670_000_000_000..672_000_000_000).contains(&p.total()), "{}", p.total());
    assert!((36_000_000_000..39_000_000_000).contains(&p.active()), "{}", p.active());
}

#[test]
fn every_preset_total_is_monotone_and_dtype_scaled() {
    for p in crate::catalog::presets::all_presets() {
        let m = &p.model;
        let mut last = 0u128;
        for n in [0u64, 1, 511, 512, 1000, 1024, 4096, 8192, 8193, 65_536, 131_072, 1 << 20] {
            let t = kv_total_bytes(m, n, DType::Fp16).unwrap_or(0);
            assert!(t >= last, "{} at {n}", p.id);
            last = t;
            // FP32 doubles, FP8 halves, INT4 quarters, 2-bit eighths (all element counts are even).
            assert_eq!(kv_total_bytes(m, n, DType::Fp32).unwrap_or(0), 2 * t, "{}", p.id);
            assert_eq!(kv_total_bytes(m, n, DType::Fp8).unwrap_or(0) * 2, t, "{}", p.id);
            assert_eq!(kv_total_bytes(m, n, DType::Int4).unwrap_or(0) * 4, t, "{}", p.id);
            assert_eq!(kv_total_bytes(m, n, DType::Int2).unwrap_or(0) * 8, t, "{}", p.id);
        }
        // One token costs exactly the per-token figure.
        assert_eq!(kv_total_bytes(m, 1, DType::Fp16).ok(), kv_bytes_per_token(m, DType::Fp16).ok(), "{}", p.id);
    }
}
