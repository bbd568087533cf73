//! Data-parallel training over MPI (PyTorch's `torch.distributed` with the MPI backend, and
//! `DistributedDataParallel`), behind the `mpi` cargo feature: build with
//! `--features mpi` (Open MPI: Debian's `libopenmpi-dev openmpi-bin`, plus `libclang-dev` for
//! the bindings) and launch with `mpirun -np N`.
//!
//! [`init_process_group`] reads the rank and world size from the MPI environment (a program
//! started without `mpirun` is a group of one) and returns the [`ProcessGroup`] guard, which
//! finalizes MPI when dropped, or aborts the whole job when dropped by a panic. The collectives
//! ([`all_reduce`], [`broadcast`], [`all_gather`], [`reduce_scatter`], [`barrier`]) work on
//! CPU and GPU tensors of any dtype and layout (non-contiguous, zero-size, 0-d): GPU tensors
//! are read back into a host buffer, sent, and written back (MPI here is not GPU-aware).
//! Reductions of float16 and bfloat16 tensors are computed in float32 and rounded once.
//!
//! Every collective is checked before any data moves: the ranks exchange what they called
//! (the op, its root or reduction, the dtype and shape) and every rank returns the same
//! [`Error::Distributed`] naming each rank's call if they differ, instead of exchanging
//! mismatched buffers. A collective that a rank never joins (it died, hung, or took another
//! path) fails after [`InitOptions::timeout`] instead of hanging; a rank that panics, or calls
//! [`abort`], ends the whole job through `MPI_Abort`, and `mpirun` names the failed rank.
//!
//! ```
//! use wgtorch::distributed::{self as dist, ReduceOp};
//! use wgtorch::{Device, Tensor};
//! let _pg = dist::init_process_group()?; // one rank without mpirun
//! let (rank, world) = (dist::rank()?, dist::world_size()?);
//! let t = Tensor::full([3], (rank + 1) as f64, &Device::Cpu)?;
//! dist::all_reduce(&t, ReduceOp::Sum)?; // in place: 1 + 2 + ... + world on every rank
//! assert_eq!(t.to_vec::<f32>()?, vec![(world * (world + 1) / 2) as f32; 3]);
//! let parts = dist::all_gather(&Tensor::full([2], rank as f64, &Device::Cpu)?)?;
//! assert_eq!(parts.len(), world);
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod comm;
mod ddp;

pub use ddp::{CommStats, DdpOptions, DistributedDataParallel, NoSyncGuard};

use crate::backend::cpu::CpuStorage;
use crate::{DType, Error, Result, Tensor};
use comm::{Comm, Job, Kind, RawOp, Signature, Wire};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Options of [`init_process_group_with`].
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// How long a collective waits for the other ranks before failing with an error (PyTorch's
    /// `timeout`, default 30 minutes as for its Gloo and MPI backends).
    pub timeout: Duration,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// The reduction of [`all_reduce`] and [`reduce_scatter`] (PyTorch's `dist.ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum,
    /// Sum divided by the world size (floating-point tensors only).
    Avg,
    /// Elementwise product.
    Product,
    /// Elementwise maximum.
    Max,
    /// Elementwise minimum.
    Min,
}

impl ReduceOp {
    fn raw(self) -> RawOp {
        match self {
            ReduceOp::Sum | ReduceOp::Avg => RawOp::Sum,
            ReduceOp::Product => RawOp::Product,
            ReduceOp::Max => RawOp::Max,
            ReduceOp::Min => RawOp::Min,
        }
    }
    fn code(self) -> u64 {
        self as u64
    }
    fn name(code: u64) -> &'static str {
        ["sum", "avg", "product", "max", "min"]
            .get(code as usize)
            .copied()
            .unwrap_or("?")
    }
}

static GROUP: RwLock<Option<Arc<Comm>>> = RwLock::new(None);
static STARTED: AtomicBool = AtomicBool::new(false);

/// The initialized process group; dropping it is [`destroy_process_group`] (or, during a
/// panic, an `MPI_Abort` of the whole job, so that the other ranks do not wait for this one).
#[must_use = "dropping the ProcessGroup finalizes MPI"]
#[derive(Debug)]
pub struct ProcessGroup {
    rank: usize,
    world_size: usize,
    local_rank: usize,
    local_world_size: usize,
}

