//! One lane per layer kind that stores a cache: its demo shape, the pool's books (which page holds
//! which request's tokens) and the pool itself, where the engine keeps it; and the K/V rows and query
//! each token brings, recomputable at any time. A lane plans each step (which page and slot, what to
//! copy, the page table); the engine's one entry point writes and attends.

use crate::cpu::reference::Forward;
use crate::engine::Engine;
use crate::model::Mask;
use crate::model::Model;
use crate::model::decode_demo::{DemoLayer, Tensor, demo_layers, token_values, value_stream};
use crate::model::limits::KERNEL_MAX_HEAD_DIM;
use crate::model::paging::{PagedCache, pages_for};
use crate::paged_decode::{DecodePool, PoolStep, pool_bytes};

/// Request A (index 0) appends from the start; request B (index 1) arrives later sharing its prompt.
pub const REQUESTS: usize = 2;

pub struct Lane {
    pub layer: DemoLayer,
    /// The model's layers of this kind that store a cache (the real model's bytes count each).
    pub storing_layers: u32,
    /// The pool's books: pages, owners, tables.
    pub paged: PagedCache,
    /// The pool's K and V, on the GPU (or the CPU tier's twin).
    pub pool: DecodePool,
}

impl Lane {
    /// Appends `request`'s token at `position` (lane `slot`) and runs the decode step over the
    /// request's tokens: the books say where the token goes (a copy of a shared page first), the
    /// engine writes it there and attends through the request's page table.
    pub async fn step(
        &mut self,
        engine: &Engine,
        slot: u32,
        request: u32,
        position: u64,
    ) -> Result<(Vec<f32>, Forward), String> {
        let write = self.paged.write(request as usize)?;
        let (k, v) = kv_rows(&self.layer, slot, request, position);
        let q = query(&self.layer, slot, request, position);
        let table = self.paged.kernel_table(request as usize);
        let n_kv = u32::try_from(position + 1).map_err(|_| "too many tokens for the kernel")?;
        let layer = self.layer;
        let step = PoolStep {
            write,
            k: &k,
            v: &v,
            table: &table,
            n_kv,
            q: &q,
            h_q: layer.h_q,
            mask: layer_mask(&layer)?,
            scale: layer.scale(),
        };
        let out = engine.paged_decode_step(&self.pool, &step).await?;
        Ok((q, out))
    }

    /// Bytes of the pages some request holds: what the pool really uses.
    pub fn used_bytes(&self) -> u64 {
        self.paged.live_pages() as u64 * self.pool.page_bytes()
    }
}

/// Pages each lane's pool holds: room for both requests' whole runs, unshared.
pub fn pool_pages(capacity_tokens: u32) -> u32 {
    (2 * pages_for(capacity_tokens.into())).try_into().unwrap_or(u32::MAX)
}

/// Bytes of the K/V pools a run of `capacity_tokens` allocates: every lane, K and V in f32 (checked
/// against the job limit before any is allocated).
pub fn buffers_bytes(model: &Model, capacity_tokens: u32) -> u64 {
    demo_layers(model, KERNEL_MAX_HEAD_DIM)
        .iter()
        .map(|l| pool_bytes(l.h_kv, l.run_dim, pool_pages(capacity_tokens)))
        .fold(0, u64::saturating_add)
}

/// One lane per layer kind that stores a cache, in schedule order, each with request A started and a
/// pool for `capacity_tokens` of each request.
pub fn open_lanes(engine: &Engine, model: &Model, capacity_tokens: u32) -> Result<Vec<Lane>, String> {
    demo_layers(model, KERNEL_MAX_HEAD_DIM)
        .into_iter()
        .map(|layer| {
            let pages = pool_pages(capacity_tokens);
            let pool = engine.kv_pool(layer.h_kv, layer.run_dim, pages)?;
            let mut paged = PagedCache::with_capacity(layer.kind, pages as usize);
            paged.add_sequence();
            Ok(Lane { layer, storing_layers: storing_layers(model, &layer), paged, pool })
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
    use crate::catalog::presets::preset;

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
        // 64 tokens per request: 2 x 4 pages.
        assert!(lanes.iter().all(|l| l.paged.sequences.len() == 1 && l.pool.pages() == 8));
        assert!(open_lanes(&cpu(), gemma, 0).is_err(), "an empty pool is refused");
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
    fn each_step_fills_a_page_slot_and_a_full_pool_refuses() {
        let engine = cpu();
        // 16 tokens per request: a pool of 2 pages.
        let mut lanes = open_lanes(&engine, preset("llama-3-8b").unwrap(), 16).unwrap();
        let lane = &mut lanes[0];
        for position in 0..17 {
            let stepped = pollster::block_on(lane.step(&engine, 0, 0, position));
            assert!(stepped.is_ok(), "{stepped:?}");
        }
        assert_eq!((lane.paged.sequences[0].len_tokens, lane.paged.live_pages()), (17, 2));
        // Llama 3 8B's lane: 8 KV heads x 16 tokens x 128 dims x 4 B x 2 (K, V) = 131,072 B a page.
        assert_eq!(lane.used_bytes(), 2 * 131_072);
        let refused = pollster::block_on(lane.step(&engine, 0, 0, 17)).err();
        assert_eq!(refused, None, "slot 1 of page 1 is free");
        for position in 18..32 {
            pollster::block_on(lane.step(&engine, 0, 0, position)).unwrap();
        }
        let full = pollster::block_on(lane.step(&engine, 0, 0, 32)).unwrap_err();
        assert_eq!(full, "the pool's 2 pages of 16 tokens are all in use: request 0 cannot grow past 32 tokens");
        assert_eq!(layer_mask(&lane.layer), Ok(Mask::Causal));
    }
}
