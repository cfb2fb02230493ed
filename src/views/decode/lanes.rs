//! One lane per layer kind that stores a cache: its demo shape, the paged accounting, and one engine
//! decode cache per request; and the K/V rows and query each token brings, recomputable at any time.

use crate::engine::{DecodeCache, Engine};
use crate::model::Mask;
use crate::model::Model;
use crate::model::decode_demo::{DemoLayer, Tensor, demo_layers, token_values, value_stream};
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, product};
use crate::model::paging::PagedCache;

/// Request A (index 0) appends from the start; request B (index 1) arrives later sharing its prompt.
pub const REQUESTS: usize = 2;

pub struct Lane {
    pub layer: DemoLayer,
    /// The model's layers of this kind that store a cache (the real model's bytes count each).
    pub storing_layers: u32,
    pub paged: PagedCache,
    /// Request A's buffer from the start; B's once it arrives.
    pub caches: [Option<DecodeCache>; REQUESTS],
}

impl Lane {
    /// Appends `request`'s token at `position` (lane `slot`): its K/V rows to the buffer and a token to
    /// the pages. Returns the buffer, for the kernel to read.
    pub fn append(&mut self, engine: &Engine, slot: u32, request: u32, position: u64) -> Result<&DecodeCache, String> {
        let (k, v) = kv_rows(&self.layer, slot, request, position);
        let cache = self.caches[request as usize].as_mut().ok_or("decode cache missing")?;
        engine.append_kv(cache, &k, &v)?;
        self.paged.append(request as usize);
        Ok(cache)
    }
}

/// Bytes of the K/V buffers a run of `capacity_tokens` allocates: two requests, every lane, K and V
/// in f32 (checked against the job limit before any is allocated).
pub fn buffers_bytes(model: &Model, capacity_tokens: u32) -> u64 {
    demo_layers(model, KERNEL_MAX_HEAD_DIM)
        .iter()
        .map(|l| product(&[2, 2, l.h_kv.into(), l.run_dim.into(), capacity_tokens.into(), 4]))
        .fold(0, u64::saturating_add)
}

/// One lane per layer kind that stores a cache, in schedule order, each with request A started and a
/// buffer of `capacity_tokens` for it.
pub fn open_lanes(engine: &Engine, model: &Model, capacity_tokens: u32) -> Result<Vec<Lane>, String> {
    demo_layers(model, KERNEL_MAX_HEAD_DIM)
        .into_iter()
        .map(|layer| {
            let cache = engine.decode_cache(layer.h_kv, layer.run_dim, capacity_tokens)?;
            let mut paged = PagedCache::new(layer.kind);
            paged.add_sequence();
            Ok(Lane { layer, storing_layers: storing_layers(model, &layer), paged, caches: [Some(cache), None] })
        })
        .collect()
}

fn storing_layers(model: &Model, layer: &DemoLayer) -> u32 {
    let stores = model.kv_storing_layers();
    model.schedule.layers().iter().zip(&stores).filter(|&(&k, &s)| k == layer.kind && s).count() as u32
}

/// The mask the kernel applies in `layer` (every demo layer stores a cache, so has attention).
pub fn layer_mask(layer: &DemoLayer) -> Result<Mask, String> {
    Mask::of_layer(layer.kind).ok_or_else(|| format!("a {} layer has no attention to decode", layer.kind.noun()))
}

/// The K and V rows (`[h_kv, run_dim]`) of `request`'s token at `position` in lane `slot`.
pub fn kv_rows(layer: &DemoLayer, slot: u32, request: u32, position: u64) -> (Vec<f32>, Vec<f32>) {
    let n = (layer.h_kv * layer.run_dim) as usize;
    let stream = value_stream(request, position);
    let k = token_values(stream, slot, position, Tensor::K, n);
    let v = if layer.k_eq_v { k.clone() } else { token_values(stream, slot, position, Tensor::V, n) };
    (k, v)
}

/// The query (`[h_q, run_dim]`) `request`'s token at `position` asks with in lane `slot`.
pub fn query(layer: &DemoLayer, slot: u32, request: u32, position: u64) -> Vec<f32> {
    token_values(100 + u64::from(request), slot, position, Tensor::Q, (layer.h_q * layer.run_dim) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::presets::preset;

    fn cpu() -> Engine {
        Engine::Cpu { reason: "native test".into() }
    }

    #[test]
    fn one_lane_per_stored_kind_with_request_a_started() {
        let gemma = preset("gemma-3-27b").unwrap();
        let lanes = open_lanes(&cpu(), gemma, 64).unwrap();
        let kinds: Vec<&str> = lanes.iter().map(|l| l.layer.kind.noun()).collect();
        assert_eq!(kinds, ["sliding", "global"]);
        // Gemma 3 27B: 62 layers, five sliding to one global.
        assert_eq!(lanes.iter().map(|l| l.storing_layers).sum::<u32>(), 62);
        assert!(lanes.iter().all(|l| l.paged.sequences.len() == 1 && l.caches[0].is_some() && l.caches[1].is_none()));
        assert!(open_lanes(&cpu(), gemma, 0).is_err(), "an empty buffer is refused");
    }

    #[test]
    fn rows_match_the_shape_and_k_equals_v_where_the_model_shares_them() {
        let lanes = open_lanes(&cpu(), preset("gemma-4-12b").unwrap(), 8).unwrap();
        for lane in &lanes {
            let (k, v) = kv_rows(&lane.layer, 0, 0, 3);
            assert_eq!(k.len(), (lane.layer.h_kv * lane.layer.run_dim) as usize);
            assert_eq!(k == v, lane.layer.k_eq_v);
            assert_eq!(query(&lane.layer, 0, 1, 3).len(), (lane.layer.h_q * lane.layer.run_dim) as usize);
        }
        assert_ne!(query(&lanes[0].layer, 0, 0, 3), query(&lanes[0].layer, 0, 1, 3), "each request asks its own");
    }

    #[test]
    fn appending_fills_the_buffer_and_the_pages() {
        let engine = cpu();
        let mut lanes = open_lanes(&engine, preset("llama-3-8b").unwrap(), 4).unwrap();
        let lane = &mut lanes[0];
        for position in 0..3 {
            assert_eq!(lane.append(&engine, 0, 0, position).map(DecodeCache::len_tokens), Ok(position as u32 + 1));
        }
        assert_eq!(lane.paged.sequences[0].len_tokens, 3);
        assert!(lane.append(&engine, 0, 1, 0).is_err(), "request B has no buffer before it arrives");
        assert_eq!(layer_mask(&lane.layer), Ok(Mask::Causal));
    }
}