impl ProcessGroup {
    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Number of processes.
    pub fn world_size(&self) -> usize {
        self.world_size
    }
    /// This process's rank among those on the same machine (torchrun's `LOCAL_RANK`): the GPU
    /// adapter to take when each machine runs one rank per GPU.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }
    /// Number of processes on this machine (torchrun's `LOCAL_WORLD_SIZE`): divide the cores
    /// by it for each rank's threads.
    pub fn local_world_size(&self) -> usize {
        self.local_world_size
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            comm::request_abort(self.rank, self.world_size, 1, "it panicked");
        }
        destroy_process_group();
    }
}

/// Initialize MPI and the default process group with [`InitOptions::default`] (PyTorch's
/// `dist.init_process_group("mpi")`).
pub fn init_process_group() -> Result<ProcessGroup> {
    init_process_group_with(InitOptions::default())
}

/// [`init_process_group`] with options. MPI can be initialized once per process: a second
/// call, even after [`destroy_process_group`], is an error.
pub fn init_process_group_with(opts: InitOptions) -> Result<ProcessGroup> {
    if STARTED.swap(true, Ordering::SeqCst) {
        return Err(Error::Distributed {
            op: "init_process_group",
            msg: "trying to initialize the default process group twice (MPI can be initialized \
                  once per process)"
                .into(),
        });
    }
    let comm = Comm::start(opts.timeout)?;
    let pg = ProcessGroup {
        rank: comm.rank,
        world_size: comm.size,
        local_rank: comm.local_rank,
        local_world_size: comm.local_size,
    };
    *GROUP.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(comm));
    Ok(pg)
}

/// Finalize MPI after the collectives already queued (PyTorch's `destroy_process_group`);
/// nothing happens if no group is initialized. If a collective timed out, the job is aborted
/// instead (MPI cannot finalize with a call still pending).
pub fn destroy_process_group() {
    let comm = GROUP.write().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(c) = comm {
        c.shutdown();
    }
}

/// Whether the default process group is initialized (PyTorch's `dist.is_initialized`).
pub fn is_initialized() -> bool {
    GROUP.read().map(|g| g.is_some()).unwrap_or(false)
}

/// End every rank of the job with `code` through `MPI_Abort` (what a rank that cannot go on
/// should do: the others would otherwise wait for it until their timeout). `mpirun` reports
/// the rank that aborted. Without a process group, exits the process.
pub fn abort(code: i32) -> ! {
    if let Ok(c) = group("abort") {
        comm::request_abort(c.rank, c.size, code, "distributed::abort was called")
    }
    std::process::exit(code)
}

fn group(op: &'static str) -> Result<Arc<Comm>> {
    GROUP
        .read()
        .ok()
        .and_then(|g| g.clone())
        .ok_or_else(|| Error::Distributed {
            op,
            msg: "Default process group has not been initialized, please make sure to call \
                  init_process_group."
                .into(),
        })
}

/// This process's rank in the default group (PyTorch's `dist.get_rank`).
pub fn rank() -> Result<usize> {
    Ok(group("get_rank")?.rank)
}

/// Number of processes in the default group (PyTorch's `dist.get_world_size`).
pub fn world_size() -> Result<usize> {
    Ok(group("get_world_size")?.size)
}

/// This process's rank among the ranks on its machine (PyTorch's `get_node_local_rank`,
/// torchrun's `LOCAL_RANK`), from MPI's shared-memory split of the world.
pub fn local_rank() -> Result<usize> {
    Ok(group("get_node_local_rank")?.local_rank)
}

/// What a collective call is, as every rank's [`Signature`]: the call's code and argument, the
/// dtype, and the shape.
fn signature(code: u64, arg: u64, t: &Tensor) -> Signature {
    let mut s = [0u64; 16];
    s[0] = code;
    s[1] = arg;
    s[2] = DTYPES.iter().position(|d| *d == t.dtype()).unwrap_or(99) as u64;
    s[3] = t.ndim() as u64;
    s[4] = t.numel() as u64;
    for (i, &d) in t.shape().iter().take(10).enumerate() {
        s[5 + i] = d as u64;
    }
    // Shapes beyond 10 dims are compared through a hash of all of them.
    s[15] = t.shape().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &d| {
        (h ^ d as u64).wrapping_mul(0x100_0000_01b3)
    });
    s
}

const DTYPES: [DType; 7] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::Bool,
];
const CALLS: [&str; 6] = [
    "?",
    "all_reduce",
    "broadcast",
    "all_gather",
    "reduce_scatter",
    "barrier",
];

