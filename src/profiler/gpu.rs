//! The GPU side of the profiler: kernels timed by the adapter (timestamp queries written around
//! each compute pass by `backend::gpu::timing`), put on the profiler's clock, and the bytes
//! copied to and from GPUs.

use super::{Event, ACTIVE, GENERATION, GPU_RECORDING, RECORDER, THREAD};
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
    pub(crate) generation: u64,
    pub(crate) op: Option<usize>,
}

/// A dispatch about to be recorded while GPU kernels are profiled gets a label; `None` (after
/// one atomic load) otherwise.
#[inline]
pub(crate) fn gpu_label() -> Option<KernelLabel> {
    if !ACTIVE.load(Ordering::Relaxed) || !GPU_RECORDING.load(Ordering::Relaxed) {
        return None;
    }
    let generation = GENERATION.load(Ordering::Relaxed);
    let op = THREAD.with(|t| {
        t.borrow()
            .1
            .last()
            .filter(|(g, _)| *g == generation)
            .map(|&(_, i)| i)
    });
    Some(KernelLabel { generation, op })
}

/// The profiler's clock now, if profiler `generation` still runs.
pub(crate) fn now_ns(generation: u64) -> Option<u64> {
    RECORDER
        .lock()
        .as_ref()
        .filter(|r| r.generation == generation)
        .map(|r| r.t0.elapsed().as_nanos() as u64)
}

/// One timed kernel as the adapter reported it: (kernel, label, start, end) in the adapter's
/// nanoseconds.
pub(crate) type RawKernel = (Arc<str>, KernelLabel, u64, u64);

/// The timestamps of one submitted batch on adapter `ordinal`, submitted at `submit_ns` on
/// profiler `generation`'s clock.
pub(crate) fn gpu_batch(ordinal: usize, generation: u64, submit_ns: u64, kernels: Vec<RawKernel>) {
    let mut g = RECORDER.lock();
    if let Some(r) = g.as_mut().filter(|r| r.generation == generation) {
        let kernels = kernels
            .into_iter()
            .filter(|k| k.1.generation == generation)
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
    let inner = THREAD.with(|t| t.borrow().1.last().copied());
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
    kernels: Vec<RawKernel>,
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
                    let first = b.kernels.iter().map(|k| k.2).min()?;
                    Some(b.submit_ns as i128 - first as i128)
                })
                .max()
                .unwrap_or(0);
            let mut ks: Vec<GpuKernel> = batches()
                .flat_map(|b| b.kernels.iter())
                .map(|(name, label, start, end)| GpuKernel {
                    name: name.to_string(),
                    device: d,
                    op: label.op.filter(|&i| i < events.len()),
                    start_ns: (*start as i128 + offset).max(0) as u64,
                    dur_ns: end.saturating_sub(*start),
                })
                .collect();
            ks.sort_by_key(|k| k.start_ns);
            out.extend(ks);
        }
        let unavailable = self.unavailable.into_iter().map(|(_, why)| why).collect();
        (out, unavailable)
    }
}
