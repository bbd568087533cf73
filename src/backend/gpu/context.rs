//! One wgpu context per adapter, shared by every tensor on it: device and queue, the pipeline
//! cache, the buffer pool and the pending command encoder.

use super::kernels::Tile;
use crate::{Device, Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use wgpu::util::DeviceExt;

/// Dispatches recorded before the pending encoder is submitted on its own.
pub(crate) const BATCH: u32 = 64;

/// Counters for benchmarks and leak tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Bytes held by live tensors (pool size classes).
    pub bytes_in_use: u64,
    /// High-water mark of `bytes_in_use`.
    pub peak_bytes: u64,
    /// Bytes cached in the pool's free lists.
    pub bytes_cached: u64,
    /// Compute dispatches recorded (the GEMM tuner's trial runs of candidate tiles aside).
    pub dispatches: u64,
    /// Queue submissions.
    pub submits: u64,
    /// Compute pipelines created (each cached for the context's lifetime).
    pub pipelines_created: u64,
}

pub(crate) struct Pending {
    encoder: Option<wgpu::CommandEncoder>,
    dispatches: u32,
}

/// A GPU adapter's shared state.
pub struct GpuContext {
    /// The adapter's index (`Device::Gpu(ordinal)`).
    pub(crate) ordinal: usize,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    pub(crate) has_f16: bool,
    /// Loop iterations one invocation may run before the driver ends its loops: llvmpipe's
    /// infinite-loop guard (65,535, counted over all loops of the invocation); `None` elsewhere.
    pub(crate) loop_cap: Option<u32>,
    pub(super) native_f16: std::sync::atomic::AtomicBool,
    /// The device has `SUBGROUP`.
    pub(super) has_subgroups: bool,
    /// Reductions use subgroup operations (`shaders/reduce_subgroup.wgsl`).
    pub(super) subgroups: std::sync::atomic::AtomicBool,
    /// The shared-memory GEMM tiles that fit the adapter's workgroup memory: for GEMMs in
    /// f32 and packed storage, and (with the f16-staging ones) for native f16 GEMMs.
    pub(super) shared_tiles: Vec<Tile>,
    pub(super) shared_tiles_f16: Vec<Tile>,
    pub(super) pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
    /// Pipelines being compiled on the context's worker thread (`background.rs`).
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) background: super::background::Background,
    free: Mutex<HashMap<u64, Vec<wgpu::Buffer>>>,
    pending: Mutex<Pending>,
    error: Arc<Mutex<Option<String>>>,
    in_use: AtomicU64,
    peak: AtomicU64,
    cached: AtomicU64,
    dispatches: AtomicU64,
    submits: AtomicU64,
    pipelines_created: AtomicU64,
    /// Kernel timestamps for the profiler, when the adapter has timestamp queries.
    pub(super) timing: Option<super::timing::Timing>,
    /// The index-check flags that gather/scatter_add kernels set (`checks.rs`).
    pub(crate) checks: super::checks::IndexChecks,
}

/// A pooled storage buffer; returned to its context's pool when dropped.
pub struct GpuBuffer {
    pub(crate) buffer: Option<wgpu::Buffer>,
    pub(crate) class: u64,
    pub(crate) ctx: Arc<GpuContext>,
}

impl GpuBuffer {
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("live buffer")
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            let now = self.ctx.in_use.fetch_sub(self.class, Ordering::Relaxed) - self.class;
            crate::profiler::gpu_memory(self.ctx.ordinal, -(self.class as i64), now);
            self.ctx.cached.fetch_add(self.class, Ordering::Relaxed);
            self.ctx.free.lock().entry(self.class).or_default().push(b);
        }
    }
}

impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuBuffer({} bytes)", self.class)
    }
}

