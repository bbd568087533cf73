//! `torch.profiler` for wgtorch: where a step's time and memory go, op by op.
//!
//! [`profile`] runs a closure with the profiler on and returns a [`Profile`]: one [`Event`] per
//! op call (CPU time from its start to its end, input shapes and dtypes when
//! [`ProfileOptions::record_shapes`]), one per backward node (named after its forward op:
//! `conv2d_backward`), one per [`record_function`] scope and per [`Profiler::step`] of a
//! [`Schedule`], all nested as they ran. [`Profile::key_averages`] groups them by name into
//! PyTorch's table (self and total CPU time, calls, memory), and
//! [`Profile::export_chrome_trace`] writes a Trace Event Format file that Perfetto and
//! `chrome://tracing` open.
//!
//! ```
//! use wgtorch::profiler::{self, ProfileOptions, SortBy};
//! use wgtorch::{Device, Tensor};
//! let x = Tensor::randn([64, 128], &Device::Cpu)?.requires_grad_(true);
//! let w = Tensor::randn([128, 32], &Device::Cpu)?;
//! let prof = profiler::profile(ProfileOptions { record_shapes: true, ..Default::default() }, |_| {
//!     let _scope = profiler::record_function("my_step"); // with record_function("my_step"):
//!     x.matmul(&w)?.relu()?.sum_all()?.backward()
//! })?;
//! let table = prof.key_averages().table(SortBy::CpuTimeTotal, 10);
//! assert!(table.contains("my_step") && table.contains("matmul") && table.contains("relu_backward"));
//! assert_eq!(prof.events().iter().filter(|e| e.name == "matmul").count(), 1);
//! # Ok::<(), wgtorch::Error>(())
//! ```
//!
//! When no profiler runs, an op pays one relaxed atomic load. Only one profiler runs at a time in
//! a process; ops on every thread are recorded (the data loader's workers too), each thread on its
//! own track. Memory ([`ProfileOptions::profile_memory`]) counts tensor storages as they are
//! created and freed: each event's self memory is what was allocated minus what was freed while
//! it was the innermost event of its thread, and the trace carries each device's total as a
//! counter track.
//!
//! On a GPU ([`ProfilerActivity::Gpu`]) each kernel's run is timed by the adapter itself with
//! timestamp queries written around its compute pass in the batched command encoder, resolved
//! when the batch is submitted and read back without waiting for the queue; each kernel is a
//! [`GpuKernel`] attributed to the op (or backward node) that launched it, so the table's GPU
//! columns say how long each op ran on the device. Compiling a new pipeline is its own event
//! (`pipeline_compile`), and every event counts the bytes it uploaded and read back. An adapter
//! without timestamp queries (a browser that does not offer them) gets no invented figures: its
//! GPU columns read `n/a` and [`Profile::gpu_time_unavailable`] says why.
//!
//! In the browser the profiler runs the same way; end it with [`Profiler::stop_async`], which
//! waits (without blocking the page) for the last kernels' timestamps.

mod gpu;
mod stack;
mod table;
mod trace;

pub use gpu::GpuKernel;
pub(crate) use gpu::{
    gpu_batch, gpu_label, gpu_time_unavailable, now_ns as gpu_now_ns, transfer, KernelLabel,
    Transfer,
};
pub use table::{KeyAverage, KeyAverages, SortBy};

use crate::{DType, Device, Error, Result, Tensor};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;
#[cfg(target_arch = "wasm32")]
use web_time::Instant;

/// What to profile, `torch.profiler.ProfilerActivity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProfilerActivity {
    /// Ops, backward nodes and scopes on the CPU threads (`ProfilerActivity.CPU`).
    Cpu,
    /// Kernels on GPU adapters, timed by the adapter (`ProfilerActivity.CUDA`).
    Gpu,
}

impl ProfilerActivity {
    /// Both activities: the default, as PyTorch's when `activities` is not given.
    pub const ALL: &'static [ProfilerActivity] = &[ProfilerActivity::Cpu, ProfilerActivity::Gpu];
}

