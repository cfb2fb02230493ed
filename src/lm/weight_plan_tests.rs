use super::*;

fn fixture(name: &str) -> (String, Vec<u8>) {
    let dir = format!("{}/tests/data/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(format!("{dir}/config.json")).unwrap();
    (config, std::fs::read(format!("{dir}/model.safetensors")).unwrap())
}

fn header(file: &[u8]) -> Header {
    let json_len = Header::json_len(*file.first_chunk::<8>().unwrap(), file.len() as u64).unwrap() as usize;
    Header::parse(&file[8..8 + json_len], file.len() as u64).unwrap()
}

#[test]
fn qwen3_fixture_plan_by_hand() {
    let (config, file) = fixture("qwen3");
    let plan = WeightPlan::new(&config, &[header(&file)]).unwrap();
    // hidden 64, 4 query heads and 2 KV heads of 32, MLP 128, vocab 4096, 2 layers, tied.
    // Per layer: Q 128 x 64 = 8,192, K and V 64 x 64 = 4,096 each: Qkv 16,384; QkNorm 2 x 32 = 64;
    // O 64 x 128 = 8,192; gate and up 128 x 64 each: 16,384; down 64 x 128 = 8,192; norms 64 each.
    let layer = |slot| plan.slots[&Slot::Layer(1, slot)];
    assert_eq!(layer(LayerSlot::Qkv), 16_384);
    assert_eq!(layer(LayerSlot::QkNorm), 64);
    assert_eq!((layer(LayerSlot::O), layer(LayerSlot::GateUp), layer(LayerSlot::Down)), (8_192, 16_384, 8_192));
    assert!(!plan.slots.contains_key(&Slot::Layer(0, LayerSlot::QkvBias)) && !plan.slots.contains_key(&Slot::LmHead));
    // 2 x (16,384 + 64 + 8,192 + 16,384 + 8,192 + 128) = 98,688; embed 262,144; final norm 64.
    assert_eq!(plan.parameters(), 360_896);
    // 2 layers x 11 tensors + embed + final norm, all bf16: 2 bytes each.
    assert_eq!(plan.pieces.len(), 24);
    assert_eq!(plan.file_bytes(), 2 * 360_896);
    let k = plan.pieces.iter().find(|p| p.name == "model.layers.0.self_attn.k_proj.weight").unwrap();
    assert_eq!(
        (k.slot, k.dest_offset, k.elements, k.dtype),
        (Slot::Layer(0, LayerSlot::Qkv), 128 * 64, 4096, TensorDType::Bf16)
    );
    let k_norm = plan.pieces.iter().find(|p| p.name == "model.layers.0.self_attn.k_norm.weight").unwrap();
    assert_eq!(k_norm.dest_offset, 32);
    // Pieces lie in file order, each inside the file.
    assert!(plan.pieces.windows(2).all(|w| w[0].file_offset + w[0].bytes() <= w[1].file_offset));
    assert!(plan.pieces.iter().all(|p| p.file_offset + p.bytes() <= file.len() as u64));
}

#[test]
fn bf16_matrices_stay_packed_and_the_rest_is_f32() {
    let (config, file) = fixture("qwen3");
    let plan = WeightPlan::new(&config, &[header(&file)]).unwrap();
    let format = |slot| plan.format(slot);
    assert_eq!(format(Slot::Embed), WeightFormat::Bf16);
    assert_eq!(format(Slot::Layer(1, LayerSlot::GateUp)), WeightFormat::Bf16);
    assert_eq!(format(Slot::Layer(1, LayerSlot::QkNorm)), WeightFormat::F32);
    assert_eq!(format(Slot::FinalNorm), WeightFormat::F32);
    // Matrices 360,896 - 2 x (64 + 128) - 64 = 360,448 values at 2 bytes, vectors 448 at 4.
    assert_eq!(plan.gpu_bytes(), 2 * 360_448 + 4 * 448);
    // One f16 tensor in a fused matrix leaves that matrix f32 (it is widened on its way in).
    let mut mixed = plan.pieces.clone();
    let k = mixed.iter_mut().find(|p| p.name == "model.layers.0.self_attn.k_proj.weight").unwrap();
    k.dtype = TensorDType::F16;
    assert_eq!(format_of(Slot::Layer(0, LayerSlot::Qkv), &mixed), WeightFormat::F32);
    assert_eq!(format_of(Slot::Layer(1, LayerSlot::Qkv), &mixed), WeightFormat::Bf16);
    // As does a piece that would start inside a u32 word.
    let mut odd = plan.pieces.clone();
    odd.iter_mut().find(|p| p.name == "model.layers.0.mlp.up_proj.weight").unwrap().dest_offset += 1;
    assert_eq!(format_of(Slot::Layer(0, LayerSlot::GateUp), &odd), WeightFormat::F32);
}

#[test]
fn biases_and_an_untied_head_have_their_slots() {
    let (config, file) = fixture("qwen2");
    let plan = WeightPlan::new(&config, &[header(&file)]).unwrap();
    // Q 64 + K 32 + V 32 biases (4 heads and 2 KV heads of 16).
    assert_eq!(plan.slots[&Slot::Layer(0, LayerSlot::QkvBias)], 128);
    let (config, file) = fixture("llama3");
    let plan = WeightPlan::new(&config, &[header(&file)]).unwrap();
    assert_eq!(plan.slots[&Slot::LmHead], 4096 * 64);
}

#[test]
fn missing_misshapen_and_doubled_tensors_are_named() {
    let (config, file) = fixture("qwen3");
    let good = header(&file);
    let mut missing = good.clone();
    missing.tensors.remove("model.layers.1.mlp.up_proj.weight");
    let err = WeightPlan::new(&config, &[missing]).err().unwrap().0;
    assert_eq!(err, "the checkpoint has no tensor model.layers.1.mlp.up_proj.weight");
    let mut misshapen = good.clone();
    misshapen.tensors.get_mut("model.norm.weight").unwrap().shape = vec![65];
    let err = WeightPlan::new(&config, &[misshapen]).err().unwrap().0;
    assert_eq!(err, "tensor model.norm.weight has shape [65], expected [64]");
    let err = WeightPlan::new(&config, &[good.clone(), good.clone()]).err().unwrap().0;
    assert!(err.contains("is in two of the weight files"), "{err}");
    // Another model's weights under this config: Qwen2's heads are 16 wide, Qwen3's 32.
    let (_, qwen2) = fixture("qwen2");
    let err = WeightPlan::new(&config, &[header(&qwen2)]).err().unwrap().0;
    assert_eq!(err, "tensor model.layers.0.self_attn.q_proj.weight has shape [64, 64], expected [128, 64]");
    // Unused tensors are ignored.
    let mut extra = good;
    let info = extra.tensors["model.norm.weight"].clone();
    extra.tensors.insert("model.layers.0.self_attn.rotary_emb.inv_freq".into(), info);
    assert!(WeightPlan::new(&config, &[extra]).is_ok());
}

#[test]
fn a_sharded_index_names_its_files() {
    let index = r#"{"metadata": {"total_size": 10}, "weight_map": {
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors"}}"#;
    assert_eq!(index_shards(index).unwrap(), ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
    assert!(index_shards("{}").unwrap_err().0.contains("no weight_map"));
    assert!(index_shards(r#"{"weight_map": {"a": 3}}"#).unwrap_err().0.contains("not a file name"));
    assert!(index_shards("[").unwrap_err().0.starts_with("model.safetensors.index.json"));
}