fn describe(s: &Signature) -> String {
    let call = CALLS
        .get(s[0] as usize)
        .copied()
        .unwrap_or("a DDP bucket all_reduce");
    if s[0] == 5 {
        return call.into();
    }
    let arg = match s[0] {
        1 | 4 => ReduceOp::name(s[1]).to_string(),
        2 => format!("src={}", s[1]),
        _ => String::new(),
    };
    let dtype = DTYPES
        .get(s[2] as usize)
        .map(|d| d.to_string())
        .unwrap_or_else(|| "?".into());
    let nd = s[3] as usize;
    let mut shape: Vec<String> = s[5..5 + nd.min(10)].iter().map(|d| d.to_string()).collect();
    if nd > 10 {
        shape.push("...".into());
    }
    format!(
        "{call}({arg}) of a {dtype} tensor of shape [{}]",
        shape.join(", ")
    )
}

/// The tensor's values on the host as wire bytes: for a reduction, float16/bfloat16 widened to
/// float32 (reduced in float32); otherwise the raw element bytes.
fn to_wire(op: &'static str, t: &Tensor, reduce: bool) -> Result<(Wire, Vec<u8>)> {
    let t = if reduce && matches!(t.dtype(), DType::F16 | DType::BF16) {
        t.to_dtype(DType::F32)?
    } else {
        t.clone()
    };
    let data = crate::tensor::block_on(t.host_storage_async())?;
    Ok(match data {
        CpuStorage::F32(v) => (Wire::F32, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::F64(v) => (Wire::F64, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::I32(v) => (Wire::I32, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::I64(v) => (Wire::I64, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::F16(v) => (Wire::U8, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::BF16(v) => (Wire::U8, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::Bool(v) => {
            if reduce {
                return Err(Error::UnsupportedDType {
                    op,
                    dtype: DType::Bool,
                    hint: "; reduce an integer tensor (bool.to_dtype(I32)) instead",
                });
            }
            (Wire::U8, v.iter().map(|&b| b as u8).collect())
        }
    })
}

/// A tensor of `shape` on `like`'s device and dtype from wire bytes (as [`to_wire`] made them
/// for a tensor of `like`'s dtype), with every element divided by `div` when given.
fn from_wire(like: &Tensor, shape: &[usize], bytes: &[u8], div: Option<f64>) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let cs = match (like.dtype(), bytes.len() == n * 4) {
        (DType::F32, _) | (DType::F16 | DType::BF16, true) => {
            let mut v: Vec<f32> = bytemuck::pod_collect_to_vec(bytes);
            if let Some(d) = div {
                v.iter_mut().for_each(|x| *x = (f64::from(*x) / d) as f32);
            }
            CpuStorage::F32(v)
        }
        (DType::F64, _) => {
            let mut v: Vec<f64> = bytemuck::pod_collect_to_vec(bytes);
            if let Some(d) = div {
                v.iter_mut().for_each(|x| *x /= d);
            }
            CpuStorage::F64(v)
        }
        (DType::F16, false) => CpuStorage::F16(bytemuck::pod_collect_to_vec(bytes)),
        (DType::BF16, false) => CpuStorage::BF16(bytemuck::pod_collect_to_vec(bytes)),
        (DType::I32, _) => CpuStorage::I32(bytemuck::pod_collect_to_vec(bytes)),
        (DType::I64, _) => CpuStorage::I64(bytemuck::pod_collect_to_vec(bytes)),
        (DType::Bool, _) => CpuStorage::Bool(bytes.iter().map(|&b| b != 0).collect()),
    };
    let dev = like.device();
    let t = Tensor::from_storage(crate::tensor::place(cs, &dev)?, shape, dev);
    if t.dtype() == like.dtype() {
        Ok(t)
    } else {
        t.to_dtype(like.dtype())
    }
}

/// Write `values` into `t` in place (any layout), outside autograd.
fn write_into(t: &Tensor, values: &Tensor) -> Result<()> {
    let _g = crate::no_grad();
    t.copy_(values)?;
    Ok(())
}

fn run(
    comm: &Comm,
    what: &'static str,
    kind: Kind,
    wire: Wire,
    send: Vec<u8>,
    recv_len: usize,
    sig: Signature,
) -> Result<comm::Done> {
    comm.submit(Job {
        what,
        kind,
        wire,
        send,
        recv: vec![0u8; recv_len],
        check: Some(sig),
        describe,
    })?
    .wait()
}

/// Reduce `tensor` over all ranks with `op`, in place on every rank (PyTorch's
/// `dist.all_reduce(tensor, op)`). Integer tensors take every op but `Avg`; bool tensors none.
pub fn all_reduce(tensor: &Tensor, op: ReduceOp) -> Result<()> {
    let what = "all_reduce";
    let comm = group(what)?;
    if op == ReduceOp::Avg && !tensor.dtype().is_float() {
        return Err(Error::arg(
            what,
            format!(
                "ReduceOp::Avg needs a floating-point tensor, got {}",
                tensor.dtype()
            ),
        ));
    }
    let (wire, send) = to_wire(what, tensor, true)?;
    let len = send.len();
    let done = run(
        &comm,
        what,
        Kind::AllReduce(op.raw()),
        wire,
        send,
        len,
        signature(1, op.code(), tensor),
    )?;
    let div = (op == ReduceOp::Avg).then_some(comm.size as f64);
    write_into(tensor, &from_wire(tensor, tensor.shape(), &done.recv, div)?)
}

/// Overwrite `tensor` on every rank with rank `src`'s values, in place (PyTorch's
/// `dist.broadcast(tensor, src)`).
pub fn broadcast(tensor: &Tensor, src: usize) -> Result<()> {
    let what = "broadcast";
    let comm = group(what)?;
    if src >= comm.size {
        return Err(Error::arg(
            what,
            format!(
                "Invalid rank {src}: the source must be in [0, {})",
                comm.size
            ),
        ));
    }
    let (wire, send) = to_wire(what, tensor, false)?;
    let done = run(
        &comm,
        what,
        Kind::Broadcast(src),
        wire,
        send,
        0,
        signature(2, src as u64, tensor),
    )?;
    write_into(
        tensor,
        &from_wire(tensor, tensor.shape(), &done.send, None)?,
    )
}

/// Every rank's `tensor`, in rank order, on every rank (PyTorch's
/// `dist.all_gather(tensor_list, tensor)`, returning the list). The ranks' tensors must have
/// the same shape and dtype.
pub fn all_gather(tensor: &Tensor) -> Result<Vec<Tensor>> {
    let what = "all_gather";
    let comm = group(what)?;
    let (wire, send) = to_wire(what, tensor, false)?;
    let len = send.len() * comm.size;
    let per = send.len();
    let done = run(
        &comm,
        what,
        Kind::AllGather,
        wire,
        send,
        len,
        signature(3, 0, tensor),
    )?;
    (0..comm.size)
        .map(|r| {
            from_wire(
                tensor,
                tensor.shape(),
                &done.recv[r * per..(r + 1) * per],
                None,
            )
        })
        .collect()
}

/// Reduce `inputs[r]` over the ranks with `op` into `output` on rank `r`, in place (PyTorch's
/// `dist.reduce_scatter(output, input_list, op)`): `inputs` holds one tensor per rank, each of
/// `output`'s shape and dtype.
pub fn reduce_scatter(output: &Tensor, inputs: &[Tensor], op: ReduceOp) -> Result<()> {
    let what = "reduce_scatter";
    let comm = group(what)?;
    if inputs.len() != comm.size {
        return Err(Error::arg(
            what,
            format!(
                "expected one input tensor per rank ({}), got {}",
                comm.size,
                inputs.len()
            ),
        ));
    }
    for (i, t) in inputs.iter().enumerate() {
        if t.shape() != output.shape() || t.dtype() != output.dtype() {
            return Err(Error::Shape {
                op: what,
                msg: format!(
                    "input {i} is a {} tensor of shape {:?}, but the output is {} {:?}",
                    t.dtype(),
                    t.shape(),
                    output.dtype(),
                    output.shape()
                ),
            });
        }
    }
    if op == ReduceOp::Avg && !output.dtype().is_float() {
        return Err(Error::arg(
            what,
            format!(
                "ReduceOp::Avg needs a floating-point tensor, got {}",
                output.dtype()
            ),
        ));
    }
    let mut send = Vec::new();
    let mut wire = Wire::U8;
    for t in inputs {
        let (w, b) = to_wire(what, t, true)?;
        wire = w;
        send.extend_from_slice(&b);
    }
    let per = send.len() / comm.size;
    let done = run(
        &comm,
        what,
        Kind::ReduceScatter(op.raw()),
        wire,
        send,
        per,
        signature(4, op.code(), output),
    )?;
    let div = (op == ReduceOp::Avg).then_some(comm.size as f64);
    write_into(output, &from_wire(output, output.shape(), &done.recv, div)?)
}

/// Wait until every rank has called `barrier` (PyTorch's `dist.barrier()`).
pub fn barrier() -> Result<()> {
    let what = "barrier";
    let comm = group(what)?;
    let mut sig = [0u64; 16];
    sig[0] = 5;
    run(&comm, what, Kind::Barrier, Wire::U8, Vec::new(), 0, sig).map(|_| ())
}