/// What the profiler records; PyTorch's `torch.profiler.profile(...)` arguments.
#[derive(Clone, Debug)]
pub struct ProfileOptions {
    /// What to record (default [`ProfilerActivity::ALL`]). Without [`ProfilerActivity::Cpu`]
    /// only GPU kernels are kept (each still names the op that launched it).
    pub activities: &'static [ProfilerActivity],
    /// Record each op's input shapes and dtypes (`record_shapes=True`).
    pub record_shapes: bool,
    /// Record the bytes each op allocates and frees, and each device's total over time
    /// (`profile_memory=True`).
    pub profile_memory: bool,
    /// Record where each op was called from (`with_stack=True`): the caller's frames outside
    /// wgtorch and the standard library, innermost first, from a backtrace taken per op (slow:
    /// for finding an op's call site, not for timing; file and line need debug info).
    pub with_stack: bool,
    /// When to record: `None` records every step of the closure.
    pub schedule: Option<Schedule>,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            activities: ProfilerActivity::ALL,
            record_shapes: false,
            profile_memory: false,
            with_stack: false,
            schedule: None,
        }
    }
}

/// `torch.profiler.schedule`: which [`Profiler::step`]s are recorded. After `skip_first` steps,
/// cycles of `wait` idle steps, `warmup` steps (the profiler runs, its events are dropped) and
/// `active` recorded steps repeat `repeat` times (0: until the end).
///
/// ```
/// use wgtorch::profiler::{self, ProfileOptions, Schedule};
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::ones([4], &Device::Cpu)?;
/// let schedule = Some(Schedule { wait: 1, warmup: 1, active: 2, repeat: 1, ..Default::default() });
/// let prof = profiler::profile(ProfileOptions { schedule, ..Default::default() }, |p| {
///     for _ in 0..6 {
///         x.exp()?;
///         p.step();
///     }
///     Ok(())
/// })?;
/// // steps 0..6: wait, warmup, active, active, then idle (one cycle)
/// let steps: Vec<_> = prof.events().iter().filter(|e| e.name.starts_with("ProfilerStep")).collect();
/// assert_eq!(steps.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["ProfilerStep#2", "ProfilerStep#3"]);
/// assert_eq!(prof.events().iter().filter(|e| e.name == "exp").count(), 2);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Steps ignored before the first cycle.
    pub skip_first: usize,
    /// Idle steps at the start of each cycle.
    pub wait: usize,
    /// Steps run with the profiler on whose events are dropped.
    pub warmup: usize,
    /// Recorded steps at the end of each cycle (at least 1).
    pub active: usize,
    /// Number of cycles; 0 repeats them until the profiler stops.
    pub repeat: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Warmup,
    Record,
}

impl Schedule {
    fn phase(&self, step: usize) -> Phase {
        let Some(s) = step.checked_sub(self.skip_first) else {
            return Phase::Idle;
        };
        let cycle = self.wait + self.warmup + self.active;
        if self.repeat > 0 && s / cycle >= self.repeat {
            return Phase::Idle;
        }
        match s % cycle {
            m if m < self.wait => Phase::Idle,
            m if m < self.wait + self.warmup => Phase::Warmup,
            _ => Phase::Record,
        }
    }
}

/// What an event stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A tensor op (`conv2d`, `add`, `matmul`, an optimizer's `step`).
    Op,
    /// A backward node of the autograd graph, named `<forward op>_backward`.
    Backward,
    /// A [`record_function`] scope, the whole `backward` pass, or a `ProfilerStep#N`.
    Scope,
    /// Work of the GPU runtime on the CPU: compiling a new pipeline (`pipeline_compile`, with
    /// the kernel in [`Event::detail`]; not the GEMM tuner's compiles on its background thread).
    Runtime,
}

