use attention_lab::attention::{AttentionShape, Mask, reference};
use attention_lab::gpu::{GpuContext, Kernels, KvCache};
use attention_lab::model::decode_demo::{Tensor, token_values};

#[test]
fn scratch() {
    let ctx = pollster::block_on(GpuContext::new()).expect("gpu");
    let kernels = Kernels::new(&ctx);
    for (h_q, h_kv, d, cap) in [(4u32, 2u32, 20u32, 64u32), (4, 2, 64, 256), (32, 8, 128, 256), (4,2,64,64), (2,1,32,64)] {
        let mut cache = KvCache::new(&ctx, h_kv, d, cap).expect("cache");
        let mut ks: Vec<Vec<f32>> = vec![]; let mut vs: Vec<Vec<f32>> = vec![];
        let mut worst = 0f32; let mut worst_t = 0;
        for t in 0..64u64 {
            let k = token_values(1, 0, t, Tensor::K, (h_kv*d) as usize);
            let v = token_values(1, 0, t, Tensor::V, (h_kv*d) as usize);
            cache.append(&ctx, &k, &v).expect("append");
            ks.push(k); vs.push(v);
            let q = token_values(100, 0, t, Tensor::Q, (h_q*d) as usize);
            let got = pollster::block_on(kernels.decode(&ctx, &cache, &q, h_q, Mask::Causal, 1.0/(d as f32).sqrt())).expect("decode");
            let n = (t+1) as usize;
            let pack = |rows: &Vec<Vec<f32>>| -> Vec<f32> { (0..h_kv as usize).flat_map(|h| rows.iter().flat_map(move |r| r[h*d as usize..][..d as usize].to_vec())).collect() };
            let shape = AttentionShape { h_q, h_kv, n_q: 1, n_kv: n as u32, d };
            let want = reference::forward(&q, &pack(&ks), &pack(&vs), &shape, Mask::Causal, 1.0/(d as f32).sqrt());
            let diff = want.o.iter().zip(&got.o).map(|(a,b)| (a-b).abs()).fold(0.0, f32::max);
            if diff > worst { worst = diff; worst_t = t; }
        }
        println!("h_q {h_q} h_kv {h_kv} d {d} cap {cap}: worst {worst} at t {worst_t}");
    }
}
