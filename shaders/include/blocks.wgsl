// Near-equal blocks of indices, as pooled heatmaps cut rows and keys (src/attention/pooled.rs
// `block_range` is the CPU's copy): `n` items in `count` blocks, block b = [block_start, block_end).

// First index of block `b`: floor(b * n / count), computed without overflowing u32 for n up to 2^32
// and count up to 65535.
fn block_start(b: u32, count: u32, n: u32) -> u32 {
    return b * (n / count) + (b * (n % count)) / count;
}

// One past the last index of block `b`; at least one item, so upsampling repeats rows.
fn block_end(b: u32, count: u32, n: u32) -> u32 {
    return max(block_start(b + 1u, count, n), block_start(b, count, n) + 1u);
}

// The block holding index `i` (< n) when count <= n (no block is empty): an estimate, then corrected.
fn block_of(i: u32, count: u32, n: u32) -> u32 {
    var b = min(u32(f32(i) * (f32(count) / f32(n))), count - 1u);
    while b > 0u && block_start(b, count, n) > i {
        b--;
    }
    while b + 1u < count && block_start(b + 1u, count, n) <= i {
        b++;
    }
    return b;
}
