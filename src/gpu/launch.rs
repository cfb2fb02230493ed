//! Launch arithmetic every kernel shares: folding many workgroups into a 2D grid, and head-dimension
//! padding (kernels read rows as `vec4<f32>`, so `d` is rounded up to a multiple of 4 with zeros).

use crate::gpu::shader_text;
use crate::lm::weight_plan::WeightFormat;

/// WebGPU's default `max_compute_workgroups_per_dimension`.
pub const WEB_MAX_WORKGROUPS_PER_DIM: u32 = 65535;

/// A `(x, y, 1)` grid with at least `workgroups` workgroups and no dimension above `max_per_dim`.
/// Shaders unfold it as `id.x + id.y * count.x` and return early past the real count.
pub fn grid(workgroups: u32, max_per_dim: u32) -> (u32, u32, u32) {
    let max_per_dim = max_per_dim.max(1);
    if workgroups <= max_per_dim {
        return (workgroups.max(1), 1, 1);
    }
    (max_per_dim, workgroups.div_ceil(max_per_dim), 1)
}

/// `d` rounded up to a multiple of 4.
pub fn padded_dim(d: u32) -> u32 {
    d.div_ceil(4) * 4
}

/// Rows of width `d` copied into rows of width `d_pad >= d`, zero-filled (zeros change no dot product).
pub fn pad_rows(data: &[f32], d: usize, d_pad: usize) -> std::borrow::Cow<'_, [f32]> {
    if d == d_pad {
        return data.into();
    }
    let mut out = vec![0.0; data.len() / d.max(1) * d_pad];
    for (src, dst) in data.chunks(d).zip(out.chunks_mut(d_pad)) {
        dst[..d].copy_from_slice(src);
    }
    out.into()
}

/// The inverse of [`pad_rows`].
pub fn unpad_rows(data: &[f32], d: usize, d_pad: usize) -> Vec<f32> {
    if d == d_pad {
        return data.to_vec();
    }
    data.chunks(d_pad).flat_map(|row| row[..d].iter().copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_folds_past_the_dimension_limit() {
        assert_eq!(grid(0, 65535), (1, 1, 1));
        assert_eq!(grid(300, 65535), (300, 1, 1));
        assert_eq!(grid(65535, 65535), (65535, 1, 1));
        // 65536 workgroups: two rows of 65535, the shader skips the 65534 extra.
        assert_eq!(grid(65536, 65535), (65535, 2, 1));
        let (x, y, _) = grid(1_000_000, 65535);
        assert!(u64::from(x) * u64::from(y) >= 1_000_000 && y <= 65535);
    }

    #[test]
    fn padding_round_trips() {
        assert_eq!(padded_dim(16), 16);
        assert_eq!(padded_dim(1), 4);
        assert_eq!(padded_dim(30), 32);
        let rows = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let padded = pad_rows(&rows, 3, 4);
        assert_eq!(*padded, [1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0]);
        assert_eq!(unpad_rows(&padded, 3, 4), rows.to_vec());
    }
}

/// One prepared kernel launch: everything needed to record it into a compute pass, any number of times
/// (the benchmark records the same launch repeatedly).
#[derive(Clone, Debug)]
pub struct Dispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub grid: (u32, u32, u32),
}

impl Dispatch {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, Some(&self.bind_group), &[]);
        pass.dispatch_workgroups(self.grid.0, self.grid.1, self.grid.2);
    }

    /// Records `dispatches` in one compute pass and submits them.
    pub fn submit_all(ctx: &crate::gpu::GpuContext, dispatches: &[&Dispatch]) -> wgpu::SubmissionIndex {
        let mut encoder =
            ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("attention") });
        {
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            for d in dispatches {
                d.record(&mut pass);
            }
        }
        ctx.queue.submit([encoder.finish()])
    }
}

/// How a kernel binds one buffer. A kernel lists its bindings in `@binding` order, next to its shader's
/// declarations, so the Rust layout and the WGSL read alike (keep the two in sync).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Uniform,
    ReadOnly,
    ReadWrite,
}

/// The compute-stage bind-group layout of `bindings`, at binding 0, 1, 2...
pub fn bind_group_layout(device: &wgpu::Device, label: &str, bindings: &[Binding]) -> wgpu::BindGroupLayout {
    let entries: Vec<wgpu::BindGroupLayoutEntry> = bindings
        .iter()
        .enumerate()
        .map(|(i, &binding)| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: match binding {
                    Binding::Uniform => wgpu::BufferBindingType::Uniform,
                    Binding::ReadOnly => wgpu::BufferBindingType::Storage { read_only: true },
                    Binding::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries: &entries })
}

/// A bind group of whole buffers at bindings 0, 1, 2...
pub fn bind_buffers(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    label: &str,
    buffers: &[&wgpu::Buffer],
) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(label), layout, entries: &entries })
}

