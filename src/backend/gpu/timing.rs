//! Kernel times for the profiler from the adapter's timestamp queries: while a profiler records
//! GPU kernels, each compute pass of the pending batch writes a timestamp at its start and end
//! into the batch's query set; when the batch is submitted the queries are resolved and copied
//! into a mappable buffer in the same submission, and the buffer is mapped without waiting. The
//! map completes whenever the queue is next polled (a readback, `synchronize`, the profiler's
//! stop; in the browser, the event loop), and the timestamps go to the profiler then.

use super::GpuContext;
use crate::profiler::{self, KernelLabel};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Compute passes one batch can hold: every pass counts at least one dispatch and the batch is
/// submitted at `BATCH` dispatches.
const PASSES: u32 = super::context::BATCH;

/// A batch's query set and the passes written into it so far.
struct Open {
    set: wgpu::QuerySet,
    passes: Vec<(Arc<str>, KernelLabel)>,
}

/// A submitted batch whose timestamps are being mapped.
struct InFlight {
    buffer: wgpu::Buffer,
    passes: Vec<(Arc<str>, KernelLabel)>,
    /// The profiler running at the submit, and its clock then.
    submitted: Option<(u64, u64)>,
    /// 0 while mapping, 1 mapped, 2 failed.
    state: Arc<AtomicU8>,
    done: Option<super::oneshot::OneShot<()>>,
}

/// The timestamp state of one context (present when the adapter has `TIMESTAMP_QUERY`).
pub(crate) struct Timing {
    /// Nanoseconds per timestamp tick.
    period: f32,
    open: Mutex<Option<Open>>,
    in_flight: Mutex<Vec<InFlight>>,
}

impl Timing {
    pub(crate) fn new(queue: &wgpu::Queue) -> Timing {
        Timing {
            period: queue.get_timestamp_period(),
            open: Mutex::new(None),
            in_flight: Mutex::new(Vec::new()),
        }
    }

    /// The timestamp writes for the next compute pass of the pending batch, for `kernel`
    /// launched under `label`; `None` when the batch's query set is full (the pass then goes
    /// untimed rather than overrunning it) or could not be created (then the profile says so).
    pub(crate) fn pass(
        &self,
        ctx: &GpuContext,
        kernel: &str,
        label: KernelLabel,
    ) -> Option<(wgpu::QuerySet, u32)> {
        let mut open = self.open.lock();
        if open.is_none() {
            // In an error scope: a query set the device refuses must not poison the batch.
            let (set, err) = ctx.scoped(|| {
                ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("wgtorch-profiler-timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count: 2 * PASSES,
                })
            });
            if let Some(e) = err {
                untimed(ctx, &e);
                return None;
            }
            *open = Some(Open {
                set,
                passes: Vec::new(),
            });
        }
        let o = open.as_mut()?;
        let n = o.passes.len() as u32;
        if n >= PASSES {
            return None;
        }
        o.passes.push((kernel.into(), label));
        Some((o.set.clone(), 2 * n))
    }

    /// Before the pending encoder is finished: resolve the batch's queries into a buffer the
    /// host can map. Returns the batch to hand to [`Timing::submitted`] after the submit.
    pub(crate) fn resolve(
        &self,
        ctx: &GpuContext,
        enc: &mut wgpu::CommandEncoder,
    ) -> Option<InFlightBatch> {
        let o = self.open.lock().take()?;
        if o.passes.is_empty() {
            return None;
        }
        let n = 2 * o.passes.len() as u32;
        let bytes = u64::from(n) * u64::from(wgpu::QUERY_SIZE);
        let buffer = |label, usage| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let ((resolved, readback), err) = ctx.scoped(|| {
            (
                buffer(
                    "wgtorch-profiler-resolve",
                    wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                ),
                buffer(
                    "wgtorch-profiler-readback",
                    wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                ),
            )
        });
        if let Some(e) = err {
            // The batch's work runs untimed; nothing that could fail goes into its encoder.
            untimed(ctx, &e);
            return None;
        }
        enc.resolve_query_set(&o.set, 0..n, &resolved, 0);
        enc.copy_buffer_to_buffer(&resolved, 0, &readback, 0, bytes);
        Some(InFlightBatch {
            buffer: readback,
            passes: o.passes,
            submitted: profiler::gpu_now_ns(),
        })
    }

    /// After the submit that carries `batch`: map its timestamps without waiting.
    pub(crate) fn submitted(&self, batch: InFlightBatch) {
        let state = Arc::new(AtomicU8::new(0));
        let done = super::oneshot::OneShot::new();
        let (tx, st) = (done.sender(), state.clone());
        batch.buffer.map_async(wgpu::MapMode::Read, .., move |r| {
            st.store(if r.is_ok() { 1 } else { 2 }, Ordering::Release);
            tx.send(());
        });
        self.in_flight.lock().push(InFlight {
            buffer: batch.buffer,
            passes: batch.passes,
            submitted: batch.submitted,
            state,
            done: Some(done),
        });
    }

    /// Hand the mapped batches' timestamps to the profiler (oldest first; those still mapping
    /// stay). `ordinal` is the adapter's.
    pub(crate) fn drain(&self, ordinal: usize) {
        let ready: Vec<InFlight> = {
            let mut v = self.in_flight.lock();
            let n = v
                .iter()
                .position(|b| b.state.load(Ordering::Acquire) == 0)
                .unwrap_or(v.len());
            v.drain(..n).collect()
        };
        for b in ready {
            if b.state.load(Ordering::Acquire) != 1 {
                continue; // the map failed (device lost): these kernels go untimed
            }
            let ticks: Vec<u64> = match b.buffer.get_mapped_range(..) {
                Ok(view) => bytemuck::pod_collect_to_vec(&view[..]),
                Err(_) => continue,
            };
            b.buffer.unmap();
            let Some((generation, submit_ns)) = b.submitted else {
                continue; // no profiler ran at the submit
            };
            let ns = |t: u64| {
                if self.period == 1.0 {
                    t
                } else {
                    (t as f64 * f64::from(self.period)) as u64
                }
            };
            let kernels = b
                .passes
                .into_iter()
                .zip(ticks.chunks_exact(2))
                .map(|((kernel, label), t)| (kernel, label, ns(t[0]), ns(t[1])))
                .collect();
            profiler::gpu_batch(ordinal, generation, submit_ns, kernels);
        }
    }

    /// Futures that complete when every batch now in flight is mapped.
    pub(crate) fn pending(&self) -> Vec<super::oneshot::OneShot<()>> {
        self.in_flight
            .lock()
            .iter_mut()
            .filter_map(|b| b.done.take())
            .collect()
    }
}

