//! Device setup, buffers and readback: the plumbing every kernel shares.
//!
//! The same code runs natively (Vulkan, lavapipe in tests) and in the browser (WebGPU). The one
//! difference is waiting: natively `device.poll` blocks until the GPU is done; in the browser the
//! event loop drives the GPU and `poll` returns at once, so readback always awaits the map callback.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt as _;

use crate::gpu::matrix_units::{self, CoopConfig, CoopOffer, CoopScalar, MatrixUnits};

/// Why a GPU operation could not be done, in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuError {
    /// No adapter (no WebGPU in this browser, or no Vulkan driver natively).
    NoAdapter(String),
    /// The adapter refused the device we asked for.
    DeviceRequest(String),
    /// The request needs more than this device allows (buffer size, workgroup memory...).
    LimitExceeded(String),
    /// Mapping a result buffer failed (typically a lost device).
    Readback(String),
    /// The arguments do not describe a valid request (lengths, shapes, regions).
    InvalidInput(String),
    /// The device reported an error (an invalid pipeline or dispatch) or was lost; results are void.
    Device(String),
    /// The GPU could not allocate a job's buffers. The job's results are void, but the device is
    /// still good: the job is dropped (freeing what it held) and smaller ones can run.
    OutOfMemory(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoAdapter(why) => write!(f, "no GPU adapter: {why}"),
            GpuError::DeviceRequest(why) => write!(f, "the GPU refused a device: {why}"),
            GpuError::LimitExceeded(why) => write!(f, "too large for this GPU: {why}"),
            GpuError::Readback(why) => write!(f, "reading results back from the GPU failed: {why}"),
            GpuError::Device(why) => write!(f, "the GPU reported an error: {why}"),
            GpuError::InvalidInput(why) => write!(f, "invalid request: {why}"),
            GpuError::OutOfMemory(why) => write!(
                f,
                "the GPU ran out of memory for this job ({why}); it was stopped and its buffers freed: \
                 fewer tokens or heads need less, and other tabs or programs may be holding GPU memory"
            ),
        }
    }
}

impl std::error::Error for GpuError {}

/// What the UI shows about the adapter in use (browsers hide the name, so backend and type matter most).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    /// A CPU-emulated GPU (SwiftShader, lavapipe): correct but slow, timings are not representative.
    pub is_cpu: bool,
}

impl fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.name.is_empty() { String::new() } else { format!("{} · ", self.name) };
        write!(f, "{name}{} · {}", self.backend, self.device_type)?;
        if self.is_cpu {
            f.write_str(" (software fallback)")?;
        }
        Ok(())
    }
}

/// One device and queue, with the limits the kernels size their tiles from.
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub adapter: AdapterSummary,
    /// Whether `TIMESTAMP_QUERY` was granted (the benchmark times kernels with it where it can).
    pub timestamps: bool,
    /// The subgroup size when the device has subgroup operations and a single fixed size (CPU adapters:
    /// 8 on lavapipe, 4 on SwiftShader); kernels that share loads between lanes need both.
    pub subgroup_size: Option<u32>,
    /// The matrix units (cooperative matrices, f16 inputs) this device was opened with, or why there are
    /// none: only with them is the forward's `flash_attention_coop` form built.
    pub matrix_units: Result<MatrixUnits, String>,
    /// The first error the device reported outside any error scope, or its loss. Once set, every
    /// readback fails with it: results computed by an invalid pipeline must never be shown as real.
    fault: Arc<Mutex<Option<String>>>,
    /// An allocation the device could not make since the last readback: it voids the job that asked
    /// (see [`GpuContext::check_job`]), not the device.
    out_of_memory: Arc<Mutex<Option<String>>>,
    /// Readbacks awaiting the GPU: the jobs an out-of-memory error may belong to.
    readbacks_in_flight: AtomicU32,
    /// Buffers finished jobs gave back, lent again to the next job of the same size and use.
    spares: Mutex<Spares>,
}

/// Keeps the first message in `slot` (the first error explains the rest).
fn record_first(slot: &Mutex<Option<String>>, message: String) {
    if let Ok(mut slot) = slot.lock() {
        slot.get_or_insert(message);
    }
}

