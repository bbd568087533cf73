//! The communication thread: the one thread that calls MPI (initialised there, so MPI's
//! `MPI_THREAD_FUNNELED` level is all wgtorch needs). Collectives arrive as jobs on a channel
//! and run one at a time, in submission order on every rank, as non-blocking MPI calls polled
//! against a deadline; every MPI return code is checked (the communicator's error handler is
//! `MPI_ERRORS_RETURN`). A job reports on its own channel, so a caller may go on computing while
//! its job runs (DDP's gradient buckets) or wait at once (the plain collectives).

use crate::{Error, Result};
use mpi::ffi;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An element type on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    F32,
    F64,
    I32,
    I64,
    U8,
}

impl Wire {
    pub(crate) fn size(self) -> usize {
        match self {
            Wire::F32 | Wire::I32 => 4,
            Wire::F64 | Wire::I64 => 8,
            Wire::U8 => 1,
        }
    }
    fn raw(self) -> ffi::MPI_Datatype {
        // SAFETY: reading MPI's predefined datatype handles, constants after MPI_Init.
        unsafe {
            match self {
                Wire::F32 => ffi::RSMPI_FLOAT,
                Wire::F64 => ffi::RSMPI_DOUBLE,
                Wire::I32 => ffi::RSMPI_INT32_T,
                Wire::I64 => ffi::RSMPI_INT64_T,
                Wire::U8 => ffi::RSMPI_UINT8_T,
            }
        }
    }
}

/// The MPI reduction a job applies (`Avg` is a `Sum` divided afterwards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawOp {
    Sum,
    Product,
    Max,
    Min,
}

impl RawOp {
    fn raw(self) -> ffi::MPI_Op {
        // SAFETY: MPI's predefined operation handles.
        unsafe {
            match self {
                RawOp::Sum => ffi::RSMPI_SUM,
                RawOp::Product => ffi::RSMPI_PROD,
                RawOp::Max => ffi::RSMPI_MAX,
                RawOp::Min => ffi::RSMPI_MIN,
            }
        }
    }
}

/// What a job does with its buffers.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// `recv = op(send over ranks)`, both `count` elements.
    AllReduce(RawOp),
    /// `send` (in place) takes `root`'s contents.
    Broadcast(usize),
    /// `recv` (`size × count`) holds every rank's `send`, by rank.
    AllGather,
    /// `send` is `size` blocks of `recv`'s length; `recv` = `op` over ranks of block `rank`.
    ReduceScatter(RawOp),
    /// Waits for every rank.
    Barrier,
}

/// What every rank's call must agree on, exchanged (all-gathered) before the data when asked:
/// a code for the call, then its arguments. [`describe`] turns one into words for errors.
pub(crate) type Signature = [u64; 16];

/// One collective call.
pub(crate) struct Job {
    /// The public op's name, for errors (`all_reduce`).
    pub what: &'static str,
    pub kind: Kind,
    pub wire: Wire,
    pub send: Vec<u8>,
    pub recv: Vec<u8>,
    /// Checked against every rank's before the data move, when set.
    pub check: Option<Signature>,
    /// Turns a signature into words for the mismatch error.
    pub describe: fn(&Signature) -> String,
}

/// A finished job: its buffers back, and how long MPI took from the start of the data move.
pub(crate) struct Done {
    pub send: Vec<u8>,
    pub recv: Vec<u8>,
    pub busy: Duration,
}

/// A submitted job; [`Pending::wait`] blocks until it is done.
pub(crate) struct Pending(Receiver<Result<Done>>);

impl Pending {
    pub(crate) fn wait(self) -> Result<Done> {
        self.0.recv().unwrap_or_else(|_| {
            Err(Error::Distributed {
                op: "process group",
                msg: "the communication thread has stopped".into(),
            })
        })
    }
}

enum Msg {
    Job(Box<Job>, Sender<Result<Done>>),
    Shutdown,
}

