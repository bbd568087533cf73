//! `DistributedDataParallel`: rank 0's weights everywhere at the start, then gradients averaged
//! over the ranks in buckets that are all-reduced while the backward pass goes on.

use super::comm::{Comm, Done, Job, Kind, Pending, RawOp};
use super::{describe, from_wire, group, signature, to_wire, write_into};
use crate::autograd::HookHandle;
use crate::nn::{Forward, Module, ModuleExt};
use crate::{DType, Device, Error, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Options of [`DistributedDataParallel::new_with`], PyTorch's keyword arguments.
#[derive(Clone, Debug)]
pub struct DdpOptions {
    /// Bucket size in MiB (PyTorch's `bucket_cap_mb`, default 25).
    pub bucket_cap_mb: f64,
    /// Size of the first bucket in MiB, small so that communication starts early (PyTorch's
    /// 1 MiB `_DEFAULT_FIRST_BUCKET_BYTES`).
    pub first_bucket_mb: f64,
    /// Broadcast rank 0's buffers (BatchNorm's running statistics) at each forward (PyTorch's
    /// `broadcast_buffers`, default `true`).
    pub broadcast_buffers: bool,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            bucket_cap_mb: 25.0,
            first_bucket_mb: 1.0,
            broadcast_buffers: true,
        }
    }
}

/// Where gradient communication time went since the last [`DistributedDataParallel::take_comm_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommStats {
    /// Backward passes whose gradients were averaged.
    pub steps: usize,
    /// Bucket all-reduces run.
    pub all_reduces: usize,
    /// Bytes all-reduced (this rank's contribution).
    pub bytes: usize,
    /// Time MPI spent in the bucket all-reduces.
    pub all_reduce_time: Duration,
    /// The part of it the backward pass waited for at its end (not hidden behind computation).
    pub exposed_time: Duration,
    /// Time spent packing gradients into buckets and unpacking the averages.
    pub copy_time: Duration,
}

impl CommStats {
    /// The fraction of all-reduce time hidden behind the backward pass, in `[0, 1]`.
    pub fn overlap(&self) -> f64 {
        let t = self.all_reduce_time.as_secs_f64();
        if t == 0.0 {
            return 0.0;
        }
        (1.0 - self.exposed_time.as_secs_f64() / t).clamp(0.0, 1.0)
    }
}

struct Bucket {
    /// Indices into the reducer's parameter list, in the bucket's order.
    params: Vec<usize>,
    numel: usize,
    dtype: DType,
    device: Device,
    /// Host staging buffers, reused every step (send, receive).
    pool: Option<(Vec<u8>, Vec<u8>)>,
    ready: usize,
    pending: Option<Pending>,
}

struct Reducer {
    comm: Arc<Comm>,
    params: Vec<(String, Tensor)>,
    /// Parameter index -> (bucket, marked this iteration).
    slot: Vec<usize>,
    marked: Vec<bool>,
    buckets: Vec<Bucket>,
    /// Buckets are launched in order on every rank, whatever order they fill in.
    next_launch: usize,
    stats: CommStats,
    /// Set when an iteration ended with unreduced gradients: the ranks' collective sequences
    /// may now differ, so every later forward fails with this error.
    poisoned: Option<String>,
    /// Whether the coming backward pass reduces: set by each forward through the wrapper (off
    /// under `no_sync`), cleared when the reduction ends.
    armed: bool,
}

/// Data-parallel training over the ranks of the default process group (PyTorch's
/// `torch.nn.parallel.DistributedDataParallel`). At construction every rank takes rank 0's
/// parameters and buffers. After each `backward`, every parameter's gradient is the average of
/// the ranks' gradients, so the same optimizer step on every rank keeps the replicas
/// identical. Gradients are packed in reverse parameter order into buckets (1 MiB first, then
/// 25 MiB; one dtype each), and a bucket's all-reduce starts on the communication thread as
/// soon as the backward pass has produced its last gradient (post-accumulate-grad hooks),
/// while the pass goes on to earlier layers; the last hook waits for the rest and writes the
/// averages back. On a GPU a bucket is read back into one pooled host buffer and the average
/// uploaded again.
///
/// As in PyTorch, every parameter that requires grad must get a gradient in each backward
/// pass (otherwise the next forward fails, naming the unused parameters), and every rank must
/// run the same number of steps. Use [`DistributedDataParallel::no_sync`] to accumulate over
/// several backward passes without communication. As in PyTorch, the forward pass decides: a
/// backward pass reduces only after a forward through the wrapper (`forward` or `pre_forward`)
/// outside `no_sync`, so a backward through `module()` alone stays local. Replacing the
/// module's parameters after wrapping it (`to_dtype`, `to_device`) is an error at the next
/// forward: build the wrapper again.
///
/// ```
/// use wgtorch::distributed::{self as dist, DistributedDataParallel};
/// use wgtorch::nn::{Forward, Linear, ModuleExt};
/// use wgtorch::{optim::{Optimizer, Sgd}, Device, Tensor};
/// let _pg = dist::init_process_group()?;
/// let dev = Device::Cpu;
/// let ddp = DistributedDataParallel::new(Linear::new(4, 2, &dev)?)?;
/// let mut opt = Sgd::new(ddp.module().parameters(), 0.1)?;
/// let x = Tensor::randn([8, 4], &dev)?;
/// let loss = ddp.forward(&x)?.square()?.mean_all()?;
/// loss.backward()?; // gradients averaged over the ranks here
/// opt.step()?;
/// assert_eq!(ddp.take_comm_stats().steps, 1);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct DistributedDataParallel<M: Module> {
    module: M,
    reducer: Arc<Mutex<Reducer>>,
    hooks: Vec<HookHandle>,
    sync: Arc<AtomicBool>,
    opts: DdpOptions,
}

