//! Twin of `shaders/rope.wgsl`'s rotation (its `split_heads` also moves each head into the attention
//! kernels' layout, and `merge_heads` moves them back: copies, checked by the layer they serve).

use crate::attention::rope::RopeTable;

/// Twin of `rope.wgsl` (its rotation; the kernel also moves each head into a `[heads, tokens, d]`
/// layout): every head (`head_dim` wide) of every token row of `x` (`[tokens, width]`, `width` a
/// multiple of `head_dim`) rotated as the token at its position (row i at position i).
pub fn rope(x: &mut [f32], width: usize, head_dim: usize, table: &RopeTable) {
    for (pos, token) in x.chunks_exact_mut(width).enumerate() {
        token.chunks_exact_mut(head_dim).for_each(|head| table.rotate(head, pos));
    }
}
