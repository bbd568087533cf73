//! Pipelines compiled off the critical path, on one worker thread per context: the GEMM tuner's
//! candidates and tuned tiles. The caller runs a kernel it already has meanwhile (the default
//! tile) and takes the new one once it is ready. One worker keeps the compiles from taking more
//! than one core away from the work itself. (What a driver does in `create_compute_pipeline`
//! differs: lavapipe translates the shader there, but leaves LLVM's code generation to the
//! pipeline's first dispatch, which the tuner's first trial run of a candidate pays.)
//! Native only: the browser has no threads to compile on.

use super::GpuContext;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::sync::{mpsc, Arc};

thread_local! {
    /// Set on the compile worker's thread.
    static ON_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is a context's compile worker (its compiles are not a profile's events:
/// they would land in any profile running meanwhile, at moments no op of it decides).
pub(crate) fn on_worker() -> bool {
    ON_WORKER.get()
}

/// A pipeline to compile: the op it serves (for its error), its cache key and its WGSL.
struct Job {
    op: &'static str,
    key: String,
    source: String,
}

/// Where a pipeline asked for in the background stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compiled {
    /// In the pipeline cache.
    Ready,
    /// Queued or compiling.
    Pending,
    /// Its compilation failed (or no worker could start): not tried again in this process.
    Failed,
}

#[derive(Default)]
struct State {
    /// Keys queued or compiling.
    queued: BTreeSet<String>,
    /// Keys whose compilation failed.
    failed: BTreeSet<String>,
    /// The worker's queue, once it is started.
    worker: Option<mpsc::Sender<Job>>,
}

/// A context's background compilation state.
#[derive(Default)]
pub(crate) struct Background {
    state: Mutex<State>,
    /// Signalled whenever a compilation ends.
    done: Condvar,
}

impl GpuContext {
    /// Whether the pipeline `key` is compiled.
    pub(crate) fn has_pipeline(&self, key: &str) -> bool {
        self.pipelines.lock().contains_key(key)
    }

    /// Whether the background worker has nothing queued or compiling.
    pub(crate) fn background_idle(&self) -> bool {
        self.background.state.lock().queued.is_empty()
    }

    /// Where pipeline `key` stands, queuing its compilation (of `source()`) on the context's
    /// worker when it is neither compiled, queued nor failed before.
    pub(crate) fn compile_behind(
        self: &Arc<Self>,
        op: &'static str,
        key: &str,
        source: impl FnOnce() -> String,
    ) -> Compiled {
        if self.has_pipeline(key) {
            return Compiled::Ready;
        }
        let mut s = self.background.state.lock();
        if s.failed.contains(key) {
            return Compiled::Failed;
        }
        if s.queued.contains(key) {
            return Compiled::Pending;
        }
        if s.worker.is_none() {
            s.worker = self.start_worker();
        }
        let job = Job {
            op,
            key: key.to_string(),
            source: source(),
        };
        match s.worker.as_ref().map(|w| w.send(job)) {
            Some(Ok(())) => {
                s.queued.insert(key.to_string());
                Compiled::Pending
            }
            _ => {
                s.worker = None;
                s.failed.insert(key.to_string());
                Compiled::Failed
            }
        }
    }

    /// The worker: compiles each job into the pipeline cache until the context is dropped.
    /// `None` when the thread cannot start.
    fn start_worker(self: &Arc<Self>) -> Option<mpsc::Sender<Job>> {
        /// Ends a job however its compilation ends (a panic in the driver included, which
        /// ends the worker too: later jobs then fail to queue), so that no waiter hangs.
        struct Finish<'a> {
            ctx: &'a GpuContext,
            key: String,
            ok: bool,
        }
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                let mut s = self.ctx.background.state.lock();
                s.queued.remove(&self.key);
                if !self.ok {
                    s.failed.insert(std::mem::take(&mut self.key));
                }
                drop(s);
                self.ctx.background.done.notify_all();
            }
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let ctx = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("wgtorch-compile".into())
            .spawn(move || {
                ON_WORKER.set(true);
                // The lowest priority (Linux: this thread alone), so that compiling candidates
                // takes from the work of the step running meanwhile (on a CPU adapter, the same
                // cores) only what it leaves idle.
                #[cfg(target_os = "linux")]
                // SAFETY: setpriority reads no memory; PRIO_PROCESS with 0 is the calling thread.
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                }
                for job in rx {
                    let Some(ctx) = ctx.upgrade() else {
                        return;
                    };
                    let mut finish = Finish {
                        ctx: &ctx,
                        key: job.key,
                        ok: false,
                    };
                    finish.ok = ctx.pipeline(job.op, &finish.key, || job.source).is_ok();
                }
            })
            .ok()?;
        Some(tx)
    }

    /// Block until every pipeline queued for the background worker is compiled (or failed).
    pub(crate) fn wait_background_compiles(&self) {
        let mut s = self.background.state.lock();
        while !s.queued.is_empty() {
            self.background.done.wait(&mut s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Compiled;

    #[test]
    fn compiles_in_the_background_and_remembers_failures() {
        let Ok(ctx) = super::super::context(0) else {
            assert!(
                std::env::var_os("WGTORCH_REQUIRE_GPU").is_none(),
                "no GPU adapter"
            );
            return;
        };
        let good = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
                    @compute @workgroup_size(1) fn main() { x[0] = 1.0; }";
        let key = "background-test-good";
        assert_eq!(
            ctx.compile_behind("test", key, || good.into()),
            Compiled::Pending
        );
        // Queued once (or compiled already).
        assert_ne!(
            ctx.compile_behind("test", key, || unreachable!("queued once")),
            Compiled::Failed
        );
        ctx.wait_background_compiles();
        assert!(ctx.has_pipeline(key));
        assert_eq!(
            ctx.compile_behind("test", key, || unreachable!("compiled")),
            Compiled::Ready
        );
        // WGSL that does not validate fails, once: not queued again.
        let bad = "background-test-bad";
        ctx.compile_behind("test", bad, || "fn main( {".into());
        ctx.wait_background_compiles();
        assert!(!ctx.has_pipeline(bad));
        assert_eq!(
            ctx.compile_behind("test", bad, || unreachable!("failed before")),
            Compiled::Failed
        );
    }
}