/// One recorded span: an op call, a backward node or a scope.
#[derive(Clone, Debug)]
pub struct Event {
    /// The op or scope's name (`conv2d`, `conv2d_backward`, `ProfilerStep#3`).
    pub name: String,
    /// What the event stands for.
    pub kind: EventKind,
    /// The recording thread: 1 for the first thread that recorded, then 2, 3, ...
    pub thread: u64,
    /// Start, nanoseconds since the profiler started.
    pub start_ns: u64,
    /// Wall time from start to end, nanoseconds.
    pub dur_ns: u64,
    /// The enclosing event on the same thread (an index into [`Profile::events`]).
    pub parent: Option<usize>,
    /// Input shapes, with [`ProfileOptions::record_shapes`].
    pub input_shapes: Vec<Vec<usize>>,
    /// Input dtypes, with [`ProfileOptions::record_shapes`].
    pub input_dtypes: Vec<DType>,
    /// The device of the first input (`None` for scopes).
    pub device: Option<Device>,
    /// Bytes allocated minus bytes freed on the CPU while this was the innermost event.
    pub self_cpu_memory: i64,
    /// The same on GPUs (the GPU buffer pool's bytes in use, by size class as in `stats()`).
    pub self_gpu_memory: i64,
    /// The most CPU bytes this event and the events under it had allocated (net of frees) at any
    /// moment while it ran: its peak above its start.
    pub peak_cpu_memory: i64,
    /// The same on GPUs.
    pub peak_gpu_memory: i64,
    /// Bytes this event itself copied from the host to a GPU.
    pub bytes_uploaded: u64,
    /// Bytes this event itself read back from a GPU (the wait for the GPU is in its CPU time).
    pub bytes_read_back: u64,
    /// Where the op was called from, with [`ProfileOptions::with_stack`]: `function (file:line)`
    /// per frame, innermost first.
    pub stack: Vec<String>,
    /// More about the event: the kernel a `pipeline_compile` compiled.
    pub detail: Option<String>,
}

/// A device's allocated bytes at a moment: the trace's memory counter track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemorySample {
    /// Nanoseconds since the profiler started.
    pub ts_ns: u64,
    /// The device.
    pub device: Device,
    /// On a GPU, the bytes its buffer pool has in use (`stats().bytes_in_use`, so the samples'
    /// peak is `stats().peak_bytes` after `reset_peak()`). On the CPU, the bytes of tensor
    /// storage allocated during the profile net of frees (negative when storages made before
    /// the profile were freed).
    pub bytes: i64,
}

struct Recorder {
    generation: u64,
    opts: ProfileOptions,
    t0: Instant,
    recording: bool,
    events: Vec<Event>,
    /// Per event: net [CPU, GPU] bytes allocated under it so far (for the peaks).
    nets: Vec<[i64; 2]>,
    memory: Vec<MemorySample>,
    live: Vec<(Device, i64)>,
    gpu: gpu::GpuRecords,
}

/// The duration of an event that has not ended. (Not 0: on a coarse clock, as the browser's
/// `performance.now()`, a short event that ended takes 0 ns.)
const OPEN: u64 = u64::MAX;

/// Set while a profiler runs (the one load an op pays otherwise).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set while a profiler records GPU kernels (checked by each dispatch after `ACTIVE`).
static GPU_RECORDING: AtomicBool = AtomicBool::new(false);
/// Set while the running profiler records call stacks.
static WITH_STACK: AtomicBool = AtomicBool::new(false);
static RECORDER: Mutex<Option<Recorder>> = Mutex::new(None);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's track number and its open events (generation, index), innermost last.
    static THREAD: RefCell<(u64, Vec<(u64, usize)>)> = const { RefCell::new((0, Vec::new())) };
}

fn thread_number() -> u64 {
    THREAD.with(|t| {
        let mut t = t.borrow_mut();
        if t.0 == 0 {
            t.0 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        }
        t.0
    })
}

/// An open event; it ends when dropped. Returned by [`record_function`] (and used by the ops).
#[must_use = "the scope ends when this guard is dropped"]
pub struct RecordFunction {
    open: Option<(u64, usize)>,
}