/// The process group's connection to its communication thread.
pub(crate) struct Comm {
    pub rank: usize,
    pub size: usize,
    /// Rank among the processes on this machine, and their number.
    pub local_rank: usize,
    pub local_size: usize,
    tx: Mutex<Option<Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Set when a job timed out (its buffers may still be written by MPI): nothing more may run
/// and the process cannot finalize; it must abort.
static BROKEN: AtomicBool = AtomicBool::new(false);
/// A requested `MPI_Abort` error code (0: none); the communication thread aborts when it sees it.
static ABORT: AtomicI32 = AtomicI32::new(0);

impl Comm {
    /// Start the communication thread, which initialises MPI.
    pub(crate) fn start(timeout: Duration) -> Result<Comm> {
        let (tx, rx) = channel::<Msg>();
        let (ready_tx, ready_rx) = channel::<Result<[usize; 4]>>();
        let thread = std::thread::Builder::new()
            .name("wgtorch-mpi".into())
            .spawn(move || comm_main(rx, ready_tx, timeout))
            .map_err(|e| Error::Distributed {
                op: "init_process_group",
                msg: format!("could not start the communication thread: {e}"),
            })?;
        let [rank, size, local_rank, local_size] = ready_rx.recv().unwrap_or_else(|_| {
            Err(Error::Distributed {
                op: "init_process_group",
                msg: "MPI initialisation failed (the communication thread ended)".into(),
            })
        })?;
        Ok(Comm {
            rank,
            size,
            local_rank,
            local_size,
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queue `job`; it runs after every job submitted before it.
    pub(crate) fn submit(&self, job: Job) -> Result<Pending> {
        if BROKEN.load(Ordering::Relaxed) {
            return Err(broken(job.what));
        }
        let (reply, rx) = channel();
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = tx.as_ref() else {
            return Err(Error::Distributed {
                op: job.what,
                msg: "the process group has been destroyed".into(),
            });
        };
        tx.send(Msg::Job(Box::new(job), reply))
            .map_err(|_| broken("process group"))?;
        Ok(Pending(rx))
    }

    /// Finalize MPI after the queued jobs (or abort, if a job timed out).
    pub(crate) fn shutdown(&self) {
        if let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(Msg::Shutdown);
        }
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Ask the communication thread to `MPI_Abort` the whole job with `code`; if it cannot within
/// a few seconds (it is gone), exit the process, which `mpirun` also treats as a failure.
/// `why` goes to stderr first, naming this rank: mpirun's own report of an abort is not always
/// printed (Open MPI can lose it while it tears the job down).
pub(crate) fn request_abort(rank: usize, size: usize, code: i32, why: &str) -> ! {
    eprintln!("wgtorch.distributed: rank {rank} of {size} aborts the job (code {code}): {why}");
    ABORT.store(if code == 0 { 1 } else { code }, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(10));
    std::process::exit(if code == 0 { 1 } else { code })
}

fn broken(op: &'static str) -> Error {
    Error::Distributed {
        op,
        msg: "the process group is unusable after an earlier collective timed out; the process \
              must exit (mpirun then ends the other ranks)"
            .into(),
    }
}

fn world() -> ffi::MPI_Comm {
    // SAFETY: MPI_COMM_WORLD's handle.
    unsafe { ffi::RSMPI_COMM_WORLD }
}

fn check_abort() {
    let code = ABORT.load(Ordering::SeqCst);
    if code != 0 {
        // SAFETY: called on the thread that initialised MPI.
        unsafe {
            ffi::MPI_Abort(world(), code);
        }
        std::process::exit(code);
    }
}

fn comm_main(rx: Receiver<Msg>, ready: Sender<Result<[usize; 4]>>, timeout: Duration) {
    let Some((universe, _threading)) = mpi::initialize_with_threading(mpi::Threading::Funneled)
    else {
        let _ = ready.send(Err(Error::Distributed {
            op: "init_process_group",
            msg: "MPI is already initialized in this process (init_process_group may be called \
                  once per process; MPI cannot be initialized again after it is finalized)"
                .into(),
        }));
        return;
    };
    let ids = match identify() {
        Ok(ids) => ids,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(ids));
    let [rank, size, ..] = ids;
    loop {
        check_abort();
        let msg = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => m,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Msg::Shutdown => break,
            Msg::Job(job, reply) => {
                let out = if BROKEN.load(Ordering::Relaxed) {
                    Err(broken(job.what))
                } else {
                    run(*job, rank, size, timeout)
                };
                let _ = reply.send(out);
            }
        }
    }
    if BROKEN.load(Ordering::Relaxed) {
        // Requests are still pending: MPI_Finalize would wait for them forever.
        // SAFETY: on the initialising thread.
        unsafe {
            ffi::MPI_Abort(world(), 1);
        }
        std::process::exit(1);
    }
    drop(universe); // MPI_Finalize
}

/// Set the error handler to return codes, then this process's rank and the world size, and
/// its rank and the number of ranks on this machine (a shared-memory split of the world).
fn identify() -> Result<[usize; 4]> {
    let op = "init_process_group";
    let ok = |rc: c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(mpi_error(op, rc))
        }
    };
    let (mut rank, mut size, mut local_rank, mut local_size) = (0, 0, 0, 0);
    // SAFETY: plain MPI calls after MPI_Init, on the initialising thread; `node` is freed.
    unsafe {
        ok(ffi::MPI_Comm_set_errhandler(
            world(),
            ffi::RSMPI_ERRORS_RETURN,
        ))?;
        ok(ffi::MPI_Comm_rank(world(), &mut rank))?;
        ok(ffi::MPI_Comm_size(world(), &mut size))?;
        let mut node: ffi::MPI_Comm = std::mem::zeroed();
        ok(ffi::MPI_Comm_split_type(
            world(),
            ffi::RSMPI_COMM_TYPE_SHARED,
            0,
            ffi::RSMPI_INFO_NULL,
            &mut node,
        ))?;
        ok(ffi::MPI_Comm_rank(node, &mut local_rank))?;
        ok(ffi::MPI_Comm_size(node, &mut local_size))?;
        ok(ffi::MPI_Comm_free(&mut node))?;
    }
    Ok([rank, size, local_rank, local_size].map(|v| v as usize))
}

/// The error for MPI return code `rc`, with MPI's own text for it.
fn mpi_error(op: &'static str, rc: c_int) -> Error {
    let mut buf = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: MPI_MAX_ERROR_STRING is 256 in Open MPI and MPICH; the buffer is twice that.
    unsafe {
        ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len);
    }
    buf.truncate(len.clamp(0, 512) as usize);
    Error::Distributed {
        op,
        msg: format!(
            "MPI error {rc}: {}",
            String::from_utf8_lossy(&buf).trim_end_matches('\0')
        ),
    }
}

fn count(op: &'static str, bytes: usize, wire: Wire) -> Result<c_int> {
    c_int::try_from(bytes / wire.size()).map_err(|_| Error::Distributed {
        op,
        msg: format!(
            "{} elements is more than one MPI call carries (2^31 - 1)",
            bytes / wire.size()
        ),
    })
}

/// Start a non-blocking call with `start`, then poll it until done or the deadline. On a
/// timeout the buffers it uses must outlive the process (the caller leaks them).
fn complete(
    what: &'static str,
    rank: usize,
    size: usize,
    timeout: Duration,
    start: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
) -> Result<()> {
    // SAFETY: MPI_Request is a plain handle; MPI writes it before we read it.
    let mut req: ffi::MPI_Request = unsafe { std::mem::zeroed() };
    let rc = start(&mut req);
    if rc != 0 {
        return Err(mpi_error(what, rc));
    }
    let t0 = Instant::now();
    let mut polls = 0u32;
    loop {
        let mut flag: c_int = 0;
        // SAFETY: `req` is the live request started above.
        let rc = unsafe { ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if rc != 0 {
            BROKEN.store(true, Ordering::Relaxed);
            return Err(mpi_error(what, rc));
        }
        if flag != 0 {
            return Ok(());
        }
        check_abort();
        if t0.elapsed() > timeout {
            BROKEN.store(true, Ordering::Relaxed);
            return Err(Error::Distributed {
                op: what,
                msg: format!(
                    "timed out after {:.1} s on rank {rank} of {size}: another rank has not \
                     joined this collective (it may have exited, hung, or called a different \
                     one). The process group is now unusable: exit, and mpirun ends the other \
                     ranks",
                    timeout.as_secs_f64()
                ),
            });
        }
        // Spin briefly (most collectives finish within microseconds), then back off so that
        // polling does not take a core from the computation.
        polls += 1;
        if polls < 200 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(if polls < 2000 { 20 } else { 200 }));
        }
    }
}