/// Files an error the device reported outside any scope: an allocation failure voids the jobs in
/// flight (`out_of_memory`), anything else the device (`fault`).
fn route_uncaptured(e: &wgpu::Error, fault: &Mutex<Option<String>>, out_of_memory: &Mutex<Option<String>>) {
    match e {
        wgpu::Error::OutOfMemory { .. } => record_first(out_of_memory, e.to_string()),
        // The job that ran out of memory then uses a buffer that was never made, and the device says
        // so: those errors are the job's, and it fails with the out-of-memory error.
        _ if out_of_memory.lock().is_ok_and(|slot| slot.is_some()) => {}
        _ => record_first(fault, e.to_string()),
    }
}

/// Bytes of one write of [`GpuContext::scratch_from`] (a multiple of 4, as writes must be).
const UPLOAD_PIECE_BYTES: usize = 8 << 20;

/// Every storage buffer can be written by the queue and copied out for readback.
const STORAGE_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::STORAGE.union(wgpu::BufferUsages::COPY_DST).union(wgpu::BufferUsages::COPY_SRC);

/// Most bytes kept in spare buffers; beyond it the least recently returned go (a page that changes
/// sizes often keeps only its recent ones).
const MAX_SPARE_BYTES: u64 = 128 << 20;

/// Why spares: in a browser, creating and zero-filling fresh buffers for every job (8 MB of
/// probabilities, its staging copy, Q and K) took longer than copying the data itself.
#[derive(Default)]
struct Spares {
    /// Oldest first.
    buffers: VecDeque<wgpu::Buffer>,
    bytes: u64,
    /// Counts the out-of-memory errors jobs have failed with: a buffer lent before the latest one
    /// is dropped when it comes back, not kept (it may be the one the device never made).
    generation: u64,
}

/// A buffer lent by the context for one job; it goes back to the context's spares when dropped. Its
/// contents are whatever the last job left: only for inputs written whole and outputs a kernel
/// writes whole.
pub struct Scratch<'a> {
    ctx: &'a GpuContext,
    buffer: Option<wgpu::Buffer>,
    /// The spares' generation when it was lent.
    generation: u64,
}

impl Deref for Scratch<'_> {
    type Target = wgpu::Buffer;
    fn deref(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("a scratch buffer is present until dropped")
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.ctx.give_back(buffer, self.generation);
        }
    }
}

/// Opens the device with `features`, and with cooperative matrices and f16 in shaders too where
/// [`matrix_units::choose`] finds a configuration the forward kernel can use (natively, on GPUs with
/// matrix units). A device that refuses them is opened without, and the reason kept.
async fn open_device(
    adapter: &wgpu::Adapter,
    features: wgpu::Features,
    limits: &wgpu::Limits,
) -> Result<(wgpu::Device, wgpu::Queue, Result<MatrixUnits, String>), GpuError> {
    let request = |features, experimental_features| {
        adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("attention-lab"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features,
            ..Default::default()
        })
    };
    let refused = match matrix_units::choose(&coop_offer(adapter)) {
        Ok(units) => {
            let with_units = features | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
            match request(with_units, experimental_features()).await {
                Ok((device, queue)) => return Ok((device, queue, Ok(units))),
                Err(e) => format!("the device refused cooperative matrices: {e}"),
            }
        }
        Err(why) => why,
    };
    let (device, queue) = request(features, wgpu::ExperimentalFeatures::disabled())
        .await
        .map_err(|e| GpuError::DeviceRequest(e.to_string()))?;
    Ok((device, queue, Err(refused)))
}

/// wgpu's consent to its experimental features, cooperative matrices among them: it asks for it
/// through an `unsafe` constructor, its way of saying the API may change and may still have bugs.
/// Only a device whose adapter offers a configuration the kernel uses is opened with it.
#[expect(unsafe_code, reason = "wgpu 30 grants EXPERIMENTAL_COOPERATIVE_MATRIX only through this unsafe token")]
fn experimental_features() -> wgpu::ExperimentalFeatures {
    // SAFETY: the token only allows requesting experimental features; the one requested with it is
    // used by one kernel, checked against its CPU twin (tests/gpu_kernels.rs) where it runs.
    unsafe { wgpu::ExperimentalFeatures::enabled() }
}