impl Drop for RecordFunction {
    fn drop(&mut self) {
        let Some((generation, idx)) = self.open else {
            return;
        };
        THREAD.with(|t| {
            let stack = &mut t.borrow_mut().1;
            if let Some(pos) = stack.iter().rposition(|&o| o == (generation, idx)) {
                stack.truncate(pos);
            }
        });
        let mut g = RECORDER.lock();
        if let Some(r) = g.as_mut().filter(|r| r.generation == generation) {
            let end = r.t0.elapsed().as_nanos() as u64;
            if let Some(e) = r.events.get_mut(idx) {
                e.dur_ns = end.saturating_sub(e.start_ns);
            }
        }
    }
}

/// Opens an event (`detail`: see [`Event::detail`]).
fn begin(
    name: impl FnOnce() -> String,
    kind: EventKind,
    inputs: &[&Tensor],
    detail: Option<&str>,
) -> RecordFunction {
    let thread = thread_number();
    // Taken before the lock: symbolising a backtrace is slow and would stall every thread.
    let stack = if kind == EventKind::Op && WITH_STACK.load(Ordering::Relaxed) {
        stack::callers()
    } else {
        Vec::new()
    };
    let mut g = RECORDER.lock();
    let Some(r) = g.as_mut().filter(|r| r.recording) else {
        return RecordFunction { open: None };
    };
    let parent = THREAD.with(|t| {
        t.borrow()
            .1
            .last()
            .filter(|(gen, _)| *gen == r.generation)
            .map(|&(_, i)| i)
    });
    let (input_shapes, input_dtypes) = if r.opts.record_shapes {
        (
            inputs.iter().map(|t| t.shape().to_vec()).collect(),
            inputs.iter().map(|t| t.dtype()).collect(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let idx = r.events.len();
    r.events.push(Event {
        name: name(),
        kind,
        thread,
        start_ns: r.t0.elapsed().as_nanos() as u64,
        dur_ns: OPEN,
        parent,
        input_shapes,
        input_dtypes,
        device: inputs.first().map(|t| t.device()),
        self_cpu_memory: 0,
        self_gpu_memory: 0,
        peak_cpu_memory: 0,
        peak_gpu_memory: 0,
        bytes_uploaded: 0,
        bytes_read_back: 0,
        stack,
        detail: detail.map(str::to_string),
    });
    r.nets.push([0, 0]);
    let open = (r.generation, idx);
    drop(g);
    THREAD.with(|t| t.borrow_mut().1.push(open));
    RecordFunction { open: Some(open) }
}

/// A named scope, `torch.profiler.record_function(name)`: the time until the guard drops is one
/// event, and the ops run meanwhile on this thread nest under it. Free when no profiler runs.
pub fn record_function(name: &str) -> RecordFunction {
    if !ACTIVE.load(Ordering::Relaxed) {
        return RecordFunction { open: None };
    }
    begin(|| name.to_string(), EventKind::Scope, &[], None)
}

/// Whether a profiler runs (in any thread).
pub(crate) fn is_recording() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// An op's event (the ops call this first): `None`, after one atomic load, when no profiler runs.
#[inline]
pub(crate) fn op(name: &'static str, inputs: &[&Tensor]) -> Option<RecordFunction> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some(begin(|| name.to_string(), EventKind::Op, inputs, None))
}

/// A backward node's event, `<name>_backward`.
#[inline]
pub(crate) fn backward_node(name: &'static str) -> Option<RecordFunction> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some(begin(
        || format!("{name}_backward"),
        EventKind::Backward,
        &[],
        None,
    ))
}

/// A named scope opened by the library itself (the `backward` pass, an optimizer's step).
#[inline]
pub(crate) fn scope(name: &'static str) -> Option<RecordFunction> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some(begin(|| name.to_string(), EventKind::Scope, &[], None))
}

/// A GPU runtime event (a pipeline compile), with what it worked on.
pub(crate) fn runtime(name: &'static str, detail: &str) -> Option<RecordFunction> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some(begin(
        || name.to_string(),
        EventKind::Runtime,
        &[],
        Some(detail),
    ))
}