fn run(job: Job, rank: usize, size: usize, timeout: Duration) -> Result<Done> {
    let Job {
        what,
        kind,
        wire,
        mut send,
        mut recv,
        check,
        describe,
    } = job;
    let out = (|| {
        if let Some(sig) = check {
            let mut all = vec![0u64; 16 * size];
            // SAFETY: `sig` and `all` outlive the call (on a timeout `all` is leaked below).
            let res = complete(what, rank, size, timeout, |req| unsafe {
                ffi::MPI_Iallgather(
                    sig.as_ptr().cast(),
                    16,
                    ffi::RSMPI_UINT64_T,
                    all.as_mut_ptr().cast(),
                    16,
                    ffi::RSMPI_UINT64_T,
                    world(),
                    req,
                )
            });
            if let Err(e) = res {
                std::mem::forget(all);
                return Err(e);
            }
            let sigs: Vec<&[u64]> = all.chunks(16).collect();
            if sigs.iter().any(|s| *s != sigs[0]) {
                let mut msg = String::from("the ranks' calls do not match:");
                for (r, s) in sigs.iter().enumerate() {
                    let s: Signature = (*s).try_into().expect("16 words");
                    msg.push_str(&format!("\n  rank {r}: {}", describe(&s)));
                }
                return Err(Error::Distributed { op: what, msg });
            }
        }
        let t0 = Instant::now();
        if send.is_empty() && recv.is_empty() && !matches!(kind, Kind::Barrier) {
            // Zero elements on every rank (the signatures matched): nothing to move. (An empty
            // Vec's dangling pointer is 0x1, which Open MPI reads as MPI_IN_PLACE.)
            return Ok(t0.elapsed());
        }
        let res = match kind {
            Kind::AllReduce(op) => {
                let n = count(what, send.len(), wire)?;
                // SAFETY: both buffers hold `n` elements of `wire` and outlive the call.
                complete(what, rank, size, timeout, |req| unsafe {
                    ffi::MPI_Iallreduce(
                        send.as_ptr().cast(),
                        recv.as_mut_ptr().cast(),
                        n,
                        wire.raw(),
                        op.raw(),
                        world(),
                        req,
                    )
                })
            }
            Kind::Broadcast(root) => {
                let n = count(what, send.len(), wire)?;
                // SAFETY: `send` holds `n` elements and outlives the call.
                complete(what, rank, size, timeout, |req| unsafe {
                    ffi::MPI_Ibcast(
                        send.as_mut_ptr().cast::<c_void>(),
                        n,
                        wire.raw(),
                        root as c_int,
                        world(),
                        req,
                    )
                })
            }
            Kind::AllGather => {
                let n = count(what, send.len(), wire)?;
                // SAFETY: `recv` holds size × n elements.
                complete(what, rank, size, timeout, |req| unsafe {
                    ffi::MPI_Iallgather(
                        send.as_ptr().cast(),
                        n,
                        wire.raw(),
                        recv.as_mut_ptr().cast(),
                        n,
                        wire.raw(),
                        world(),
                        req,
                    )
                })
            }
            Kind::ReduceScatter(op) => {
                let n = count(what, recv.len(), wire)?;
                // SAFETY: `send` holds size × n elements, `recv` n.
                complete(what, rank, size, timeout, |req| unsafe {
                    ffi::MPI_Ireduce_scatter_block(
                        send.as_ptr().cast(),
                        recv.as_mut_ptr().cast(),
                        n,
                        wire.raw(),
                        op.raw(),
                        world(),
                        req,
                    )
                })
            }
            Kind::Barrier => complete(what, rank, size, timeout, |req| unsafe {
                // SAFETY: no buffers.
                ffi::MPI_Ibarrier(world(), req)
            }),
        };
        res.map(|()| t0.elapsed())
    })();
    match out {
        Ok(busy) => Ok(Done { send, recv, busy }),
        Err(e) => {
            if BROKEN.load(Ordering::Relaxed) {
                // MPI may still write into these: they must never be freed.
                std::mem::forget(send);
                std::mem::forget(recv);
            }
            Err(e)
        }
    }
}