/// What the adapter offers of cooperative matrices, for [`matrix_units::choose`].
fn coop_offer(adapter: &wgpu::Adapter) -> CoopOffer {
    let info = adapter.get_info();
    let features = adapter.features();
    let scalar = |t| match t {
        wgpu::CooperativeScalarType::F16 => CoopScalar::F16,
        wgpu::CooperativeScalarType::F32 => CoopScalar::F32,
        wgpu::CooperativeScalarType::I32 => CoopScalar::I32,
        wgpu::CooperativeScalarType::U32 => CoopScalar::U32,
    };
    let properties = adapter.cooperative_matrix_properties();
    let configs = properties.iter().map(|c| CoopConfig {
        m: c.m_size,
        n: c.n_size,
        k: c.k_size,
        ab: scalar(c.ab_type),
        cr: scalar(c.cr_type),
    });
    CoopOffer {
        cooperative_matrix: features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
        shader_f16: features.contains(wgpu::Features::SHADER_F16),
        subgroup_sizes: (info.subgroup_min_size, info.subgroup_max_size),
        configs: configs.collect(),
    }
}

impl GpuContext {
    /// Finds an adapter and opens a device on it. Natively the environment may pick the adapter
    /// (`WGPU_ADAPTER_NAME`, `WGPU_BACKEND`); in the browser this is WebGPU or nothing.
    pub async fn new() -> Result<Self, GpuError> {
        let backends = if cfg!(target_arch = "wasm32") {
            wgpu::Backends::BROWSER_WEBGPU
        } else {
            wgpu::Backends::from_env().unwrap_or(wgpu::Backends::VULKAN)
        };
        #[cfg(target_arch = "wasm32")]
        crate::gpu::web_subgroups::install();
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        desc.backends = backends;
        let instance = wgpu::Instance::new(desc);
        let adapter = wgpu::util::initialize_adapter_from_env_or_default(&instance, None)
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        Self::from_adapter(adapter).await
    }

