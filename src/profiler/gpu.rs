//! The GPU side of the profiler: kernels timed by the adapter (timestamp queries written around
//! each compute pass by `backend::gpu::timing`), put on the profiler's clock, and the bytes
//! copied to and from GPUs.

use super::{Event, Instant, ACTIVE, GENERATION, GPU_RECORDING, RECORDER, THREAD};
use crate::Device;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One kernel's run on a GPU, timed by the adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuKernel {
    /// The kernel (its pipeline's key: `binary_add_f32`, `conv2d_fwd_...`).
    pub name: String,
    /// The GPU it ran on.
    pub device: Device,
    /// The event (an index into [`Profile::events`](super::Profile::events)) of the op or
    /// backward node that launched it; `None` when it was launched outside every event (or CPU
    /// activity was not recorded).
    pub op: Option<usize>,
    /// When the op recorded the kernel's dispatch, on the profiler's clock (nanoseconds since it
    /// started): where the trace's arrow from the op starts.
    pub launch_ns: u64,
    /// Start on the profiler's clock, nanoseconds since it started. The adapter's clock is
    /// mapped onto the CPU's by the tightest bound the submissions give: no kernel starts before
    /// the CPU submitted its batch.
    pub start_ns: u64,
    /// Run time measured by the adapter, nanoseconds.
    pub dur_ns: u64,
}

/// Which op a dispatch belongs to: taken when it is recorded, carried to its timestamps.
#[derive(Clone, Debug)]
pub(crate) struct KernelLabel {
    generation: u64,
    op: Option<usize>,
    launched: Instant,
}

/// A dispatch about to be recorded while GPU kernels are profiled gets a label; `None` (after
/// one atomic load) otherwise.
#[inline]
pub(crate) fn gpu_label() -> Option<KernelLabel> {
    if !ACTIVE.load(Ordering::Relaxed) || !GPU_RECORDING.load(Ordering::Relaxed) {
        return None;
    }
    let generation = GENERATION.load(Ordering::Relaxed);
    let op = THREAD
        .try_with(|t| {
            t.borrow()
                .1
                .last()
                .filter(|(g, _)| *g == generation)
                .map(|&(_, i)| i)
        })
        .ok()
        .flatten();
    Some(KernelLabel {
        generation,
        op,
        launched: Instant::now(),
    })
}

/// The running profiler's generation and its clock now (a batch's submit time).
pub(crate) fn now_ns() -> Option<(u64, u64)> {
    RECORDER
        .lock()
        .as_ref()
        .map(|r| (r.generation, r.t0.elapsed().as_nanos() as u64))
}

/// One timed kernel as the adapter reported it: (kernel, label, start, end) in the adapter's
/// nanoseconds.
pub(crate) type RawKernel = (Arc<str>, KernelLabel, u64, u64);

/// One kernel of a batch, its launch on the profiler's clock.
struct Timed {
    name: Arc<str>,
    op: Option<usize>,
    launch_ns: u64,
    start: u64,
    end: u64,
}

/// The timestamps of one submitted batch on adapter `ordinal`, submitted at `submit_ns` on
/// profiler `generation`'s clock. Kernels another profiler launched (a batch that straddled
/// two profilers) are left out.
pub(crate) fn gpu_batch(ordinal: usize, generation: u64, submit_ns: u64, kernels: Vec<RawKernel>) {
    let mut g = RECORDER.lock();
    if let Some(r) = g.as_mut().filter(|r| r.generation == generation) {
        let t0 = r.t0;
        let kernels = kernels
            .into_iter()
            .filter(|k| k.1.generation == generation)
            .map(|(name, label, start, end)| Timed {
                name,
                op: label.op,
                launch_ns: label.launched.saturating_duration_since(t0).as_nanos() as u64,
                start,
                end,
            })
            .collect::<Vec<_>>();
        if !kernels.is_empty() {
            r.gpu.batches.push(Batch {
                device: Device::Gpu(ordinal),
                submit_ns,
                kernels,
            });
        }
    }
}

/// Adapter `ordinal` ran kernels that it cannot time.
pub(crate) fn gpu_time_unavailable(ordinal: usize, why: impl FnOnce() -> String) {
    let mut g = RECORDER.lock();
    if let Some(r) = g.as_mut() {
        if !r.gpu.unavailable.iter().any(|(o, _)| *o == ordinal) {
            r.gpu.unavailable.push((ordinal, why()));
        }
    }
}

/// A copy between the host and a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transfer {
    Upload,
    ReadBack,
}

/// `bytes` were copied: counted on this thread's innermost event.
#[inline]
pub(crate) fn transfer(kind: Transfer, bytes: u64) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let inner = THREAD
        .try_with(|t| t.borrow().1.last().copied())
        .ok()
        .flatten();
    let mut g = RECORDER.lock();
    let Some(r) = g.as_mut().filter(|r| r.recording) else {
        return;
    };
    if let Some(e) = inner
        .filter(|(gen, _)| *gen == r.generation)
        .and_then(|(_, i)| r.events.get_mut(i))
    {
        match kind {
            Transfer::Upload => e.bytes_uploaded += bytes,
            Transfer::ReadBack => e.bytes_read_back += bytes,
        }
    }
}

pub(super) struct Batch {
    device: Device,
    submit_ns: u64,
    kernels: Vec<Timed>,
}

/// What the adapters reported while the profiler ran.
#[derive(Default)]
pub(super) struct GpuRecords {
    batches: Vec<Batch>,
    unavailable: Vec<(usize, String)>,
}

impl GpuRecords {
    /// The kernels on the profiler's clock, per device in the order they ran, and the reasons
    /// some could not be timed.
    pub(super) fn finish(self, events: &[Event]) -> (Vec<GpuKernel>, Vec<String>) {
        let mut devices: Vec<Device> = self.batches.iter().map(|b| b.device).collect();
        devices.sort_by_key(|d| d.to_string());
        devices.dedup();
        let mut out = Vec::new();
        for d in devices {
            let batches = || self.batches.iter().filter(move |b| b.device == d);
            // The adapter's clock is offset from the profiler's; a batch cannot start before it
            // was submitted, so the largest (submit - first start) is the tightest offset.
            let offset = batches()
                .filter_map(|b| {
                    let first = b.kernels.iter().map(|k| k.start).min()?;
                    Some(b.submit_ns as i128 - first as i128)
                })
                .max()
                .unwrap_or(0);
            let mut ks: Vec<GpuKernel> = batches()
                .flat_map(|b| b.kernels.iter())
                .map(|k| GpuKernel {
                    name: k.name.to_string(),
                    device: d,
                    op: k.op.filter(|&i| i < events.len()),
                    launch_ns: k.launch_ns,
                    start_ns: (k.start as i128 + offset).max(0) as u64,
                    dur_ns: k.end.saturating_sub(k.start),
                })
                .collect();
            ks.sort_by_key(|k| k.start_ns);
            out.extend(ks);
        }
        let unavailable = self.unavailable.into_iter().map(|(_, why)| why).collect();
        (out, unavailable)
    }
}
