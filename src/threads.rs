//! Moving a CPU computation onto rayon's thread pool with the calling thread's modes.
//!
//! A parallel loop started from outside the pool hands its work to the pool and sleeps until it
//! is done: one cross-thread wake-up per loop, which on an idle virtual machine costs tens of
//! microseconds, as much as a small operator's arithmetic. A run of many operators (an ONNX
//! model's) pays it once instead when the whole run moves onto one of the pool's threads, whose
//! loops then start inside the pool. What an op reads from its thread (grad mode, anomaly
//! detection, autocast) goes with it.

use crate::{DType, Device};

/// The per-thread modes that ops read.
#[derive(Clone, Copy)]
struct Modes {
    grad: bool,
    anomaly: bool,
    autocast: Option<(Device, DType)>,
}

impl Modes {
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

/// Runs `f` on one of rayon's threads, under this thread's grad mode, anomaly detection and
/// autocast state, when called from outside the pool; in place when already inside one, on wasm
/// (no threads), and while a profiler or a graph capture (`compile`, ONNX export) runs, since
/// they follow the thread that records.
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if cfg!(target_arch = "wasm32")
        || rayon::current_thread_index().is_some()
        || crate::profiler::is_recording()
        || crate::onnx::trace::capturing()
    {
        return f();
    }
    let modes = Modes::current();
    rayon::scope(|_| {
        let _modes = modes.enter();
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's modes hold inside, and the pool thread's own come back after (also after a
    /// panic, which reaches the caller).
    #[test]
    fn carries_the_modes_and_restores_the_pool_threads() {
        let dev = Device::Cpu;
        let outside = std::thread::spawn(move || {
            let _ng = crate::no_grad();
            crate::autograd::set_anomaly_enabled(true);
            let _ac = crate::amp::autocast(&dev, DType::BF16);
            let inside = in_pool(|| {
                (
                    rayon::current_thread_index().is_some(),
                    Modes::current().grad,
                    Modes::current().anomaly,
                    crate::amp::autocast_dtype(&dev),
                )
            });
            let panicked = std::panic::catch_unwind(|| in_pool(|| panic!("inside"))).is_err();
            crate::autograd::set_anomaly_enabled(false);
            (inside, panicked)
        })
        .join()
        .unwrap();
        assert_eq!(outside, ((true, false, true, Some(DType::BF16)), true));
        // Every pool thread has its own modes back.
        let modes = rayon::broadcast(|_| {
            let m = Modes::current();
            (m.grad, m.anomaly, m.autocast.is_none())
        });
        assert!(modes.iter().all(|&m| m == (true, false, true)), "{modes:?}");
    }
}