    async fn from_adapter(adapter: wgpu::Adapter) -> Result<Self, GpuError> {
        let info = adapter.get_info();
        let available = adapter.limits();
        // Start from the WebGPU baseline every browser grants, then take what this adapter offers for
        // buffer sizes (long sequences need them). Workgroup memory stays at the portable 16 KiB on the web.
        let mut limits = wgpu::Limits::defaults();
        limits.max_storage_buffer_binding_size = available.max_storage_buffer_binding_size;
        limits.max_buffer_size = available.max_buffer_size;
        if !cfg!(target_arch = "wasm32") {
            limits.max_compute_workgroup_storage_size = available.max_compute_workgroup_storage_size.min(32768);
        }
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let subgroups = adapter.features().contains(wgpu::Features::SUBGROUP);
        let mut required_features = wgpu::Features::empty();
        required_features.set(wgpu::Features::TIMESTAMP_QUERY, timestamps);
        required_features.set(wgpu::Features::SUBGROUP, subgroups);
        let (device, queue, matrix_units) = open_device(&adapter, required_features, &limits).await?;
        let adapter = AdapterSummary {
            name: info.name.clone(),
            backend: info.backend.to_string(),
            device_type: format!("{:?}", info.device_type),
            is_cpu: info.device_type == wgpu::DeviceType::Cpu,
        };
        let fault = Arc::new(Mutex::new(None::<String>));
        let out_of_memory = Arc::new(Mutex::new(None::<String>));
        let (on_error, on_oom) = (fault.clone(), out_of_memory.clone());
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| route_uncaptured(&e, &on_error, &on_oom)));
        let on_lost = fault.clone();
        device.set_device_lost_callback(move |reason, message| {
            record_first(&on_lost, format!("the device was lost ({reason:?}: {message})"))
        });
        // wgpu cannot see subgroups on the web; web_subgroups asked the browser for them instead.
        #[cfg(target_arch = "wasm32")]
        let subgroups = crate::gpu::web_subgroups::granted();
        let fixed_size = info.subgroup_min_size == info.subgroup_max_size && info.subgroup_min_size.is_power_of_two();
        let subgroup_size = (subgroups && fixed_size).then_some(info.subgroup_min_size);
        Ok(Self {
            device,
            queue,
            limits,
            adapter,
            timestamps,
            subgroup_size,
            matrix_units,
            fault,
            out_of_memory,
            readbacks_in_flight: AtomicU32::new(0),
            spares: Mutex::default(),
        })
    }

    /// A read-only storage buffer holding `data`.
    pub fn storage_from<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer, GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        self.check_binding_size(label, bytes.len() as u64)?;
        // Zero-length buffers are invalid bindings; pad to one element.
        let contents: &[u8] = if bytes.is_empty() { &[0; 4] } else { bytes };
        Ok(self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents,
            usage: STORAGE_USAGE,
        }))
    }

    /// A writable storage buffer of `bytes` bytes that can be copied out for readback.
    pub fn storage_output(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer, GpuError> {
        self.check_binding_size(label, bytes)?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(4),
            usage: STORAGE_USAGE,
            mapped_at_creation: false,
        }))
    }

    /// A spare buffer of exactly `size` bytes and `usage`, or a new one, with the spares' generation.
    fn take(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> (wgpu::Buffer, u64) {
        if let Ok(mut spares) = self.spares.lock() {
            let generation = spares.generation;
            if let Some(i) = spares.buffers.iter().position(|b| b.size() == size && b.usage() == usage)
                && let Some(buffer) = spares.buffers.remove(i)
            {
                spares.bytes -= size;
                return (buffer, generation);
            }
            drop(spares);
            return (self.create(label, size, usage), generation);
        }
        (self.create(label, size, usage), u64::MAX)
    }

    fn create(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    /// Keeps `buffer`, lent at `generation`, for a later job (unless a job has run out of memory since).
    /// Queue order makes this safe while the GPU still uses it: the next job's writes are queued after
    /// this job's work.
    fn give_back(&self, buffer: wgpu::Buffer, generation: u64) {
        let Ok(mut spares) = self.spares.lock() else { return };
        if generation != spares.generation {
            return;
        }
        spares.bytes += buffer.size();
        spares.buffers.push_back(buffer);
        while spares.bytes > MAX_SPARE_BYTES {
            let Some(oldest) = spares.buffers.pop_front() else { break };
            spares.bytes -= oldest.size();
        }
    }

    /// Bytes held in spare buffers (for tests).
    pub fn spare_bytes(&self) -> u64 {
        self.spares.lock().map_or(0, |s| s.bytes)
    }

    /// As [`GpuContext::storage_from`], in a lent buffer, written [`UPLOAD_PIECE_BYTES`] at a time with
    /// a yield to the event loop between pieces: in a browser each write is a copy on the page's
    /// thread, and the Q or K of a long input is tens of MB.
    pub async fn scratch_from<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<Scratch<'_>, GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        self.check_binding_size(label, bytes.len() as u64)?;
        let contents: &[u8] = if bytes.is_empty() { &[0; 4] } else { bytes };
        let (buffer, generation) = self.take("scratch", contents.len() as u64, STORAGE_USAGE);
        for (i, piece) in contents.chunks(UPLOAD_PIECE_BYTES).enumerate() {
            if i > 0 {
                crate::event_loop::breathe().await;
            }
            self.queue.write_buffer(&buffer, (i * UPLOAD_PIECE_BYTES) as u64, piece);
        }
        Ok(Scratch { ctx: self, buffer: Some(buffer), generation })
    }

    /// A storage buffer of `len` values made by `fill` [`UPLOAD_PIECE_BYTES`] at a time, each piece
    /// written as it is made, with a yield to the event loop between pieces: a benchmark's seeded inputs
    /// (hundreds of MB at the longest lengths) never exist whole in memory nor hold the page's thread.
    pub async fn storage_seeded(
        &self,
        label: &str,
        len: usize,
        mut fill: impl FnMut(&mut [f32]),
    ) -> Result<wgpu::Buffer, GpuError> {
        let buffer = self.storage_output(label, (len * 4) as u64)?;
        let mut piece = vec![0.0f32; len.min(UPLOAD_PIECE_BYTES / 4)];
        for start in (0..len).step_by(piece.len().max(1)) {
            if start > 0 {
                crate::event_loop::breathe().await;
            }
            let values = &mut piece[..(len - start).min(UPLOAD_PIECE_BYTES / 4)];
            fill(values);
            self.queue.write_buffer(&buffer, (start * 4) as u64, bytemuck::cast_slice(values));
        }
        Ok(buffer)
    }

    /// As [`GpuContext::storage_output`], in a lent buffer holding stale data: for kernels that
    /// write every element.
    pub fn scratch_output(&self, label: &str, bytes: u64) -> Result<Scratch<'_>, GpuError> {
        self.check_binding_size(label, bytes)?;
        let (buffer, generation) = self.take("scratch", bytes.max(4), STORAGE_USAGE);
        Ok(Scratch { ctx: self, buffer: Some(buffer), generation })
    }

    /// A uniform buffer holding one params struct.
    pub fn uniform_from<T: bytemuck::Pod>(&self, label: &str, params: &T) -> wgpu::Buffer {
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: bytemuck::bytes_of(params),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        })
    }

    /// Refuses bindings larger than this device allows, before wgpu would raise a validation error.
    pub fn check_binding_size(&self, label: &str, bytes: u64) -> Result<(), GpuError> {
        let max = self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size);
        if bytes > max {
            return Err(GpuError::LimitExceeded(format!(
                "{label} needs {bytes} bytes but this GPU binds at most {max} bytes per buffer"
            )));
        }
        Ok(())
    }

    /// Copies `buffer` into a mappable staging buffer and returns its contents as `T`s.
    pub async fn read_back<T: bytemuck::Pod>(&self, buffer: &wgpu::Buffer) -> Result<Vec<T>, GpuError> {
        Ok(self.read_back_all(&[buffer]).await?.pop().unwrap_or_default())
    }

    /// Several buffers' values, in order, read back with as few round trips as fit: consecutive buffers
    /// share one copy, one submission and one map while their bytes stay within [`READBACK_BATCH_BYTES`]
    /// (on a software adapter each map is a round trip through the GPU process that costs more than
    /// the copy). Each buffer's values, exactly its size in `T`s.
    pub async fn read_back_all<T: bytemuck::Pod>(&self, buffers: &[&wgpu::Buffer]) -> Result<Vec<Vec<T>>, GpuError> {
        let mut out = Vec::with_capacity(buffers.len());
        for batch in readback_batches(buffers.iter().map(|b| b.size()), READBACK_BATCH_BYTES) {
            let batch = &buffers[batch];
            let total: u64 = batch.iter().map(|b| b.size()).sum();
            let (staging, generation) =
                self.take("readback", total, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
            let mut encoder = self.device.create_command_encoder(&Default::default());
            let mut at = 0;
            for b in batch {
                encoder.copy_buffer_to_buffer(b, 0, &staging, at, b.size());
                at += b.size();
            }
            self.queue.submit([encoder.finish()]);
            let mut data: Vec<T> = self.map_and_read(&staging).await?;
            // Only an unmapped staging buffer is reusable: one abandoned mid-map is dropped instead.
            self.give_back(staging, generation);
            if let [one] = batch {
                // One buffer (a large one, or a lone readback): its values without a copy.
                data.truncate(one.size() as usize / size_of::<T>());
                out.push(data);
                continue;
            }
            let mut start = 0;
            for b in batch {
                let len = b.size() as usize / size_of::<T>();
                out.push(data.get(start..start + len).map(<[T]>::to_vec).unwrap_or_default());
                start += len;
            }
        }
        Ok(out)
    }

    /// Destroys the device, as a driver reset would: the test hook for recovering from a lost GPU.
    pub fn lose_device(&self) {
        self.device.destroy();
    }

    /// The allocation failure recorded since the readbacks in flight began, if any, as an error. Every
    /// job reading back meanwhile fails with it (which of them asked is not known); the last one to
    /// finish clears it. The spare buffers go, and buffers lent before it are not kept when they come
    /// back, so the next jobs start with what memory there is and never with a buffer never made.
    fn out_of_memory_since(&self, last_in_flight: bool) -> Result<(), GpuError> {
        let Ok(mut slot) = self.out_of_memory.lock() else { return Ok(()) };
        let Some(why) = (if last_in_flight { slot.take() } else { slot.clone() }) else { return Ok(()) };
        if let Ok(mut spares) = self.spares.lock() {
            *spares = Spares { generation: spares.generation + 1, ..Spares::default() };
        }
        Err(GpuError::OutOfMemory(why))
    }

    /// Records an allocation failure as the device would report one (a test hook: the next job must
    /// fail with it, and the one after that compute as usual).
    pub fn simulate_out_of_memory(&self) {
        if let Ok(mut slot) = self.out_of_memory.lock() {
            slot.get_or_insert_with(|| "simulated by a test hook".into());
        }
    }

    /// Resolves once all submitted work is done (natively `poll` blocks; in the browser the
    /// callback fires from the event loop).
    pub async fn wait_idle(&self) -> Result<(), GpuError> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            tx.send(()).ok();
        });
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Readback(e.to_string()))?;
        rx.await.map_err(|_| GpuError::Readback("the device was lost while waiting for it".into()))
    }

    /// Whether the job that just finished may be believed: not if the device ran out of memory while
    /// it ran, nor if the device is faulted.
    pub fn check_job(&self) -> Result<(), GpuError> {
        let last_in_flight = self.readbacks_in_flight.load(Ordering::Acquire) == 0;
        self.out_of_memory_since(last_in_flight)?;
        self.check_fault()
    }

    /// The device's recorded fault, if any, as an error.
    pub fn check_fault(&self) -> Result<(), GpuError> {
        match self.fault.lock().ok().and_then(|f| f.clone()) {
            Some(message) => Err(GpuError::Device(message)),
            None => Ok(()),
        }
    }

    /// Runs pipeline creation (or any synchronous GPU set-up) inside a validation error scope, so a
    /// shader the device rejects is reported instead of failing later in silence.
    pub async fn validated<T>(&self, build: impl FnOnce() -> T) -> Result<T, GpuError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let built = build();
        match scope.pop().await {
            Some(e) => Err(GpuError::Device(e.to_string())),
            None => Ok(built),
        }
    }

    /// Maps a `MAP_READ` buffer and returns its contents.
    pub async fn map_and_read<T: bytemuck::Pod>(&self, staging: &wgpu::Buffer) -> Result<Vec<T>, GpuError> {
        self.readbacks_in_flight.fetch_add(1, Ordering::AcqRel);
        let data = self.map_and_copy(staging).await;
        self.readbacks_in_flight.fetch_sub(1, Ordering::AcqRel);
        // A job that ran out of memory reads back garbage or nothing at all: either way it failed.
        self.check_job()?;
        data
    }

    async fn map_and_copy<T: bytemuck::Pod>(&self, staging: &wgpu::Buffer) -> Result<Vec<T>, GpuError> {
        let slice = staging.slice(..);
        let (tx, rx) = futures_channel::oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |result| {
            tx.send(result).ok();
        });
        // Natively this blocks until the GPU is done; in the browser it returns at once.
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Readback(e.to_string()))?;
        rx.await
            .map_err(|_| GpuError::Readback("the device was lost before the results arrived".into()))?
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        crate::event_loop::resumed();
        let data = {
            let view = slice.get_mapped_range().map_err(|e| GpuError::Readback(e.to_string()))?;
            bytemuck::cast_slice::<u8, T>(&view).to_vec()
        };
        staging.unmap();
        Ok(data)
    }
}