/// While alive, forward passes through the wrapper are not followed by communication, so their
/// backward passes accumulate gradients locally (PyTorch's `with ddp.no_sync():`); the backward
/// pass after the first forward outside it averages the accumulated gradients.
pub struct NoSyncGuard {
    sync: Arc<AtomicBool>,
    was: bool,
}

impl Drop for NoSyncGuard {
    fn drop(&mut self) {
        self.sync.store(self.was, Ordering::SeqCst);
    }
}

fn lock(r: &Mutex<Reducer>) -> MutexGuard<'_, Reducer> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wrap `module` with [`DdpOptions::default`].
    pub fn new(module: M) -> Result<Self> {
        Self::new_with(module, DdpOptions::default())
    }

    /// Wrap `module`: broadcast rank 0's parameters and buffers to every rank (checking that
    /// every rank's model has the same tensors), build the buckets and install the hooks.
    pub fn new_with(module: M, opts: DdpOptions) -> Result<Self> {
        let what = "DistributedDataParallel";
        let comm = group(what)?;
        if !(opts.bucket_cap_mb > 0.0 && opts.first_bucket_mb > 0.0) {
            return Err(Error::arg(
                what,
                format!(
                    "bucket sizes must be positive, got bucket_cap_mb={} first_bucket_mb={}",
                    opts.bucket_cap_mb, opts.first_bucket_mb
                ),
            ));
        }
        for (_, t) in module.state_dict() {
            super::broadcast(&t, 0)?;
        }
        let params: Vec<(String, Tensor)> = module
            .named_parameters()
            .into_iter()
            .filter(|(_, p)| p.requires_grad())
            .collect();
        let buckets = make_buckets(&params, &opts);
        let mut slot = vec![0; params.len()];
        for (b, bucket) in buckets.iter().enumerate() {
            for &i in &bucket.params {
                slot[i] = b;
            }
        }
        let reducer = Arc::new(Mutex::new(Reducer {
            comm,
            marked: vec![false; params.len()],
            params: params.clone(),
            slot,
            buckets,
            next_launch: 0,
            stats: CommStats::default(),
            poisoned: None,
            armed: false,
        }));
        let sync = Arc::new(AtomicBool::new(true));
        let mut hooks = Vec::new();
        for (i, (_, p)) in params.iter().enumerate() {
            let r = reducer.clone();
            hooks.push(p.register_post_accumulate_grad_hook(move |_| {
                let mut r = lock(&r);
                if !r.armed {
                    return Ok(()); // not after a synced forward through this wrapper
                }
                r.mark_ready(i)
            })?);
        }
        Ok(DistributedDataParallel {
            module,
            reducer,
            hooks,
            sync,
            opts,
        })
    }

    /// The wrapped module (PyTorch's `ddp.module`): save `ddp.module().state_dict()`.
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped module, mutably (to switch train/eval mode).
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// What to do before each forward pass, for modules whose forward is not
    /// [`Forward::forward`] (call it, then the module's own forward): fail if the previous
    /// backward pass left gradients unreduced (naming the parameters that got none; the
    /// wrapper then refuses every later forward, since the ranks' all-reduces may be out of
    /// step), and broadcast rank 0's buffers.
    pub fn pre_forward(&self) -> Result<()> {
        {
            let mut r = lock(&self.reducer);
            if let Some(msg) = &r.poisoned {
                return Err(Error::Distributed {
                    op: "DistributedDataParallel",
                    msg: msg.clone(),
                });
            }
            let now: Vec<u64> = self
                .module
                .named_parameters()
                .iter()
                .filter(|(_, p)| p.requires_grad())
                .map(|(_, p)| p.id())
                .collect();
            if now.len() != r.params.len()
                || now.iter().zip(&r.params).any(|(a, (_, p))| *a != p.id())
            {
                return Err(Error::Distributed {
                    op: "DistributedDataParallel",
                    msg: "the module's parameters were replaced after the wrapper was built (a \
                          dtype or device change, or a load that swaps tensors): its gradient \
                          hooks are on the old tensors. Build DistributedDataParallel again \
                          around the changed module"
                        .into(),
                });
            }
            if r.marked.iter().any(|&m| m) {
                let unused: Vec<&str> = r
                    .marked
                    .iter()
                    .zip(&r.params)
                    .filter(|(m, _)| !**m)
                    .map(|(_, (n, _))| n.as_str())
                    .collect();
                let msg = format!(
                    "Expected to have finished reduction in the prior iteration before starting \
                     a new one. This error indicates that your module has parameters that were \
                     not used in producing loss. Parameters that did not receive a gradient: \
                     {unused:?}"
                );
                r.reset();
                r.poisoned = Some(msg.clone());
                return Err(Error::Distributed {
                    op: "DistributedDataParallel",
                    msg,
                });
            }
        }
        // PyTorch decides at forward time whether the coming backward pass synchronizes: a
        // backward through `module()` alone, or after a forward under `no_sync`, stays local.
        lock(&self.reducer).armed = self.sync.load(Ordering::SeqCst);
        if self.opts.broadcast_buffers && !self.module.named_buffers().is_empty() {
            let comm = lock(&self.reducer).comm.clone();
            if comm.size > 1 {
                self.broadcast_buffers(&comm)?;
            }
        }
        Ok(())
    }

    fn broadcast_buffers(&self, comm: &Comm) -> Result<()> {
        for (_, b) in self.module.named_buffers() {
            let (wire, send) = to_wire("broadcast_buffers", &b, false)?;
            let done = comm
                .submit(Job {
                    what: "broadcast_buffers",
                    kind: Kind::Broadcast(0),
                    wire,
                    send,
                    recv: Vec::new(),
                    // Checked every time: a rank that runs a forward alone (an evaluation
                    // on rank 0 only) is an error, not a broadcast matched with another call.
                    check: Some(signature(2, 0, &b)),
                    describe,
                })?
                .wait()?;
            if comm.rank != 0 {
                write_into(&b, &from_wire(&b, b.shape(), &done.send, None)?)?;
            }
        }
        Ok(())
    }

    /// Skip gradient communication after the forward passes run while the guard lives (gradient
    /// accumulation).
    pub fn no_sync(&self) -> NoSyncGuard {
        NoSyncGuard {
            sync: self.sync.clone(),
            was: self.sync.swap(false, Ordering::SeqCst),
        }
    }

    /// The communication figures since the last call, and reset them.
    pub fn take_comm_stats(&self) -> CommStats {
        std::mem::take(&mut lock(&self.reducer).stats)
    }

    /// The number of gradient buckets and the parameter names in each, in launch order.
    pub fn buckets(&self) -> Vec<Vec<String>> {
        let r = lock(&self.reducer);
        r.buckets
            .iter()
            .map(|b| b.params.iter().map(|&i| r.params[i].0.clone()).collect())
            .collect()
    }
}