/// A CPU tensor storage was created (`sign` 1) or freed (`sign` -1); its size is read only
/// while a profiler runs. (GPU storage is counted by the GPU buffer pool: [`gpu_memory`].)
#[inline]
pub(crate) fn memory(storage: &crate::backend::Storage, sign: i64) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    if let (Device::Cpu, bytes) = storage.footprint() {
        memory_delta(Device::Cpu, sign * bytes as i64, None);
    }
}

/// The GPU buffer pool of adapter `ordinal` handed out (positive) or took back `bytes`, and now
/// has `in_use` bytes in use.
#[inline]
pub(crate) fn gpu_memory(ordinal: usize, bytes: i64, in_use: u64) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    memory_delta(Device::Gpu(ordinal), bytes, Some(in_use as i64));
}

fn memory_delta(device: Device, delta: i64, absolute: Option<i64>) {
    // (A buffer dropped while this thread's locals are torn down has no events to charge.)
    let open: Vec<(u64, usize)> = THREAD
        .try_with(|t| t.borrow().1.clone())
        .unwrap_or_default();
    let mut g = RECORDER.lock();
    let Some(r) = g.as_mut().filter(|r| r.recording && r.opts.profile_memory) else {
        return;
    };
    let slot = usize::from(device != Device::Cpu);
    let mine = open.iter().filter(|(gen, _)| *gen == r.generation);
    for &(_, i) in mine.clone() {
        if let (Some(e), Some(n)) = (r.events.get_mut(i), r.nets.get_mut(i)) {
            n[slot] += delta;
            let peak = if slot == 0 {
                &mut e.peak_cpu_memory
            } else {
                &mut e.peak_gpu_memory
            };
            *peak = (*peak).max(n[slot]);
        }
    }
    if let Some(e) = mine
        .clone()
        .next_back()
        .and_then(|&(_, i)| r.events.get_mut(i))
    {
        match device {
            Device::Cpu => e.self_cpu_memory += delta,
            Device::Gpu(_) => e.self_gpu_memory += delta,
        }
    }
    let now = match r.live.iter_mut().find(|(d, _)| *d == device) {
        Some((_, b)) => {
            *b = absolute.unwrap_or(*b + delta);
            *b
        }
        None => {
            let b = absolute.unwrap_or(delta);
            r.live.push((device, b));
            b
        }
    };
    let ts_ns = r.t0.elapsed().as_nanos() as u64;
    r.memory.push(MemorySample {
        ts_ns,
        device,
        bytes: now,
    });
}

/// A running profiler: the guard form of [`profile`]. [`Profiler::stop`] ends it and returns the
/// [`Profile`]; dropping it without stopping discards what it recorded.
pub struct Profiler {
    generation: u64,
    schedule: Option<Schedule>,
    step: Mutex<(usize, Option<RecordFunction>)>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("schedule", &self.schedule)
            .field("step", &self.step.lock().0)
            .finish()
    }
}

impl Profiler {
    /// Start profiling, `prof = torch.profiler.profile(...); prof.start()`. An error if a profiler
    /// already runs in this process.
    pub fn start(opts: ProfileOptions) -> Result<Profiler> {
        let invalid = |msg: String| Error::InvalidArgument {
            op: "profiler",
            msg,
        };
        if opts.activities.is_empty() {
            return Err(invalid(
                "activities is empty: give ProfilerActivity::Cpu, ProfilerActivity::Gpu or both"
                    .into(),
            ));
        }
        if let Some(s) = &opts.schedule {
            if s.active == 0 {
                return Err(invalid(
                    "schedule: active must be at least 1 (the steps to record)".into(),
                ));
            }
        }
        let mut g = RECORDER.lock();
        if g.is_some() {
            return Err(invalid(
                "a profiler is already running in this process; stop it first".into(),
            ));
        }
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        let schedule = opts.schedule;
        let first = schedule.map_or(Phase::Record, |s| s.phase(0));
        let gpu = opts.activities.contains(&ProfilerActivity::Gpu);
        let with_stack = opts.with_stack;
        *g = Some(Recorder {
            generation,
            opts,
            t0: Instant::now(),
            recording: first == Phase::Record,
            events: Vec::new(),
            nets: Vec::new(),
            memory: Vec::new(),
            live: Vec::new(),
            gpu: gpu::GpuRecords::default(),
        });
        drop(g);
        GPU_RECORDING.store(gpu && first == Phase::Record, Ordering::Relaxed);
        WITH_STACK.store(with_stack, Ordering::Relaxed);
        ACTIVE.store(first != Phase::Idle, Ordering::Relaxed);
        let p = Profiler {
            generation,
            schedule,
            step: Mutex::new((0, None)),
        };
        p.enter(0, first);
        Ok(p)
    }