type Registry = Mutex<HashMap<usize, std::result::Result<Arc<GpuContext>, String>>>;
static CONTEXTS: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    CONTEXTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The shared context of GPU adapter `ordinal`, created on first use (natively; in the browser it
/// must first be created with [`init_gpu`], since nothing may block there).
pub fn context(ordinal: usize) -> Result<Arc<GpuContext>> {
    let g = registry().lock();
    if let Some(r) = g.get(&ordinal) {
        return r.clone().map_err(Error::NoGpu);
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let mut g = g;
        let r = pollster::block_on(super::adapter::create(ordinal)).map(Arc::new);
        g.insert(ordinal, r.clone());
        r.map_err(Error::NoGpu)
    }
    #[cfg(target_arch = "wasm32")]
    {
        Err(Error::NoGpu(
            "in the browser the GPU context is created asynchronously: call wgtorch::backend::gpu::init_gpu(0).await first".into(),
        ))
    }
}

/// The GPU contexts created so far.
pub(crate) fn contexts() -> Vec<Arc<GpuContext>> {
    registry()
        .lock()
        .values()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect()
}

/// Create (or return) the context of adapter `ordinal` without blocking: the way in the browser.
pub async fn init_gpu(ordinal: usize) -> Result<Arc<GpuContext>> {
    if let Some(r) = registry().lock().get(&ordinal) {
        return r.clone().map_err(Error::NoGpu);
    }
    let r = super::adapter::create(ordinal).await.map(Arc::new);
    let mut g = registry().lock();
    let entry = g.entry(ordinal).or_insert(r);
    entry.clone().map_err(Error::NoGpu)
}

impl GpuContext {
    pub(crate) fn new(
        ordinal: usize,
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: wgpu::AdapterInfo,
        limits: wgpu::Limits,
        has_f16: bool,
    ) -> GpuContext {
        let error = Arc::new(Mutex::new(None::<String>));
        let sink = error.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut s = sink.lock();
            if s.is_none() {
                *s = Some(error_message(&e));
            }
        }));
        let loop_cap = llvmpipe_loop_cap(&info);
        let has_subgroups = device.features().contains(wgpu::Features::SUBGROUP);
        let timing = (device.features().contains(wgpu::Features::TIMESTAMP_QUERY))
            .then(|| super::timing::Timing::new(&queue));
        let fits = |t: &Tile| t.workgroup_bytes() <= limits.max_compute_workgroup_storage_size;
        let shared_tiles: Vec<Tile> = Tile::SHARED_CANDIDATES.into_iter().filter(fits).collect();
        let shared_tiles_f16 = match has_f16 {
            true => shared_tiles
                .iter()
                .copied()
                .chain(Tile::SHARED_HALF_CANDIDATES.into_iter().filter(fits))
                .collect(),
            false => shared_tiles.clone(),
        };
        GpuContext {
            checks: super::checks::IndexChecks::new(&device),
            ordinal,
            device,
            queue,
            info,
            limits,
            has_f16,
            loop_cap,
            native_f16: std::sync::atomic::AtomicBool::new(has_f16),
            has_subgroups,
            subgroups: std::sync::atomic::AtomicBool::new(has_subgroups),
            shared_tiles,
            shared_tiles_f16,
            pipelines: Mutex::new(HashMap::new()),
            #[cfg(not(target_arch = "wasm32"))]
            background: Default::default(),
            free: Mutex::new(HashMap::new()),
            pending: Mutex::new(Pending {
                encoder: None,
                dispatches: 0,
            }),
            error,
            in_use: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            cached: AtomicU64::new(0),
            dispatches: AtomicU64::new(0),
            submits: AtomicU64::new(0),
            pipelines_created: AtomicU64::new(0),
            timing,
        }
    }
}

fn size_class(bytes: u64) -> u64 {
    bytes.max(256).next_power_of_two()
}

/// The value of `f` if it is ready at once. Natively wgpu validates each call as it is made, so an
/// error scope's result is ready when the scope is popped; in the browser it is not, and errors
/// left there reach the uncaptured-error handler as before.
#[cfg(not(target_arch = "wasm32"))]
fn ready<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// A wgpu error's message (a validation error's description without the wrapper).
pub(super) fn error_message(e: &wgpu::Error) -> String {
    match e {
        wgpu::Error::Validation { description, .. } => description.clone(),
        other => other.to_string(),
    }
}

