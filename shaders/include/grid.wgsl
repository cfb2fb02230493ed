// Where an invocation is in its launch. A launch of more workgroups than one dimension holds (65535
// on the web) is folded into a 2D grid (`grid` in src/gpu/launch.rs); kernels unfold it here and
// return early past their real count. Pasted in at a kernel's `// #include grid.wgsl` line.

// Invocations per workgroup, set by the kernel's owner.
override WG: u32 = 64u;

// An entry point's workgroup builtins: `fn main(at: GridPlace, @builtin(local_invocation_index) lid: u32)`.
// The invocation's own index stays a parameter of its own: a browser's WGSL compiler (Tint) judges a
// struct by its least uniform member, and tiled kernels need `at` uniform to reach their barriers.
struct GridPlace {
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(num_workgroups) wg_count: vec3<u32>,
}

// The workgroup's index among the launch's.
fn workgroup_index(at: GridPlace) -> u32 {
    return at.wg_id.x + at.wg_id.y * at.wg_count.x;
}

// The invocation's index among the launch's, WG to a workgroup (`lid`: its index in the workgroup).
fn invocation_index(at: GridPlace, lid: u32) -> u32 {
    return workgroup_index(at) * WG + lid;
}