    fn enter(&self, step: usize, phase: Phase) {
        if self.schedule.is_some() && phase == Phase::Record {
            let scope = begin(
                || format!("ProfilerStep#{step}"),
                EventKind::Scope,
                &[],
                None,
            );
            self.step.lock().1 = Some(scope);
        }
    }

    /// The end of a training step, `prof.step()`: with a [`Schedule`], moves to the next step's
    /// phase (each recorded step is a `ProfilerStep#N` event); without one, does nothing.
    pub fn step(&self) {
        let Some(schedule) = self.schedule else {
            return;
        };
        let next = {
            let mut s = self.step.lock();
            drop(s.1.take()); // ends ProfilerStep#N
            s.0 += 1;
            s.0
        };
        let phase = schedule.phase(next);
        if let Some(r) = RECORDER
            .lock()
            .as_mut()
            .filter(|r| r.generation == self.generation)
        {
            r.recording = phase == Phase::Record;
            GPU_RECORDING.store(
                r.recording && r.opts.activities.contains(&ProfilerActivity::Gpu),
                Ordering::Relaxed,
            );
        }
        ACTIVE.store(phase != Phase::Idle, Ordering::Relaxed);
        self.enter(next, phase);
    }

    /// Stop profiling and return what was recorded. Natively this waits for the GPU work
    /// recorded so far, to read its kernels' timestamps, and the profile ends when that work is
    /// done (events still open, such as a scope guard alive past the stop, end there too); in
    /// the browser, where nothing may wait, use [`Profiler::stop_async`] (this form keeps only
    /// the kernels whose timestamps are back).
    pub fn stop(self) -> Profile {
        drop(self.step.lock().1.take());
        self.stop_recording();
        #[cfg(not(target_arch = "wasm32"))]
        for c in crate::backend::gpu::contexts() {
            c.collect_timestamps();
        }
        #[cfg(target_arch = "wasm32")]
        for c in crate::backend::gpu::contexts() {
            c.drain_timestamps();
        }
        // Only this profiler (by generation) can take the recorder, so it is always there.
        self.finish().unwrap_or_default()
    }

    /// [`Profiler::stop`] for the browser: waits for the GPU work recorded so far without
    /// blocking the page, so every kernel's time is in the profile.
    pub async fn stop_async(self) -> Profile {
        drop(self.step.lock().1.take());
        self.stop_recording();
        for c in crate::backend::gpu::contexts() {
            c.collect_timestamps_async().await;
        }
        self.finish().unwrap_or_default()
    }

    /// Ends the recording: ops on other threads or tasks while stop waits for the GPU's
    /// timestamps are not part of the profile. (The profile itself ends when the GPU work it
    /// recorded is done, as PyTorch's synchronises the device at its stop.)
    fn stop_recording(&self) {
        if let Some(r) = RECORDER
            .lock()
            .as_mut()
            .filter(|r| r.generation == self.generation)
        {
            r.recording = false;
        }
        ACTIVE.store(false, Ordering::Relaxed);
        GPU_RECORDING.store(false, Ordering::Relaxed);
        WITH_STACK.store(false, Ordering::Relaxed);
    }