/// Constant or override values (`name`, value) a pipeline was built with.
type Values = Vec<(&'static str, u32)>;
/// What a shader module was built from: its compile-time constants, and whether loops were unrolled.
type ModuleKey = (Values, bool);

/// Pipelines specialised by compile-time constants (written into the WGSL text, see
/// [`shader_text::with_constants`]; one shader module per set) and by override constants, built on
/// first use and kept (one per head width, say). With [`PipelineCache::set_unrolled`], loops over
/// those constants are also written out ([`shader_text::unroll_loops`]).
pub struct PipelineCache {
    label: &'static str,
    source: String,
    unroll: std::cell::Cell<bool>,
    /// Unrolled shuffles from a loop's lane become broadcasts ([`shader_text::constant_lanes`]).
    constant_lanes: std::cell::Cell<bool>,
    layout: wgpu::PipelineLayout,
    entry_point: &'static str,
    modules: std::cell::RefCell<Vec<(ModuleKey, wgpu::ShaderModule)>>,
    built: std::cell::RefCell<Vec<(ModuleKey, Values, wgpu::ComputePipeline)>>,
}

impl PipelineCache {
    pub fn new(
        device: &wgpu::Device,
        label: &'static str,
        source: &str,
        entry_point: &'static str,
        bind_layout: &wgpu::BindGroupLayout,
    ) -> Self {
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &[Some(bind_layout)],
            immediate_size: 0,
        });
        let cache = Self {
            label,
            source: shader_text::with_includes(source),
            unroll: Default::default(),
            constant_lanes: Default::default(),
            layout,
            entry_point,
            modules: Default::default(),
            built: Default::default(),
        };
        cache.module(device, &[]); // the shader as written: compile errors surface at start-up
        cache
    }

    /// Whether pipelines built from now on unroll the loops over compile-time constants.
    pub fn set_unrolled(&self, unroll: bool) {
        self.unroll.set(unroll);
    }

    pub fn is_unrolled(&self) -> bool {
        self.unroll.get()
    }

    /// Whether unrolled modules built from now on broadcast from constant lanes where the text shuffles
    /// from an unrolled loop's lane ([`shader_text::constant_lanes`]).
    pub fn set_constant_lanes(&self, on: bool) {
        self.constant_lanes.set(on);
    }

    /// Unrolling applies only to loops over compile-time constants, so a module without any is the same either way.
    fn module_key(&self, constants: &[(&'static str, u32)]) -> ModuleKey {
        (constants.to_vec(), self.unroll.get() && !constants.is_empty())
    }

    fn module(&self, device: &wgpu::Device, constants: &[(&'static str, u32)]) -> wgpu::ShaderModule {
        let key = self.module_key(constants);
        if let Some((_, m)) = self.modules.borrow().iter().find(|(k, _)| *k == key) {
            return m.clone();
        }
        let mut source = if constants.is_empty() {
            self.source.clone()
        } else {
            shader_text::with_constants(&self.source, constants)
        };
        if key.1 {
            source = shader_text::unroll_loops(&source, constants);
            if self.constant_lanes.get() {
                source = shader_text::constant_lanes(&source);
            }
        }
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(self.label),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        self.modules.borrow_mut().push((key, module.clone()));
        module
    }

    /// Whether the pipeline with these compile-time constants and override values is built already.
    pub fn is_built(&self, constants: &[(&'static str, u32)], overrides: &[(&'static str, u32)]) -> bool {
        let key = self.module_key(constants);
        self.built.borrow().iter().any(|(k, o, _)| *k == key && o == overrides)
    }

    /// The pipeline with these override values (`name`, value), built now if it is new.
    pub fn get(&self, device: &wgpu::Device, overrides: &[(&'static str, u32)]) -> wgpu::ComputePipeline {
        self.get_specialised(device, &[], overrides)
    }

    /// The pipeline with these compile-time constants and override values, built now if it is new.
    pub fn get_specialised(
        &self,
        device: &wgpu::Device,
        constants: &[(&'static str, u32)],
        overrides: &[(&'static str, u32)],
    ) -> wgpu::ComputePipeline {
        let key = self.module_key(constants);
        if let Some((_, _, p)) = self.built.borrow().iter().find(|(k, o, _)| *k == key && o == overrides) {
            return p.clone();
        }
        let module = self.module(device, constants);
        let values: Vec<(&str, f64)> = overrides.iter().map(|&(n, v)| (n, f64::from(v))).collect();
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(self.label),
            layout: Some(&self.layout),
            module: &module,
            entry_point: Some(self.entry_point),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &values,
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        self.built.borrow_mut().push((key, overrides.to_vec(), pipeline.clone()));
        pipeline
    }
}

/// A kernel's pipelines for each weight format ([`shader_text::with_weights`]): the f32 ones made
/// at once, the bf16 ones when a bf16 checkpoint first needs them.
pub struct PerWeightFormat<T> {
    f32: T,
    bf16: std::cell::OnceCell<T>,
}

impl<T> PerWeightFormat<T> {
    pub fn new(f32: T) -> Self {
        Self { f32, bf16: Default::default() }
    }

    pub fn f32(&self) -> &T {
        &self.f32
    }

    /// The pipelines of `format`, made by `make` if they are new.
    pub fn get(&self, format: WeightFormat, make: impl FnOnce() -> T) -> &T {
        match format {
            WeightFormat::F32 => &self.f32,
            WeightFormat::Bf16 => self.bf16.get_or_init(make),
        }
    }
}
