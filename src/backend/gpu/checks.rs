//! Device-side index validation: PyTorch's device-side assert, without the dead context.
//!
//! Kernels that read an index tensor (gather, scatter_add) check every index against its
//! dimension's size (`index_ok` in `shaders/index_check.wgsl`; the sorted scatter_add checks each
//! chunk's smallest and largest, which catches the same failures) and record the first failure
//! in the context's flag buffer as `[thread token, op id, index, dim, size]`, in the slot of the thread
//! that recorded the kernel. That thread's next readback copies its slot into the readback's own
//! staging buffer after the data and clears it in the same submission (no extra round trip), and
//! only when it recorded a checking kernel since its last look (a dirty bit on the host). A failure
//! becomes [`Error::IndexOutOfRange`] naming the op, the index, the dimension and its size; the
//! cleared slot leaves the context usable, and other threads never see this thread's failures.
//! Integer `remainder` and `fmod` check their divisors the same way: a zero is recorded with the
//! dim word `u32::MAX` and reported as PyTorch's `ZeroDivisionError`.
//!
//! Slots are handed to threads on first use and back when they exit; tokens only grow, so the
//! record of a slot's earlier owner (a thread that exited without reading it) loses to the new
//! owner's (`atomicMax`) and is never reported to it. Past `SLOTS` threads at once, threads
//! share slots and a failure found in a shared slot is reported to whichever sharer reads it.

use crate::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The dim word of a zero integer divisor (`checked_divisor` in `shaders/index_check.wgsl`).
const ZERO_DIVISOR: u32 = u32::MAX;
/// Words per slot: thread token (0: no failure), op id, index, dim, size.
const WORDS: u64 = 5;
/// Bytes of one thread's slot (what a readback copies back).
pub(crate) const SLOT_BYTES: u64 = WORDS * 4;
/// Threads with a slot of their own at once.
const SLOTS: u32 = 256;

static NEXT_TOKEN: AtomicU32 = AtomicU32::new(1);
static NEXT_SLOT: AtomicU32 = AtomicU32::new(0);
static FREE_SLOTS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Some threads share slots (more than `SLOTS` at once).
static SHARED: AtomicBool = AtomicBool::new(false);

/// This thread's slot and token.
struct Owner {
    slot: u32,
    token: u32,
    /// Whether the slot is this thread's alone (returned to the free list on exit).
    owned: bool,
}

impl Owner {
    fn new() -> Owner {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let free = FREE_SLOTS.lock().pop();
        let slot = free.or_else(|| {
            let s = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
            (s < SLOTS).then_some(s)
        });
        match slot {
            Some(slot) => Owner {
                slot,
                token,
                owned: true,
            },
            None => {
                SHARED.store(true, Ordering::Relaxed);
                Owner {
                    slot: token % SLOTS,
                    token,
                    owned: false,
                }
            }
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if self.owned {
            FREE_SLOTS.lock().push(self.slot);
        }
    }
}

thread_local! {
    static OWNER: Owner = Owner::new();
}

/// (slot, token) of the calling thread (a one-off shared slot while its thread-locals are torn
/// down).
fn owner() -> (u32, u32) {
    OWNER.try_with(|o| (o.slot, o.token)).unwrap_or_else(|_| {
        let o = std::mem::ManuallyDrop::new(Owner::new());
        (o.slot, o.token)
    })
}

/// One context's index-check flags and the names its op ids stand for.
pub(crate) struct IndexChecks {
    flag: wgpu::Buffer,
    /// Op names by id - 1 (as many as the distinct op names in the source).
    ops: Mutex<Vec<&'static str>>,
    /// Per slot: a checking kernel was recorded since the slot was last copied back.
    dirty: Vec<AtomicBool>,
}

impl IndexChecks {
    pub(crate) fn new(device: &wgpu::Device) -> IndexChecks {
        // wgpu zero-initialises buffers: no failure recorded.
        let flag = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgtorch-index-check"),
            size: SLOTS as u64 * SLOT_BYTES,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        IndexChecks {
            flag,
            ops: Mutex::new(Vec::new()),
            dirty: (0..SLOTS).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Record a kernel that checks indices for `op`: `record(flag, check)` binds the flag buffer
    /// and passes `check` (op id, slot, token: what `index_ok` reads) in its params. The dirty bit
    /// is set after the recording, so a readback racing with it copies the slot back now or at
    /// the next readback, never not at all.
    pub(crate) fn checked(
        &self,
        op: &'static str,
        record: impl FnOnce(&wgpu::Buffer, [u32; 3]) -> Result<()>,
    ) -> Result<()> {
        let id = {
            let mut ops = self.ops.lock();
            match ops.iter().position(|&o| o == op) {
                Some(i) => i + 1,
                None => {
                    ops.push(op);
                    ops.len()
                }
            }
        };
        let (slot, token) = owner();
        record(&self.flag, [id as u32, slot, token])?;
        self.dirty[slot as usize].store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the calling thread recorded a checking kernel since its slot was last copied back.
    pub(crate) fn dirty(&self) -> bool {
        self.dirty[owner().0 as usize].load(Ordering::Acquire)
    }

    /// In the encoder of a readback, after the work it waits for: when the calling thread
    /// recorded a checking kernel since its last look, copy its slot to `staging` at `offset`
    /// (`SLOT_BYTES` there) and clear it. Returns whether it did; call under the encoder's lock.
    pub(crate) fn copy_back(
        &self,
        enc: &mut wgpu::CommandEncoder,
        staging: &wgpu::Buffer,
        offset: u64,
    ) -> bool {
        let slot = owner().0;
        if !self.dirty[slot as usize].swap(false, Ordering::AcqRel) {
            return false;
        }
        let at = slot as u64 * SLOT_BYTES;
        enc.copy_buffer_to_buffer(&self.flag, at, staging, offset, SLOT_BYTES);
        enc.clear_buffer(&self.flag, at, Some(SLOT_BYTES));
        true
    }

    /// The failure the calling thread's copied-back slot records, as PyTorch words it.
    pub(crate) fn report(&self, bytes: &[u8]) -> Result<()> {
        let w: Vec<u32> = match bytes.get(..SLOT_BYTES as usize) {
            Some(b) => bytemuck::pod_collect_to_vec(b),
            None => return Ok(()),
        };
        let mine = w[0] == owner().1 || (w[0] != 0 && SHARED.load(Ordering::Relaxed));
        if !mine {
            return Ok(());
        }
        let op = self
            .ops
            .lock()
            .get((w[1] as usize).wrapping_sub(1))
            .copied()
            .unwrap_or("index");
        if w[3] == ZERO_DIVISOR {
            return Err(crate::ops::binary_op::zero_division(op));
        }
        Err(Error::IndexOutOfRange {
            op,
            index: w[2] as i32 as i64,
            dim: w[3] as usize,
            size: w[4] as usize,
        })
    }

    /// The flag buffer (what `synchronize` reads when nothing else is read back).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        &self.flag
    }
}