impl GpuContext {
    /// Counters.
    pub fn stats(&self) -> GpuStats {
        GpuStats {
            bytes_in_use: self.in_use.load(Ordering::Relaxed),
            peak_bytes: self.peak.load(Ordering::Relaxed),
            bytes_cached: self.cached.load(Ordering::Relaxed),
            dispatches: self.dispatches.load(Ordering::Relaxed),
            submits: self.submits.load(Ordering::Relaxed),
            pipelines_created: self.pipelines_created.load(Ordering::Relaxed),
        }
    }
    /// Reset the peak to the current use.
    pub fn reset_peak(&self) {
        self.peak
            .store(self.in_use.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The largest tensor buffer this adapter takes: its storage-binding and buffer-size limits
    /// (and 4 GiB, so that every element index fits the kernels' u32 arithmetic), with its name.
    fn max_tensor_bytes(&self) -> (u64, &'static str) {
        let l = &self.limits;
        let lim = [
            (
                l.max_storage_buffer_binding_size,
                "max_storage_buffer_binding_size",
            ),
            (l.max_buffer_size, "max_buffer_size"),
            (u32::MAX as u64, "u32 element indexing in wgtorch's kernels"),
        ]
        .into_iter()
        .min_by_key(|x| x.0)
        .unwrap_or((0, "max_buffer_size"));
        // Buffers are padded to 16 bytes (the vec4 kernels read whole vec4s).
        (lim.0 / 16 * 16, lim.1)
    }

    /// The pool size class for a tensor of `bytes`, or `Error::OutOfMemory` naming the adapter's
    /// limit when no buffer of that size can be bound on this adapter.
    pub(crate) fn check_size(&self, op: &'static str, bytes: u64) -> Result<u64> {
        let (cap, name) = self.max_tensor_bytes();
        if bytes.saturating_add(15) / 16 * 16 > cap {
            return Err(self.oom(
                op,
                bytes,
                format!(
                    "; adapter \"{}\" allows at most {cap} bytes per buffer ({name})",
                    self.info.name
                ),
            ));
        }
        Ok(size_class(bytes).min(cap))
    }

    /// `Error::OutOfMemory` on this device.
    fn oom(&self, op: &'static str, bytes: u64, detail: String) -> Error {
        Error::OutOfMemory {
            op,
            device: Device::Gpu(self.ordinal),
            bytes,
            detail,
        }
    }

    /// Run `f` (device calls: buffer, bind group or pipeline creation) and return the error wgpu
    /// raised for it, if any, so that it is reported by the call that caused it.
    pub(super) fn scoped<R>(&self, f: impl FnOnce() -> R) -> (R, Option<wgpu::Error>) {
        #[cfg(target_arch = "wasm32")]
        {
            (f(), None)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let invalid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
            let r = f();
            let e = [internal.pop(), invalid.pop(), oom.pop()]
                .into_iter()
                .find_map(|p| ready(p).flatten());
            (r, e)
        }
    }

    /// `Error::Gpu` for `op` on this adapter.
    fn gpu_error(&self, op: &'static str, e: &wgpu::Error) -> Error {
        Error::Gpu {
            op,
            adapter: self.info.name.clone(),
            msg: error_message(e),
        }
    }

    fn create_storage(&self, class: u64) -> (wgpu::Buffer, Option<wgpu::Error>) {
        self.scoped(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgtorch-tensor"),
                size: class,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// A pooled buffer of at least `bytes`. When the driver is out of memory the pool's cached
    /// buffers are freed and the allocation tried once more (as PyTorch's caching allocator does).
    pub(crate) fn alloc(self: &Arc<Self>, op: &'static str, bytes: u64) -> Result<GpuBuffer> {
        let class = self.check_size(op, bytes)?;
        let reused = self.free.lock().get_mut(&class).and_then(|v| v.pop());
        let buffer = match reused {
            Some(b) => {
                self.cached.fetch_sub(class, Ordering::Relaxed);
                b
            }
            None => match self.create_storage(class) {
                (b, None) => b,
                (_, Some(_)) => {
                    self.empty_cache();
                    match self.create_storage(class) {
                        (b, None) => b,
                        (_, Some(e)) => {
                            let s = self.stats();
                            return Err(self.oom(
                                op,
                                bytes,
                                format!(
                                    "; adapter \"{}\" refused a buffer of {class} bytes ({}) with {} bytes in use by tensors",
                                    self.info.name,
                                    error_message(&e).trim(),
                                    s.bytes_in_use
                                ),
                            ));
                        }
                    }
                }
            },
        };
        let now = self.in_use.fetch_add(class, Ordering::Relaxed) + class;
        self.peak.fetch_max(now, Ordering::Relaxed);
        crate::profiler::gpu_memory(self.ordinal, class as i64, now);
        Ok(GpuBuffer {
            buffer: Some(buffer),
            class,
            ctx: self.clone(),
        })
    }

    /// Free every cached buffer.
    pub fn empty_cache(&self) {
        self.free.lock().clear();
        self.cached.store(0, Ordering::Relaxed);
    }

    /// Upload bytes into a new pooled buffer (ordered after the work already recorded).
    pub(crate) fn upload(self: &Arc<Self>, op: &'static str, bytes: &[u8]) -> Result<GpuBuffer> {
        let buf = self.alloc(op, bytes.len() as u64)?;
        if !bytes.is_empty() {
            let mut padded;
            let data = if !bytes.len().is_multiple_of(4) {
                padded = bytes.to_vec();
                padded.resize(bytes.len().next_multiple_of(4), 0);
                &padded[..]
            } else {
                bytes
            };
            let (staging, err) = self.scoped(|| {
                self.device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some("wgtorch-upload"),
                        contents: data,
                        usage: wgpu::BufferUsages::COPY_SRC,
                    })
            });
            if let Some(e) = err {
                let detail = format!(
                    "; adapter \"{}\" refused the upload's staging buffer ({})",
                    self.info.name,
                    error_message(&e).trim()
                );
                return Err(self.oom(op, data.len() as u64, detail));
            }
            self.with_encoder(|enc| {
                enc.copy_buffer_to_buffer(&staging, 0, buf.raw(), 0, data.len() as u64)
            });
            crate::profiler::transfer(crate::profiler::Transfer::Upload, bytes.len() as u64);
        }
        Ok(buf)
    }

    pub(super) fn with_encoder<R>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> R) -> R {
        let mut p = self.pending.lock();
        let enc = p.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("wgtorch-batch"),
                })
        });
        f(enc)
    }

    /// The cached pipeline for `key`, compiling `source()` the first time (a compilation error
    /// is returned for `op` and nothing is cached).
    pub(crate) fn pipeline(
        &self,
        op: &'static str,
        key: &str,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<wgpu::ComputePipeline>> {
        if let Some(p) = self.pipelines.lock().get(key) {
            return Ok(p.clone());
        }
        #[cfg(not(target_arch = "wasm32"))]
        let background = super::background::on_worker();
        #[cfg(target_arch = "wasm32")]
        let background = false;
        let _event = match background {
            false => crate::profiler::runtime("pipeline_compile", key),
            true => None,
        };
        let src = source();
        let (p, err) = self.scoped(|| {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(key),
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                });
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(key),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
        });
        if let Some(e) = err {
            return Err(self.gpu_error(op, &e));
        }
        let p = Arc::new(p);
        self.pipelines_created.fetch_add(1, Ordering::Relaxed);
        self.pipelines.lock().insert(key.to_string(), p.clone());
        Ok(p)
    }

    /// Record `pipeline` (kernel `kernel`) over a grid of `groups` workgroups, binding `meta` at
    /// 0 and `buffers` at 1, 2, ... A grid past the adapter's
    /// `max_compute_workgroups_per_dimension` in any dimension is split into several dispatches
    /// (in one compute pass), each with the grid position of its first workgroup appended to
    /// `meta` (the kernels' `group_id`). Every wgpu call is checked before anything is
    /// recorded, so an error is returned here, for `op`, and never poisons the batch. While a
    /// profiler records GPU kernels, or the GEMM tuner's stopwatch runs on this thread
    /// (`timing.rs`), the pass writes timestamps at its start and end.
    pub(crate) fn dispatch(
        &self,
        op: &'static str,
        kernel: &str,
        pipeline: &wgpu::ComputePipeline,
        meta: &[u32],
        buffers: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) -> Result<()> {
        if groups.contains(&0) {
            return Ok(());
        }
        let maxd = self.limits.max_compute_workgroups_per_dimension.max(1);
        let starts = |n: u32| (0..n).step_by(maxd as usize);
        let layout = pipeline.get_bind_group_layout(0);
        let mut parts = Vec::new();
        for z in starts(groups[2]) {
            for y in starts(groups[1]) {
                for x in starts(groups[0]) {
                    let base = [x, y, z];
                    let count: [u32; 3] = std::array::from_fn(|d| (groups[d] - base[d]).min(maxd));
                    parts.push((base, count));
                }
            }
        }
        let (binds, err) = self.scoped(|| {
            parts
                .iter()
                .map(|(base, _)| {
                    let words = [meta, base].concat();
                    let meta_buf =
                        self.device
                            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                                label: Some("wgtorch-meta"),
                                contents: bytemuck::cast_slice(&words),
                                usage: wgpu::BufferUsages::STORAGE,
                            });
                    let mut entries = vec![wgpu::BindGroupEntry {
                        binding: 0,
                        resource: meta_buf.as_entire_binding(),
                    }];
                    for (i, b) in buffers.iter().enumerate() {
                        entries.push(wgpu::BindGroupEntry {
                            binding: i as u32 + 1,
                            resource: b.as_entire_binding(),
                        });
                    }
                    self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(op),
                        layout: &layout,
                        entries: &entries,
                    })
                })
                .collect::<Vec<_>>()
        });
        if let Some(e) = err {
            return Err(self.gpu_error(op, &e));
        }
        let label = crate::profiler::gpu_label();
        let flush = {
            let mut p = self.pending.lock();
            let stopwatch = super::timing::stopwatch_pass(label.is_some());
            let timed = stopwatch.or_else(|| {
                label.and_then(|l| match &self.timing {
                    Some(t) => t.pass(self, kernel, l),
                    None => {
                        crate::profiler::gpu_time_unavailable(self.ordinal, || {
                            format!(
                                "gpu:{} \"{}\": the adapter has no timestamp queries",
                                self.ordinal, self.info.name
                            )
                        });
                        None
                    }
                })
            });
            let enc = p.encoder.get_or_insert_with(|| {
                self.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("wgtorch-batch"),
                    })
            });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(op),
                    timestamp_writes: timed.as_ref().map(|(set, i)| {
                        wgpu::ComputePassTimestampWrites {
                            query_set: set,
                            beginning_of_pass_write_index: Some(*i),
                            end_of_pass_write_index: Some(*i + 1),
                        }
                    }),
                });
                pass.set_pipeline(pipeline);
                for (bind, (_, [x, y, z])) in binds.iter().zip(&parts) {
                    pass.set_bind_group(0, bind, &[]);
                    pass.dispatch_workgroups(*x, *y, *z);
                }
            }
            p.dispatches += parts.len() as u32;
            p.dispatches >= BATCH
        };
        if !super::tune::trial_run() {
            self.dispatches.fetch_add(1, Ordering::Relaxed);
        }
        if flush {
            self.submit();
        }
        Ok(())
    }

    /// Submit the recorded work.
    pub fn submit(&self) {
        {
            // The lock is held through the submit so that work recorded by another thread after
            // this batch cannot reach the queue before it.
            let mut p = self.pending.lock();
            p.dispatches = 0;
            if let Some(mut enc) = p.encoder.take() {
                let timed = self
                    .timing
                    .as_ref()
                    .and_then(|t| Some((t, t.resolve(self, &mut enc)?)));
                self.queue.submit(Some(enc.finish()));
                self.submits.fetch_add(1, Ordering::Relaxed);
                if let Some((t, batch)) = timed {
                    t.submitted(batch);
                }
            }
        }
        self.drain_timestamps();
    }

    /// Hand the kernel timestamps that are back to the profiler.
    pub(crate) fn drain_timestamps(&self) {
        if let Some(t) = &self.timing {
            t.drain(self.ordinal);
        }
    }

    /// Submit the pending batch, wait for the queue and hand every kernel timestamp to the
    /// profiler (its stop). Errors the driver or an index check raised stay where they are, for
    /// the next op on this adapter to report.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn collect_timestamps(&self) {
        let Some(t) = &self.timing else {
            return;
        };
        self.submit();
        // A lost device fails the poll; its error reaches the next op too.
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        t.drain(self.ordinal);
    }

    /// [`GpuContext::collect_timestamps`] without blocking (the browser's event loop maps the
    /// timestamp buffers meanwhile).
    pub(crate) async fn collect_timestamps_async(&self) {
        let Some(t) = &self.timing else {
            return;
        };
        self.submit();
        // Take the maps to wait for first: a batch another thread submits after the poll
        // would have nobody to complete its map natively.
        let pending = t.pending();
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        for done in pending {
            done.await;
        }
        t.drain(self.ordinal);
    }

    /// Report (and clear) an error the driver raised since the last check.
    pub(crate) fn take_error(&self, op: &'static str) -> Result<()> {
        match self.error.lock().take() {
            Some(msg) => Err(Error::Gpu {
                op,
                adapter: self.info.name.clone(),
                msg,
            }),
            None => Ok(()),
        }
    }
}

/// llvmpipe (Mesa's lavapipe) ends an invocation's loops after 65,535 iterations in total.
fn llvmpipe_loop_cap(info: &wgpu::AdapterInfo) -> Option<u32> {
    let named = |s: &str| s.to_ascii_lowercase().contains("llvmpipe");
    (info.device_type == wgpu::DeviceType::Cpu && (named(&info.name) || named(&info.driver)))
        .then_some(65_535)
}