impl<M: Forward> DistributedDataParallel<M> {
    /// [`DistributedDataParallel::pre_forward`], then the module's forward.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.pre_forward()?;
        self.module.forward(x)
    }
}

impl<M: Module> Drop for DistributedDataParallel<M> {
    fn drop(&mut self) {
        for h in self.hooks.drain(..) {
            h.remove();
        }
    }
}

/// Reverse parameter order, split where a bucket would pass its cap or the dtype changes.
fn make_buckets(params: &[(String, Tensor)], opts: &DdpOptions) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut bytes = 0usize;
    for i in (0..params.len()).rev() {
        let p = &params[i].1;
        // The bucket being filled is the first (small, to start early) or a later one.
        let cap = if buckets.len() == 1 {
            opts.first_bucket_mb
        } else {
            opts.bucket_cap_mb
        };
        let size = p.numel() * p.dtype().size_in_bytes();
        let fits = buckets.last().is_some_and(|b| {
            b.dtype == p.dtype()
                && b.device == p.device()
                && (bytes + size) as f64 <= cap * 1048576.0
        });
        if !fits {
            buckets.push(Bucket {
                params: Vec::new(),
                numel: 0,
                dtype: p.dtype(),
                device: p.device(),
                pool: None,
                ready: 0,
                pending: None,
            });
            bytes = 0;
        }
        let b = buckets.last_mut().expect("pushed above");
        b.params.push(i);
        b.numel += p.numel();
        bytes += size;
    }
    buckets
}

