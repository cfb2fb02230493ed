//! The Rust side of `shaders/include/attention_io.wgsl`: the uniform parameters of every kernel that
//! walks a KV head's rows (`flash_attention`, `flash_attention_subgroup`, `row_softmax`,
//! `row_softmax_subgroup`). `naive_attention` and `attention_probs` keep params of their own: they
//! share the first eight fields ([`QueryHeadParams`]), then need others (invocations; a region and
//! pooling).

use bytemuck::{Pod, Zeroable};

use crate::attention::AttentionShape;
use crate::model::Mask;

/// Uniform parameters of one launch.
/// Keep in sync with `Params` in `shaders/include/attention_io.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct AttentionParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_kv: u32,
    pub group: u32,
    pub kv_stride: u32,
    pub mask_kind: u32,
    pub mask_size: u32,
    pub scale: f32,
    pub tiles_per_kv_head: u32,
    pub q_offset: u32,
    /// Row softmax with block outputs: key blocks per row.
    pub key_blocks: u32,
    pub _pad: u32,
}

impl AttentionParams {
    /// One tile over no KV head: a workgroup that returns at once (a pipeline's warm-up launch).
    pub const IDLE: AttentionParams = AttentionParams {
        n_q: 0,
        n_kv: 0,
        h_kv: 0,
        group: 1,
        kv_stride: 0,
        mask_kind: 0,
        mask_size: 0,
        scale: 0.0,
        tiles_per_kv_head: 1,
        q_offset: 0,
        key_blocks: 0,
        _pad: 0,
    };

    /// The parameters of one launch whose workgroups each cover `1 / tiles_per_kv_head` of a KV head's rows.
    pub fn new(shape: AttentionShape, kv_stride: u32, mask: Mask, scale: f32, tiles_per_kv_head: u32) -> Self {
        let (mask_kind, mask_size) = mask.to_gpu();
        Self {
            n_q: shape.n_q,
            n_kv: shape.n_kv,
            h_kv: shape.h_kv,
            group: shape.group_size(),
            kv_stride,
            mask_kind,
            mask_size,
            scale,
            tiles_per_kv_head,
            q_offset: shape.q_offset(),
            key_blocks: 0,
            _pad: 0,
        }
    }
}

/// The first eight fields of `Params` in `shaders/naive_attention.wgsl` and
/// `shaders/attention_probs.wgsl`, which both paste in `shaders/include/query_head_params.wgsl` (keep
/// in sync with it): which query heads against which keys, under which mask and scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct QueryHeadParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_q: u32,
    pub group: u32,
    pub mask_kind: u32,
    pub mask_size: u32,
    pub scale: f32,
    pub q_offset: u32,
}

impl QueryHeadParams {
    pub fn new(shape: AttentionShape, mask: Mask, scale: f32) -> Self {
        let (mask_kind, mask_size) = mask.to_gpu();
        Self {
            n_q: shape.n_q,
            n_kv: shape.n_kv,
            h_q: shape.h_q,
            group: shape.group_size(),
            mask_kind,
            mask_size,
            scale,
            q_offset: shape.q_offset(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn params_match_the_wgsl_layout() {
        // 12 u32-sized fields: a multiple of 16 bytes, as uniform buffers want.
        assert_eq!(size_of::<super::AttentionParams>(), 48);
    }
}
