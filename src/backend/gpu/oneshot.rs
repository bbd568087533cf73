//! A minimal one-shot channel whose receiving end is a future: wgpu's map callbacks complete it,
//! natively inside `device.poll`, in the browser from the event loop.

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

type Slot<T> = Arc<Mutex<(Option<T>, Option<Waker>)>>;

/// The receiving end; await it for the value.
pub(crate) struct OneShot<T> {
    slot: Slot<T>,
}

/// The sending end.
pub(crate) struct Sender<T> {
    slot: Slot<T>,
}

impl<T> OneShot<T> {
    pub(crate) fn new() -> Self {
        OneShot {
            slot: Arc::new(Mutex::new((None, None))),
        }
    }
    pub(crate) fn sender(&self) -> Sender<T> {
        Sender {
            slot: self.slot.clone(),
        }
    }
}

impl<T> Sender<T> {
    pub(crate) fn send(self, v: T) {
        let waker = {
            let mut s = self.slot.lock();
            s.0 = Some(v);
            s.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for OneShot<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.slot.lock();
        match s.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
