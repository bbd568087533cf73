//! Moving a CPU computation onto rayon's thread pool.
//!
//! A parallel loop started from outside the pool hands its work to the pool and sleeps until it
//! is done: one cross-thread wake-up per loop, which on an idle virtual machine costs tens of
//! microseconds, as much as a small operator's arithmetic. A run of many operators (an ONNX
//! model's) pays it once instead when the whole run moves onto one of the pool's threads, whose
//! loops then start inside the pool.
//!
//! Ops read modes from their thread (grad mode, anomaly detection, autocast), and a pool thread
//! waiting inside a loop may pick up another caller's job while the run's modes are set on it.
//! So a run moves only when the caller's modes are the defaults (what any other job would find
//! on a pool thread anyway), and the pool thread runs it under those defaults whatever its own,
//! which come back after. One run at a time moves; the others run in place.

use crate::{DType, Device};
use std::sync::atomic::{AtomicBool, Ordering};

/// The per-thread modes that ops read.
#[derive(Clone, Copy, PartialEq)]
struct Modes {
    grad: bool,
    anomaly: bool,
    autocast: Option<(Device, DType)>,
}

impl Modes {
    /// A thread's modes before anything sets them.
    const DEFAULT: Modes = Modes {
        grad: true,
        anomaly: false,
        autocast: None,
    };

    fn current() -> Modes {
        Modes {
            grad: crate::autograd::is_grad_enabled(),
            anomaly: crate::autograd::is_anomaly_enabled(),
            autocast: crate::amp::state(),
        }
    }

    /// Sets these modes on this thread until the guard drops (panics included), which restores
    /// the thread's own.
    fn enter(self) -> impl Drop {
        struct Restore(Modes);
        impl Drop for Restore {
            fn drop(&mut self) {
                self.0.set();
            }
        }
        let own = Modes::current();
        self.set();
        Restore(own)
    }

    fn set(self) {
        crate::autograd::set_grad_enabled(self.grad);
        crate::autograd::set_anomaly_enabled(self.anomaly);
        crate::amp::set_state(self.autocast);
    }
}

/// Set while a run has moved onto the pool.
static MOVED: AtomicBool = AtomicBool::new(false);

/// Runs `f` on one of rayon's threads when that is safe, else in place: in place on wasm (no
/// threads), inside a pool already, while a profiler runs or a graph capture (`compile`, ONNX
/// export) records this thread (both follow the thread that records), under any mode other than
/// the defaults (`no_grad`, anomaly detection, autocast: see the module's doc), and while another
/// run has moved.
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if cfg!(target_arch = "wasm32")
        || rayon::current_thread_index().is_some()
        || crate::profiler::is_recording()
        || crate::onnx::trace::capturing()
        || Modes::current() != Modes::DEFAULT
        || MOVED.swap(true, Ordering::Acquire)
    {
        return f();
    }
    /// Clears [`MOVED`] when the run ends (panics included).
    struct Moved;
    impl Drop for Moved {
        fn drop(&mut self) {
            MOVED.store(false, Ordering::Release);
        }
    }
    let _moved = Moved;
    rayon::scope(|_| {
        let _modes = Modes::DEFAULT.enter();
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `in_pool` ran a closure: on a pool thread, and under which grad mode.
    fn probe() -> (bool, bool) {
        in_pool(|| {
            (
                rayon::current_thread_index().is_some(),
                crate::autograd::is_grad_enabled(),
            )
        })
    }

    /// From a plain thread with the default modes the run moves, under the defaults even on a
    /// pool thread whose own modes differ (those come back after, also after a panic); under
    /// any other mode, inside a pool, under a profiler, inside a capture and inside a moved run
    /// it stays in place.
    #[test]
    fn moves_only_when_it_is_safe() {
        let dev = Device::Cpu;
        std::thread::spawn(move || {
            assert_eq!(probe(), (true, true));
            // Nested: the inner call is on a pool thread already.
            assert_eq!(in_pool(probe), (true, true));
            let _ng = crate::no_grad();
            assert_eq!(probe(), (false, false));
            drop(_ng);
            crate::autograd::set_anomaly_enabled(true);
            assert!(!probe().0);
            crate::autograd::set_anomaly_enabled(false);
            {
                let _ac = crate::amp::autocast(&dev, DType::BF16);
                assert!(!probe().0);
            }
            let mut profiled = None;
            crate::profiler::profile(Default::default(), |_| {
                profiled = Some(probe());
                Ok(())
            })
            .unwrap();
            assert_eq!(profiled, Some((false, true)));
            let captured = std::sync::Mutex::new(Vec::new());
            let step = crate::compile::compile(|xs: &[crate::Tensor]| {
                captured.lock().unwrap().push(probe().0);
                Ok(vec![xs[0].mul_scalar(2.0)?])
            });
            let x = crate::Tensor::ones([3], &dev).unwrap();
            step.call(std::slice::from_ref(&x)).unwrap();
            assert!(!captured.lock().unwrap()[0], "inside the capture");
            let panicked = std::panic::catch_unwind(|| in_pool(|| panic!("inside"))).is_err();
            assert!(panicked);
            // A moved run that panicked let the next one move.
            assert_eq!(probe(), (true, true));
        })
        .join()
        .unwrap();
        // A thread's own modes (a pool thread's that picks the run up) are set aside while the
        // run's hold, and come back after.
        std::thread::spawn(|| {
            let _ng = crate::no_grad();
            let inside = {
                let _modes = Modes::DEFAULT.enter();
                crate::autograd::is_grad_enabled()
            };
            assert_eq!((inside, crate::autograd::is_grad_enabled()), (true, false));
        })
        .join()
        .unwrap();
    }
}
