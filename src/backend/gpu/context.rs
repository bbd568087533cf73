//! One wgpu context per adapter, shared by every tensor on it: device and queue, the pipeline
//! cache, the buffer pool and the pending command encoder.

use crate::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use wgpu::util::DeviceExt;

/// Dispatches recorded before the pending encoder is submitted on its own.
const BATCH: u32 = 64;

/// Counters for benchmarks and leak tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Bytes held by live tensors (pool size classes).
    pub bytes_in_use: u64,
    /// High-water mark of `bytes_in_use`.
    pub peak_bytes: u64,
    /// Bytes cached in the pool's free lists.
    pub bytes_cached: u64,
    /// Compute dispatches recorded.
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
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    pub(crate) has_f16: bool,
    native_f16: std::sync::atomic::AtomicBool,
    pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
    free: Mutex<HashMap<u64, Vec<wgpu::Buffer>>>,
    pending: Mutex<Pending>,
    error: Arc<Mutex<Option<String>>>,
    in_use: AtomicU64,
    peak: AtomicU64,
    cached: AtomicU64,
    dispatches: AtomicU64,
    submits: AtomicU64,
    pipelines_created: AtomicU64,
    /// Per-kernel wall time when profiling (`set_profiling`): key -> (dispatches, seconds).
    profile: Mutex<Option<HashMap<String, (u64, f64)>>>,
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
            self.ctx.in_use.fetch_sub(self.class, Ordering::Relaxed);
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
                *s = Some(match &e {
                    wgpu::Error::Validation { description, .. } => description.clone(),
                    other => other.to_string(),
                });
            }
        }));
        GpuContext {
            checks: super::checks::IndexChecks::new(&device),
            device,
            queue,
            info,
            limits,
            has_f16,
            native_f16: std::sync::atomic::AtomicBool::new(has_f16),
            pipelines: Mutex::new(HashMap::new()),
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
            profile: Mutex::new(None),
        }
    }
}

fn size_class(bytes: u64) -> u64 {
    bytes.max(256).next_power_of_two()
}