/// Bytes of buffers one readback gathers: a few MB of probabilities and activations go in one round
/// trip, while a pass's largest buffers still come back one at a time (no staging buffer of hundreds
/// of MB beside them).
pub const READBACK_BATCH_BYTES: u64 = 64 << 20;

/// Consecutive runs of `sizes` whose sums stay within `limit` (a larger one alone), as index ranges.
pub fn readback_batches(sizes: impl Iterator<Item = u64>, limit: u64) -> Vec<std::ops::Range<usize>> {
    let mut batches: Vec<std::ops::Range<usize>> = Vec::new();
    let mut bytes = 0;
    for (i, size) in sizes.enumerate() {
        match batches.last_mut() {
            Some(last) if bytes + size <= limit => {
                last.end = i + 1;
                bytes += size;
            }
            _ => {
                batches.push(i..i + 1);
                bytes = size;
            }
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    #[test]
    fn readbacks_gather_consecutive_buffers_within_the_limit() {
        let batches = |sizes: &[u64]| readback_batches(sizes.iter().copied(), 100);
        assert_eq!(batches(&[40, 60, 1, 100, 150, 30, 30]), vec![0..2, 2..3, 3..4, 4..5, 5..7]);
        assert_eq!(batches(&[]), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(batches(&[100]), vec![0..1]);
    }

    use super::*;

    fn error(out_of_memory: bool) -> wgpu::Error {
        let source = Box::new(std::io::Error::other("test"));
        if out_of_memory {
            wgpu::Error::OutOfMemory { source }
        } else {
            wgpu::Error::Validation { source, description: "a binding uses an invalid buffer".into() }
        }
    }

    #[test]
    fn out_of_memory_voids_the_job_and_what_follows_it_not_the_device() {
        let (fault, oom) = (Mutex::new(None), Mutex::new(None));
        route_uncaptured(&error(true), &fault, &oom);
        route_uncaptured(&error(false), &fault, &oom);
        assert!(oom.lock().unwrap().is_some());
        assert_eq!(*fault.lock().unwrap(), None, "the validation error follows the failed allocation");
        // Once the job has failed with it (the slot is taken), a validation error faults the device.
        oom.lock().unwrap().take();
        route_uncaptured(&error(false), &fault, &oom);
        assert!(fault.lock().unwrap().as_deref().is_some_and(|m| m.contains("invalid buffer")));
    }
}
