//! A cache of host buffers, so a training loop reuses the same memory step after step instead of
//! faulting in fresh pages from the OS for every activation (measured: a fifth of a SimpleCNN
//! step's time went to page faults and heap trimming). Storages of at least `MIN_ELEMS` elements
//! return here when their last tensor drops; kernels take a buffer of the exact length back.
//! Bounded by `MAX_BYTES`; `empty_cache` releases everything.

use super::{CpuElem, CpuStorage};
use crate::DType;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Smaller buffers are left to the allocator (cheap, and recycled by it without page faults).
const MIN_ELEMS: usize = 1 << 14;
/// At most this many bytes are kept.
const MAX_BYTES: usize = 1 << 30;

#[derive(Default)]
struct Pool {
    free: HashMap<(DType, usize), Vec<CpuStorage>>,
    bytes: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn bytes(s: &CpuStorage) -> usize {
    s.len() * s.dtype().size_in_bytes()
}

/// Keep `s` for reuse (called when a storage is dropped).
pub(crate) fn recycle(s: CpuStorage) {
    let n = s.len();
    if n < MIN_ELEMS {
        return;
    }
    let mut g = POOL.lock();
    let p = g.get_or_insert_with(Pool::default);
    if p.bytes + bytes(&s) > MAX_BYTES {
        return;
    }
    p.bytes += bytes(&s);
    p.free.entry((s.dtype(), n)).or_default().push(s);
}

fn take<T: CpuElem>(n: usize) -> Option<Vec<T>> {
    if n < MIN_ELEMS {
        return None;
    }
    let mut g = POOL.lock();
    let p = g.as_mut()?;
    let s = p.free.get_mut(&(T::DTYPE, n))?.pop()?;
    p.bytes -= bytes(&s);
    T::into_vec(s)
}

/// A vector of `n` elements whose values are unspecified (a recycled buffer's old contents or
/// defaults): for kernels that write every element.
pub(crate) fn any<T: CpuElem>(n: usize) -> Vec<T> {
    take(n).unwrap_or_else(|| vec![T::default(); n])
}

/// A vector of `n` copies of `v`.
pub(crate) fn filled<T: CpuElem>(n: usize, v: T) -> Vec<T> {
    match take(n) {
        Some(mut buf) => {
            buf.fill(v);
            buf
        }
        None => vec![v; n],
    }
}

/// Return a scratch vector taken with `any` or `filled`.
pub(crate) fn give_back<T: CpuElem>(v: Vec<T>) {
    recycle(T::wrap(v));
}

/// Bytes currently cached.
pub fn cached_bytes() -> usize {
    POOL.lock().as_ref().map_or(0, |p| p.bytes)
}

/// Release every cached host buffer to the allocator.
pub fn empty_cache() {
    *POOL.lock() = None;
}