/// A batch resolved into its encoder, waiting for the submit.
pub(crate) struct InFlightBatch {
    buffer: wgpu::Buffer,
    passes: Vec<(Arc<str>, KernelLabel)>,
    submitted: Option<(u64, u64)>,
}

/// The device refused what timing needs: the profile says why its kernels are untimed.
fn untimed(ctx: &GpuContext, e: &wgpu::Error) {
    profiler::gpu_time_unavailable(ctx.ordinal, || {
        format!(
            "gpu:{} \"{}\": the adapter refused the profiler's timestamp queries ({})",
            ctx.ordinal,
            ctx.info.name,
            super::context::error_message(e).trim()
        )
    });
}

/// Compute passes one stopwatch can time.
const STOPWATCH_PASSES: u32 = 64;

/// The GEMM tuner's stopwatch: timestamps around each compute pass recorded on its thread.
struct Stopwatch {
    set: wgpu::QuerySet,
    used: u32,
    /// A pass went untimed (the profiler took it, or the set was full).
    missed: bool,
}

thread_local! {
    static STOPWATCH: std::cell::RefCell<Option<Stopwatch>> = const { std::cell::RefCell::new(None) };
}

/// The timestamp writes of the next compute pass recorded on this thread while a stopwatch
/// runs (`None` otherwise); `profiled`: the profiler times this pass (a pass has one pair of
/// timestamp writes), so the stopwatch misses it.
pub(crate) fn stopwatch_pass(profiled: bool) -> Option<(wgpu::QuerySet, u32)> {
    STOPWATCH.with_borrow_mut(|s| {
        let s = s.as_mut()?;
        if profiled || s.used + 2 > 2 * STOPWATCH_PASSES {
            s.missed = true;
            return None;
        }
        s.used += 2;
        Some((s.set.clone(), s.used - 2))
    })
}

#[cfg(not(target_arch = "wasm32"))]
impl GpuContext {
    /// Run `f` with a stopwatch on the compute passes it records on this thread: with `f`'s
    /// result, the query set and the number of timestamps written in it (begin and end of each
    /// pass, in order), or `None` when the adapter has no timestamp queries, refused the set, or
    /// a pass went untimed.
    pub(crate) fn with_stopwatch<R>(
        &self,
        f: impl FnOnce() -> R,
    ) -> (R, Option<(wgpu::QuerySet, u32)>) {
        if self.timing.is_none() {
            return (f(), None);
        }
        let (set, err) = self.scoped(|| {
            self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("wgtorch-tuner-timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * STOPWATCH_PASSES,
            })
        });
        if err.is_some() {
            return (f(), None);
        }
        STOPWATCH.set(Some(Stopwatch {
            set,
            used: 0,
            missed: false,
        }));
        let r = f();
        let s = STOPWATCH.take();
        let timed = s
            .filter(|s| !s.missed && s.used > 0)
            .map(|s| (s.set, s.used));
        (r, timed)
    }

    /// Nanoseconds per timestamp tick.
    pub(crate) fn timestamp_period(&self) -> f64 {
        self.timing.as_ref().map_or(1.0, |t| f64::from(t.period))
    }
}
