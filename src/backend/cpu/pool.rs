//! A cache of host buffers, so a training loop reuses the same memory step after step instead of
//! faulting in fresh pages from the OS for every activation (measured: a fifth of a SimpleCNN
//! step's time went to page faults and heap trimming). Kernels take buffers of an exact length
//! (`any`, `filled`); storages of at least `MIN_ELEMS` elements come back here when their last
//! tensor drops.
//!
//! The pool keeps only what it lent: per (dtype, length) it counts the buffers handed out and not
//! yet returned, and a returned buffer is kept only while that count is positive. Buffers made
//! elsewhere (`Tensor::from_vec`, a kernel's own `vec!`) go back to the allocator, so a size that
//! is returned more often than it is taken cannot pile up: a size's free list never holds more
//! buffers than were live at once. (Without this, a weight gradient allocated outside the pool grew
//! the cache by one buffer per training step.) Bounded by `MAX_BYTES` in any case; `empty_cache`
//! releases everything cached.
//!
//! ```
//! use wgtorch::backend::cpu::pool;
//! use wgtorch::{Device, Tensor};
//! let before = pool::stats();
//! for _ in 0..3 {
//!     let x = Tensor::zeros([256, 256], &Device::Cpu)?; // 256 KiB, reused after the first pass
//!     assert_eq!(x.numel(), 65536);
//! }
//! let after = pool::stats();
//! assert!(after.hits >= before.hits + 2, "{before:?} -> {after:?}");
//! pool::empty_cache();
//! # Ok::<(), wgtorch::Error>(())
//! ```

use super::{CpuElem, CpuStorage};
use crate::DType;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Smaller buffers are left to the allocator (cheap, and recycled by it without page faults).
const MIN_ELEMS: usize = 1 << 14;
/// At most this many bytes are kept.
const MAX_BYTES: usize = 1 << 30;

type Key = (DType, usize);

#[derive(Default)]
struct Pool {
    free: HashMap<Key, Vec<CpuStorage>>,
    /// Buffers handed out by `take` (hits and misses) and not yet returned, per key.
    lent: HashMap<Key, usize>,
    bytes: usize,
    stats: PoolStats,
}

/// What the host pool holds and has done, for leak checks and the soak benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes in cached (free) buffers.
    pub cached_bytes: usize,
    /// Number of cached buffers.
    pub cached_buffers: usize,
    /// Buffers lent out and not yet returned.
    pub lent_buffers: usize,
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that allocated a fresh buffer.
    pub misses: u64,
    /// Returned buffers released to the allocator (not lent by the pool, or over the byte bound).
    pub released: u64,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn bytes(s: &CpuStorage) -> usize {
    s.len() * s.dtype().size_in_bytes()
}

/// Keep `s` for reuse (called when a storage is dropped) if the pool lent it out.
pub(crate) fn recycle(s: CpuStorage) {
    let n = s.len();
    if n < MIN_ELEMS {
        return;
    }
    let key = (s.dtype(), n);
    let mut g = POOL.lock();
    let p = g.get_or_insert_with(Pool::default);
    let Some(lent) = p.lent.get_mut(&key) else {
        p.stats.released += 1;
        return; // not ours: back to the allocator
    };
    *lent -= 1;
    if *lent == 0 {
        p.lent.remove(&key);
    }
    p.stats.lent_buffers -= 1;
    if p.bytes + bytes(&s) > MAX_BYTES {
        p.stats.released += 1;
        return;
    }
    p.bytes += bytes(&s);
    p.stats.cached_buffers += 1;
    p.free.entry(key).or_default().push(s);
}

/// A cached buffer of `n` elements, or None (a miss, after which the caller allocates); either
/// way the buffer is counted as lent.
fn take<T: CpuElem>(n: usize) -> Option<Vec<T>> {
    if n < MIN_ELEMS {
        return None;
    }
    let key = (T::DTYPE, n);
    let mut g = POOL.lock();
    let p = g.get_or_insert_with(Pool::default);
    *p.lent.entry(key).or_default() += 1;
    p.stats.lent_buffers += 1;
    let hit = p.free.get_mut(&key).and_then(|l| l.pop());
    if p.free.get(&key).is_some_and(|l| l.is_empty()) {
        p.free.remove(&key);
    }
    let Some(s) = hit else {
        p.stats.misses += 1;
        return None;
    };
    p.stats.hits += 1;
    p.stats.cached_buffers -= 1;
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

/// The pool's counters and what it holds now.
pub fn stats() -> PoolStats {
    POOL.lock()
        .as_ref()
        .map_or_else(PoolStats::default, |p| PoolStats {
            cached_bytes: p.bytes,
            ..p.stats
        })
}

/// Release every cached host buffer to the allocator (buffers lent out still come back).
pub fn empty_cache() {
    if let Some(p) = POOL.lock().as_mut() {
        p.stats.released += p.stats.cached_buffers as u64;
        p.stats.cached_buffers = 0;
        p.free.clear();
        p.bytes = 0;
    }
}