    fn finish(&self) -> Option<Profile> {
        let mut g = RECORDER.lock();
        if g.as_ref().is_none_or(|r| r.generation != self.generation) {
            return None;
        }
        ACTIVE.store(false, Ordering::Relaxed);
        GPU_RECORDING.store(false, Ordering::Relaxed);
        WITH_STACK.store(false, Ordering::Relaxed);
        let r = g.take()?;
        drop(g);
        let end = r.t0.elapsed().as_nanos() as u64;
        let mut events = r.events;
        for e in &mut events {
            if e.dur_ns == OPEN {
                // Still open: ends now.
                e.dur_ns = end.saturating_sub(e.start_ns);
            }
        }
        let (mut kernels, gpu_unavailable) = r.gpu.finish(&events);
        if !r.opts.activities.contains(&ProfilerActivity::Cpu) {
            events.clear();
            for k in &mut kernels {
                k.op = None;
            }
        }
        Some(Profile {
            events,
            kernels,
            gpu_unavailable,
            memory: r.memory,
            total_ns: end,
        })
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        drop(self.step.get_mut().1.take());
        self.finish();
    }
}

/// Run `f` with a profiler on: `with torch.profiler.profile(...) as prof:`. `f` gets the
/// [`Profiler`] to call [`Profiler::step`] on; its error is returned (and the profile dropped).
pub fn profile(opts: ProfileOptions, f: impl FnOnce(&Profiler) -> Result<()>) -> Result<Profile> {
    let p = Profiler::start(opts)?;
    f(&p)?;
    Ok(p.stop())
}

/// What a profiler recorded.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    events: Vec<Event>,
    kernels: Vec<GpuKernel>,
    gpu_unavailable: Vec<String>,
    memory: Vec<MemorySample>,
    total_ns: u64,
}

impl Profile {
    /// Every event, in the order they started (per thread, parents before their children).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Every GPU kernel timed by its adapter, in the order they ran on each device.
    pub fn gpu_kernels(&self) -> &[GpuKernel] {
        &self.kernels
    }

    /// Why some GPU time is missing: one line per adapter that ran kernels but could not time
    /// them (`gpu:0 "SwiftShader": the adapter has no timestamp queries`). Empty when every
    /// kernel was timed.
    pub fn gpu_time_unavailable(&self) -> &[String] {
        &self.gpu_unavailable
    }

    /// The memory counter samples, in time order.
    pub fn memory_samples(&self) -> &[MemorySample] {
        &self.memory
    }

    /// Wall time from the start to the stop of the profiler, nanoseconds.
    pub fn total_ns(&self) -> u64 {
        self.total_ns
    }

    /// `prof.key_averages()`: the events grouped by name.
    pub fn key_averages(&self) -> KeyAverages {
        KeyAverages::new(self, false)
    }

    /// `prof.key_averages(group_by_input_shape=True)`: grouped by name and input shapes (with
    /// [`ProfileOptions::record_shapes`]); the table gets an `Input Shapes` column.
    pub fn key_averages_by_input_shape(&self) -> KeyAverages {
        KeyAverages::new(self, true)
    }

    /// The highest value of `device`'s memory counter during the profile (see
    /// [`MemorySample::bytes`]; on a GPU, the pool's peak bytes in use).
    pub fn peak_memory(&self, device: Device) -> Option<i64> {
        self.memory
            .iter()
            .filter(|m| m.device == device)
            .map(|m| m.bytes)
            .max()
    }

    /// `prof.export_chrome_trace(path)`: the events as Trace Event Format JSON, written
    /// atomically: CPU events on one track per thread, GPU kernels on one track per device
    /// with a flow arrow from the op that launched each, memory as counter tracks per device.
    /// Perfetto (ui.perfetto.dev) and `chrome://tracing` open it.
    pub fn export_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::io::write_atomic(path.as_ref(), self.chrome_trace().as_bytes())
    }

    /// The Trace Event Format JSON that [`Profile::export_chrome_trace`] writes.
    pub fn chrome_trace(&self) -> String {
        trace::chrome_trace(self)
    }
}
