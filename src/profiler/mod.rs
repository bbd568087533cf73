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
//! Not yet: GPU kernel times from timestamp queries (a GPU op's CPU time is its launch, not the
//! kernel's run), and the profiler in the browser ([`profile`] is an error there).

mod table;
mod trace;

pub use table::{KeyAverage, KeyAverages, SortBy};

use crate::{DType, Device, Error, Result, Tensor};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// What the profiler records; PyTorch's `torch.profiler.profile(...)` arguments.
#[derive(Clone, Debug, Default)]
pub struct ProfileOptions {
    /// Record each op's input shapes and dtypes (`record_shapes=True`).
    pub record_shapes: bool,
    /// Record the bytes each op allocates and frees, and each device's total over time
    /// (`profile_memory=True`).
    pub profile_memory: bool,
    /// When to record: `None` records every step of the closure.
    pub schedule: Option<Schedule>,
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
    /// The same on GPUs.
    pub self_gpu_memory: i64,
}

/// A device's allocated tensor bytes at a moment: the trace's memory counter track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemorySample {
    /// Nanoseconds since the profiler started.
    pub ts_ns: u64,
    /// The device.
    pub device: Device,
    /// Bytes of tensor storage allocated on it during the profile, net of frees (negative when
    /// storages made before the profile were freed).
    pub bytes: i64,
}

struct Recorder {
    generation: u64,
    opts: ProfileOptions,
    t0: Instant,
    recording: bool,
    events: Vec<Event>,
    memory: Vec<MemorySample>,
    live: Vec<(Device, i64)>,
}

/// Set while a profiler runs (the one load an op pays otherwise).
static ACTIVE: AtomicBool = AtomicBool::new(false);
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

fn begin(name: impl FnOnce() -> String, kind: EventKind, inputs: &[&Tensor]) -> RecordFunction {
    let thread = thread_number();
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
        dur_ns: 0,
        parent,
        input_shapes,
        input_dtypes,
        device: inputs.first().map(|t| t.device()),
        self_cpu_memory: 0,
        self_gpu_memory: 0,
    });
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
    begin(|| name.to_string(), EventKind::Scope, &[])
}

/// An op's event (the ops call this first): `None`, after one atomic load, when no profiler runs.
#[inline]
pub(crate) fn op(name: &'static str, inputs: &[&Tensor]) -> Option<RecordFunction> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some(begin(|| name.to_string(), EventKind::Op, inputs))
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
    ))
}

/// A named scope opened by the library itself (the `backward` pass, an optimizer's step).
#[inline]
pub(crate) fn scope(name: &'static str) -> Option<RecordFunction> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some(begin(|| name.to_string(), EventKind::Scope, &[]))
}

/// A tensor storage was created (`sign` 1) or freed (`sign` -1); its size is read only while a
/// profiler runs.
#[inline]
pub(crate) fn memory(storage: &crate::backend::Storage, sign: i64) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let (device, bytes) = storage.footprint();
    let delta = sign * bytes as i64;
    let inner = THREAD.with(|t| t.borrow().1.last().copied());
    let mut g = RECORDER.lock();
    let Some(r) = g.as_mut().filter(|r| r.recording && r.opts.profile_memory) else {
        return;
    };
    if let Some(e) = inner
        .filter(|(gen, _)| *gen == r.generation)
        .and_then(|(_, i)| r.events.get_mut(i))
    {
        match device {
            Device::Cpu => e.self_cpu_memory += delta,
            Device::Gpu(_) => e.self_gpu_memory += delta,
        }
    }
    let now = match r.live.iter_mut().find(|(d, _)| *d == device) {
        Some((_, b)) => {
            *b += delta;
            *b
        }
        None => {
            r.live.push((device, delta));
            delta
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
    /// already runs in this process, or in the browser (no clock there yet).
    pub fn start(opts: ProfileOptions) -> Result<Profiler> {
        let invalid = |msg: String| Error::InvalidArgument {
            op: "profiler",
            msg,
        };
        if cfg!(target_arch = "wasm32") {
            return Err(invalid(
                "the profiler is not available in the browser build yet".into(),
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
        *g = Some(Recorder {
            generation,
            opts,
            t0: Instant::now(),
            recording: first == Phase::Record,
            events: Vec::new(),
            memory: Vec::new(),
            live: Vec::new(),
        });
        drop(g);
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
            let scope = begin(|| format!("ProfilerStep#{step}"), EventKind::Scope, &[]);
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
        }
        ACTIVE.store(phase != Phase::Idle, Ordering::Relaxed);
        self.enter(next, phase);
    }

    /// Stop profiling and return what was recorded. Events still open (a scope guard alive
    /// past the stop) end at the stop.
    pub fn stop(self) -> Profile {
        drop(self.step.lock().1.take());
        // Only this profiler (by generation) can take the recorder, so it is always there.
        self.finish().unwrap_or_default()
    }

    fn finish(&self) -> Option<Profile> {
        let mut g = RECORDER.lock();
        if g.as_ref().is_none_or(|r| r.generation != self.generation) {
            return None;
        }
        ACTIVE.store(false, Ordering::Relaxed);
        let r = g.take()?;
        let end = r.t0.elapsed().as_nanos() as u64;
        let mut events = r.events;
        for e in &mut events {
            if e.dur_ns == 0 && e.start_ns < end {
                // Still open: ends now. (A closed event of under 1 ns keeps 0 and is also
                // clamped here; that is within the clock's resolution.)
                e.dur_ns = end - e.start_ns;
            }
        }
        Some(Profile {
            events,
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
    memory: Vec<MemorySample>,
    total_ns: u64,
}

impl Profile {
    /// Every event, in the order they started (per thread, parents before their children).
    pub fn events(&self) -> &[Event] {
        &self.events
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
        KeyAverages::new(&self.events, false)
    }

    /// `prof.key_averages(group_by_input_shape=True)`: grouped by name and input shapes (with
    /// [`ProfileOptions::record_shapes`]); the table gets an `Input Shapes` column.
    pub fn key_averages_by_input_shape(&self) -> KeyAverages {
        KeyAverages::new(&self.events, true)
    }

    /// `prof.export_chrome_trace(path)`: the events as Trace Event Format JSON, written
    /// atomically: CPU events on one track per thread, memory as counter tracks per device.
    /// Perfetto (ui.perfetto.dev) and `chrome://tracing` open it.
    pub fn export_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::io::write_atomic(path.as_ref(), self.chrome_trace().as_bytes())
    }

    /// The Trace Event Format JSON that [`Profile::export_chrome_trace`] writes.
    pub fn chrome_trace(&self) -> String {
        trace::chrome_trace(&self.events, &self.memory)
    }
}