impl Reducer {
    fn reset(&mut self) {
        self.marked.iter_mut().for_each(|m| *m = false);
        for b in &mut self.buckets {
            b.ready = 0;
            b.pending = None; // an abandoned iteration's all-reduces finish on their own
        }
        self.next_launch = 0;
        self.armed = false;
    }

    fn mark_ready(&mut self, i: usize) -> Result<()> {
        if self.marked[i] {
            return Err(Error::Distributed {
                op: "DistributedDataParallel",
                msg: format!(
                    "Expected to mark a variable ready only once: parameter {} received a \
                     second gradient in this iteration (a second backward pass without a \
                     forward through the DDP module)",
                    self.params[i].0
                ),
            });
        }
        self.marked[i] = true;
        let b = self.slot[i];
        self.buckets[b].ready += 1;
        while self.next_launch < self.buckets.len()
            && self.buckets[self.next_launch].ready == self.buckets[self.next_launch].params.len()
        {
            let b = self.next_launch;
            self.launch(b)?;
            self.next_launch += 1;
        }
        if self.next_launch == self.buckets.len() {
            self.finish()?;
        }
        Ok(())
    }

    /// Pack bucket `b`'s gradients and start its all-reduce.
    fn launch(&mut self, b: usize) -> Result<()> {
        let t0 = Instant::now();
        let bucket = &self.buckets[b];
        let grads: Vec<Tensor> = bucket
            .params
            .iter()
            .map(|&i| {
                let (name, p) = &self.params[i];
                p.grad().map(|g| g.reshape([-1])).unwrap_or_else(|| {
                    Err(Error::Distributed {
                        op: "DistributedDataParallel",
                        msg: format!("parameter {name} has no gradient"),
                    })
                })
            })
            .collect::<Result<_>>()?;
        let flat = {
            let _g = crate::no_grad();
            Tensor::cat(&grads, 0)?
        };
        let (wire, bytes) = to_wire("DistributedDataParallel", &flat, true)?;
        let (mut send, mut recv) = self.buckets[b].pool.take().unwrap_or_default();
        send.clear();
        send.extend_from_slice(&bytes);
        recv.resize(send.len(), 0);
        // Checked on every launch (one 16-word all-gather, hidden behind the backward pass like
        // the bucket's own all-reduce): ranks out of step are an error, never a mixed sum.
        let check = Some({
            let mut s = signature(6, b as u64, &flat);
            // The shapes of the bucket's parameters, so that two models whose buckets only
            // agree in size are told apart too.
            s[14] = self.buckets[b].params.iter().fold(0u64, |h, &i| {
                self.params[i]
                    .1
                    .shape()
                    .iter()
                    .fold(h.rotate_left(7) ^ 0x9e37, |h, &d| {
                        h.wrapping_mul(31) ^ d as u64
                    })
            });
            s
        });
        self.stats.bytes += send.len();
        self.stats.copy_time += t0.elapsed();
        let pending = self.comm.submit(Job {
            what: "DistributedDataParallel",
            kind: Kind::AllReduce(RawOp::Sum),
            wire,
            send,
            recv,
            check,
            describe,
        })?;
        self.buckets[b].pending = Some(pending);
        Ok(())
    }

    /// Wait for every bucket and write the averaged gradients back.
    fn finish(&mut self) -> Result<()> {
        let world = self.comm.size as f64;
        for b in 0..self.buckets.len() {
            let t0 = Instant::now();
            let pending = self.buckets[b]
                .pending
                .take()
                .expect("every bucket was launched");
            let done: Done = pending.wait()?;
            self.stats.exposed_time += t0.elapsed();
            self.stats.all_reduce_time += done.busy;
            self.stats.all_reduces += 1;
            let t1 = Instant::now();
            let bucket = &self.buckets[b];
            let like = Tensor::zeros([0], &bucket.device)?.to_dtype(bucket.dtype)?;
            let avg = from_wire(&like, &[bucket.numel], &done.recv, Some(world))?;
            let mut off = 0;
            for &i in &bucket.params {
                let p = &self.params[i].1;
                let n = p.numel();
                let g = avg.narrow(0, off, n)?.reshape(p.shape())?;
                p.set_grad(Some(g));
                off += n;
            }
            self.buckets[b].pool = Some((done.send, done.recv));
            self.stats.copy_time += t1.elapsed();
        }
        self.stats.steps += 1;
        self.reset();
        Ok(())
    }
}