impl GpuContext {
    /// "name (type, backend)".
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}{})",
            if self.info.name.is_empty() {
                "unnamed adapter"
            } else {
                &self.info.name
            },
            self.info.device_type,
            self.info.backend,
            if self.has_f16 { ", shader-f16" } else { "" }
        )
    }
    /// True for software adapters (lavapipe, SwiftShader: wgpu reports device type Cpu).
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }
    /// Whether to run the CPU-friendly kernel variants: on software adapters, unless
    /// `WGTORCH_GPU_KERNELS` asks for the real-GPU ones.
    pub fn is_cpu_adapter(&self) -> bool {
        self.is_software() && std::env::var("WGTORCH_GPU_KERNELS").is_err()
    }
    /// Whether f16 tensors run on native `f16` kernels (else the packed path).
    pub fn native_f16(&self) -> bool {
        self.native_f16.load(Ordering::Relaxed)
    }
    /// Choose the f16 path: native kernels need the adapter's SHADER_F16 (asking for them without
    /// it keeps the packed path). f16 tensors keep their bytes either way, so this is safe to flip
    /// while tensors exist. Returns the path now in force.
    pub fn set_native_f16(&self, on: bool) -> bool {
        let v = on && self.has_f16;
        self.native_f16.store(v, Ordering::Relaxed);
        v
    }
    /// Adapter name.
    pub fn adapter_name(&self) -> &str {
        &self.info.name
    }
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

    /// Refuse a buffer larger than the adapter can bind.
    pub(crate) fn check_size(&self, op: &'static str, bytes: u64) -> Result<()> {
        let lim = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size);
        if size_class(bytes) > lim && bytes > 0 {
            return Err(Error::GpuLimit {
                op,
                what: format!("a storage buffer of {bytes} bytes"),
                needed: bytes,
                limit: lim,
                limit_name: "max_storage_buffer_binding_size",
                adapter: self.info.name.clone(),
            });
        }
        Ok(())
    }

    /// A pooled buffer of at least `bytes`.
    pub(crate) fn alloc(self: &Arc<Self>, op: &'static str, bytes: u64) -> Result<GpuBuffer> {
        self.check_size(op, bytes)?;
        let lim = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size);
        let class = size_class(bytes).min(lim.max(256));
        let reused = self.free.lock().get_mut(&class).and_then(|v| v.pop());
        let buffer = match reused {
            Some(b) => {
                self.cached.fetch_sub(class, Ordering::Relaxed);
                b
            }
            None => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgtorch-tensor"),
                size: class,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        let now = self.in_use.fetch_add(class, Ordering::Relaxed) + class;
        self.peak.fetch_max(now, Ordering::Relaxed);
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
            let data = if bytes.len() % 4 != 0 {
                padded = bytes.to_vec();
                padded.resize(bytes.len().next_multiple_of(4), 0);
                &padded[..]
            } else {
                bytes
            };
            let staging = self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("wgtorch-upload"),
                    contents: data,
                    usage: wgpu::BufferUsages::COPY_SRC,
                });
            self.with_encoder(|enc| {
                enc.copy_buffer_to_buffer(&staging, 0, buf.raw(), 0, data.len() as u64)
            });
        }
        Ok(buf)
    }

    fn with_encoder<R>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> R) -> R {
        let mut p = self.pending.lock();
        let enc = p.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("wgtorch-batch"),
                })
        });
        f(enc)
    }

    /// The cached pipeline for `key`, compiling `source()` the first time.
    pub(crate) fn pipeline(
        &self,
        key: &str,
        source: impl FnOnce() -> String,
    ) -> Arc<wgpu::ComputePipeline> {
        if let Some(p) = self.pipelines.lock().get(key) {
            return p.clone();
        }
        let src = source();
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(key),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        let p = Arc::new(
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(key),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                }),
        );
        self.pipelines_created.fetch_add(1, Ordering::Relaxed);
        self.pipelines.lock().insert(key.to_string(), p.clone());
        p
    }

    /// Record one dispatch of `pipeline` over `groups` workgroups (folded into 2-D past the
    /// per-dimension limit), binding `meta` at 0 and `buffers` at 1, 2, ...
    pub(crate) fn dispatch(
        &self,
        op: &'static str,
        pipeline: &wgpu::ComputePipeline,
        meta: &[u32],
        buffers: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) -> Result<()> {
        let maxd = self.limits.max_compute_workgroups_per_dimension;
        let [mut x, mut y, z] = groups;
        if x == 0 || y == 0 || z == 0 {
            return Ok(());
        }
        if x > maxd {
            if y != 1 {
                return Err(Error::GpuLimit {
                    op,
                    what: format!("{x}x{y} workgroups"),
                    needed: x as u64,
                    limit: maxd as u64,
                    limit_name: "max_compute_workgroups_per_dimension",
                    adapter: self.info.name.clone(),
                });
            }
            y = x.div_ceil(maxd);
            x = maxd;
            if y > maxd {
                return Err(Error::GpuLimit {
                    op,
                    what: format!("{} workgroups", groups[0]),
                    needed: groups[0] as u64,
                    limit: maxd as u64 * maxd as u64,
                    limit_name: "max_compute_workgroups_per_dimension (squared)",
                    adapter: self.info.name.clone(),
                });
            }
        }
        let mut words = meta.to_vec();
        if words.is_empty() {
            words.push(0);
        }
        let meta_buf = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("wgtorch-meta"),
                contents: bytemuck::cast_slice(&words),
                usage: wgpu::BufferUsages::STORAGE,
            });
        let layout = pipeline.get_bind_group_layout(0);
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
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(op),
            layout: &layout,
            entries: &entries,
        });
        let flush = {
            let mut p = self.pending.lock();
            let enc = p.encoder.get_or_insert_with(|| {
                self.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("wgtorch-batch"),
                    })
            });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(op),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(x, y, z);
            }
            p.dispatches += 1;
            p.dispatches >= BATCH
        };
        self.dispatches.fetch_add(1, Ordering::Relaxed);
        if flush {
            self.submit();
        }
        Ok(())
    }

    /// Submit the recorded work.
    pub fn submit(&self) {
        // The lock is held through the submit so that work recorded by another thread after this
        // batch cannot reach the queue before it.
        let mut p = self.pending.lock();
        p.dispatches = 0;
        if let Some(enc) = p.encoder.take() {
            self.queue.submit(Some(enc.finish()));
            self.submits.fetch_add(1, Ordering::Relaxed);
        }
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

    /// Copy `bytes` bytes of `buf` back to the host, waiting for the work before it; the
    /// index-check flag comes back with them and a failure it records is the error.
    pub(crate) async fn read_async(&self, buf: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        if bytes == 0 && !self.checks.dirty() {
            return Ok(Vec::new());
        }
        let padded = bytes.next_multiple_of(4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgtorch-readback"),
            size: padded + super::checks::SLOT_BYTES,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let flagged = self.with_encoder(|enc| {
            if padded > 0 {
                enc.copy_buffer_to_buffer(buf, 0, &staging, 0, padded);
            }
            self.checks.copy_back(enc, &staging, padded)
        });
        self.submit();
        let done = super::oneshot::OneShot::new();
        let tx = done.sender();
        staging.map_async(wgpu::MapMode::Read, .., move |r| tx.send(r.is_ok()));
        // Natively the map completes inside this poll; in the browser the event loop completes it
        // and the await below yields to it.
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu {
                op: "readback",
                adapter: self.info.name.clone(),
                msg: e.to_string(),
            })?;
        let mapped = done.await;
        self.take_error("readback")?;
        if !mapped {
            return Err(Error::Gpu {
                op: "readback",
                adapter: self.info.name.clone(),
                msg: "mapping the readback buffer failed".into(),
            });
        }
        let data = staging
            .get_mapped_range(..)
            .map_err(|e| Error::Gpu {
                op: "readback",
                adapter: self.info.name.clone(),
                msg: e.to_string(),
            })?
            .to_vec();
        staging.unmap();
        if flagged {
            self.checks.report(&data[padded as usize..])?;
        }
        Ok(data[..bytes as usize].to_vec())
    }

    /// Turn kernel profiling on (clearing earlier figures) or off. While on, every dispatch is
    /// submitted and waited for on its own and its wall time added to its kernel's entry: slow,
    /// but it shows where a step's time goes on any adapter (`examples/bench.rs --profile`).
    pub fn set_profiling(&self, on: bool) {
        *self.profile.lock() = on.then(HashMap::new);
    }
    /// The profile so far: (kernel key, dispatches, seconds), slowest first.
    pub fn profile(&self) -> Vec<(String, u64, f64)> {
        let mut v: Vec<_> = self
            .profile
            .lock()
            .iter()
            .flatten()
            .map(|(k, &(n, t))| (k.clone(), n, t))
            .collect();
        v.sort_by(|a, b| b.2.total_cmp(&a.2));
        v
    }
    /// Run `record` (which records one dispatch of kernel `key`), timing it alone when profiling.
    pub(crate) fn timed(&self, key: &str, record: impl FnOnce() -> Result<()>) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        if self.profile.lock().is_some() {
            self.synchronize()?;
            let t0 = std::time::Instant::now();
            record()?;
            self.synchronize()?;
            let dt = t0.elapsed().as_secs_f64();
            if let Some(m) = self.profile.lock().as_mut() {
                let e = m.entry(key.to_string()).or_default();
                e.0 += 1;
                e.1 += dt;
            }
            return Ok(());
        }
        record()
    }

    /// Wait until all submitted work is done (reporting an index-check failure, if any).
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        if self.checks.dirty() {
            return pollster::block_on(self.read_async(self.checks.buffer(), 0)).map(drop);
        }
        self.submit();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu {
                op: "synchronize",
                adapter: self.info.name.clone(),
                msg: e.to_string(),
            })?;
        self.take_error("synchronize")
    }
}
