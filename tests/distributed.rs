//! `wgtorch::distributed` under real `mpirun` (issue #17), built with `--features mpi`.
//!
//! Each `#[test]` here launches `mpirun -np N` on this same test binary, running the ignored
//! `worker` test with `WGTORCH_MPI_CASE` naming what every rank checks; a rank that finds a
//! wrong value panics, which aborts the job, and the launching test fails with every rank's
//! output. Collectives are checked against hand-computed results for every op and dtype
//! (non-contiguous, zero-size and 0-d tensors too); DDP against one process training on the
//! union of the ranks' batches; failures (a rank exiting, a rank never joining, mismatched
//! shapes) against bounded, named errors.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};
use wgtorch::distributed::{self as dist, DdpOptions, DistributedDataParallel, ReduceOp};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, Forward, Linear, Module, ModuleExt};
use wgtorch::optim::{Optimizer, Sgd};
use wgtorch::{DType, Device, Result, Tensor};

/// Run `case` on `np` ranks; the mpirun status and everything the ranks printed.
fn mpirun(np: usize, case: &str, device: &str) -> (Output, Duration) {
    let exe = std::env::current_exe().expect("test binary path");
    let t0 = Instant::now();
    let out = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &np.to_string(),
        ])
        .args(["--mca", "btl", "self,vader"])
        .arg(exe)
        .args([
            "--exact",
            "worker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WGTORCH_MPI_CASE", case)
        .env("WGTORCH_MPI_DEVICE", device)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("mpirun (Open MPI: apt-get install openmpi-bin) must be on PATH");
    (out, t0.elapsed())
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn expect_ok(np: usize, case: &str, device: &str) {
    let (o, _) = mpirun(np, case, device);
    let all = text(&o);
    assert!(
        o.status.success(),
        "{case} on {np} ranks ({device}) failed:\n{all}"
    );
    let done = all.matches(&format!("case {case} passed on rank")).count();
    assert_eq!(done, np, "every rank must report {case}:\n{all}");
}

#[test]
fn collectives_on_2_and_3_ranks_cpu() {
    expect_ok(2, "collectives", "cpu");
    expect_ok(3, "collectives", "cpu");
}

#[test]
fn collectives_on_the_gpu() {
    if common::gpu().is_some() {
        expect_ok(2, "collectives", "gpu");
        expect_ok(3, "collectives", "gpu");
    }
}

#[test]
fn ddp_matches_one_process_on_the_union_of_batches_cpu() {
    expect_ok(2, "ddp", "cpu");
    expect_ok(3, "ddp", "cpu");
}

#[test]
fn ddp_matches_one_process_on_the_gpu() {
    if common::gpu().is_some() {
        expect_ok(2, "ddp", "gpu");
        expect_ok(3, "ddp", "gpu");
    }
}

#[test]
fn rank_0_checkpoints_and_every_rank_resumes() {
    expect_ok(2, "checkpoint", "cpu");
}

#[test]
fn mismatched_calls_are_an_error_on_every_rank() {
    expect_ok(2, "mismatch", "cpu");
}

#[test]
fn a_rank_that_exits_ends_the_job() {
    let (o, took) = mpirun(2, "rank_exits", "cpu");
    let all = text(&o);
    assert!(!o.status.success(), "mpirun must fail:\n{all}");
    assert!(took < Duration::from_secs(60), "took {took:?}:\n{all}");
    // Open MPI names the process that failed, [[job, 1], rank], and its exit code.
    assert!(
        all.contains("],1]") && all.contains("Exit code:    3"),
        "the failed rank must be named:\n{all}"
    );
}

#[test]
fn a_collective_nobody_joins_times_out_and_aborts() {
    let (o, took) = mpirun(2, "timeout", "cpu");
    let all = text(&o);
    assert!(!o.status.success(), "mpirun must fail:\n{all}");
    assert!(took < Duration::from_secs(60), "took {took:?}:\n{all}");
    assert!(
        all.contains("all_reduce: timed out after 2.0 s on rank 0 of 2"),
        "{all}"
    );
    assert!(all.contains("rank 0 of 2 aborts the job (code 2)"), "{all}");
}

#[test]
fn a_rank_that_panics_aborts_the_job() {
    let (o, took) = mpirun(2, "panic", "cpu");
    let all = text(&o);
    assert!(!o.status.success(), "mpirun must fail:\n{all}");
    assert!(took < Duration::from_secs(60), "took {took:?}:\n{all}");
    assert!(
        all.contains("rank 1 of 2 aborts the job (code 1): it panicked"),
        "{all}"
    );
}

// ---- what each rank runs ----

#[test]
#[ignore = "run on every rank by mpirun from the tests above"]
fn worker() {
    let case = std::env::var("WGTORCH_MPI_CASE").expect("WGTORCH_MPI_CASE");
    let dev = match std::env::var("WGTORCH_MPI_DEVICE").as_deref() {
        Ok("gpu") => Device::gpu().expect("a GPU adapter"),
        _ => Device::Cpu,
    };
    let timeout = if case == "timeout" { 2 } else { 120 };
    let pg = dist::init_process_group_with(dist::InitOptions {
        timeout: Duration::from_secs(timeout),
    })
    .expect("init_process_group");
    let (rank, world) = (pg.rank(), pg.world_size());
    // One machine: the node-local numbering is the global one.
    assert_eq!((pg.local_rank(), pg.local_world_size()), (rank, world));
    assert_eq!(
        (dist::rank().unwrap(), dist::world_size().unwrap()),
        (rank, world)
    );
    assert_eq!(dist::local_rank().unwrap(), rank);
    assert!(dist::is_initialized());
    let run = || -> Result<()> {
        match case.as_str() {
            "collectives" => collectives(rank, world, &dev),
            "ddp" => ddp(rank, world, &dev),
            "mismatch" => mismatch(rank, world),
            "checkpoint" => checkpoint(rank, world),
            "rank_exits" => {
                let t = Tensor::ones([4], &dev)?;
                dist::all_reduce(&t, ReduceOp::Sum)?;
                if rank == 1 {
                    std::process::exit(3); // dies without finalizing
                }
                loop {
                    dist::all_reduce(&t, ReduceOp::Sum)?;
                }
            }
            "timeout" => {
                if rank == 0 {
                    let t = Tensor::ones([4], &dev)?;
                    match dist::all_reduce(&t, ReduceOp::Sum) {
                        Err(e) => {
                            eprintln!("{e}");
                            dist::abort(2);
                        }
                        Ok(()) => panic!("an all_reduce nobody joined returned"),
                    }
                }
                std::thread::sleep(Duration::from_secs(120));
                Ok(())
            }
            "panic" => {
                dist::barrier()?;
                if rank == 1 {
                    panic!("rank 1 fails");
                }
                dist::barrier()?; // rank 1 never comes: the abort ends this rank
                std::thread::sleep(Duration::from_secs(120));
                Ok(())
            }
            other => panic!("unknown case {other}"),
        }
    };
    run().unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    println!("case {case} passed on rank {rank}");
    drop(pg);
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap()
}

fn collectives(rank: usize, world: usize, dev: &Device) -> Result<()> {
    let w = world as f64;
    let r1 = (rank + 1) as f64;
    let sum = w * (w + 1.0) / 2.0;
    let prod: f64 = (1..=world).map(|k| k as f64).product();
    let dtypes: &[DType] = if dev.is_gpu() {
        &[DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64]
    } else {
        &[
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I64,
        ]
    };
    for &dt in dtypes {
        for (op, want) in [
            (ReduceOp::Sum, sum),
            (ReduceOp::Product, prod),
            (ReduceOp::Max, w),
            (ReduceOp::Min, 1.0),
            (ReduceOp::Avg, sum / w),
        ] {
            let t = Tensor::full([2, 3], r1, dev)?.to_dtype(dt)?;
            if op == ReduceOp::Avg && !dt.is_float() {
                assert!(
                    dist::all_reduce(&t, op).is_err(),
                    "Avg of {dt} must be refused"
                );
                continue;
            }
            dist::all_reduce(&t, op)?;
            assert_eq!((t.dtype(), t.device()), (dt, *dev));
            assert_eq!(f32s(&t), vec![want as f32; 6], "all_reduce {op:?} of {dt}");
        }
    }
    // Non-contiguous: a transposed view is reduced in place, through to its base.
    let base = Tensor::arange(0.0, 6.0, 1.0, dev)?
        .reshape([2, 3])?
        .add_scalar(10.0 * rank as f64)?;
    let view = base.t()?;
    dist::all_reduce(&view, ReduceOp::Sum)?;
    let off = 10.0 * (0..world).sum::<usize>() as f32;
    let want: Vec<f32> = (0..6).map(|i| w as f32 * i as f32 + off).collect();
    assert_eq!(f32s(&base), want, "all_reduce of a transposed view");
    // Zero-size and 0-d.
    let empty = Tensor::zeros([0, 3], dev)?;
    dist::all_reduce(&empty, ReduceOp::Sum)?;
    assert_eq!(empty.shape(), &[0, 3]);
    let scalar = Tensor::full([], r1, dev)?;
    dist::all_reduce(&scalar, ReduceOp::Max)?;
    assert_eq!((scalar.shape().len(), scalar.item()?), (0, w));
    // Broadcast from the last rank: floats, half, int, bool.
    let src = world - 1;
    for dt in [DType::F32, DType::F16, DType::I64, DType::Bool] {
        let t = Tensor::full([4], (rank == src) as i32 as f64 * 7.0, dev)?.to_dtype(dt)?;
        dist::broadcast(&t, src)?;
        let want = if dt == DType::Bool { 1.0 } else { 7.0 };
        assert_eq!(f32s(&t), vec![want; 4], "broadcast of {dt}");
    }
    assert!(dist::broadcast(&Tensor::zeros([1], dev)?, world).is_err());
    // All-gather: rank r's tensor at position r.
    let parts = dist::all_gather(&Tensor::full([2], rank as f64, dev)?.to_dtype(DType::BF16)?)?;
    assert_eq!(parts.len(), world);
    for (r, p) in parts.iter().enumerate() {
        assert_eq!((p.dtype(), f32s(p)), (DType::BF16, vec![r as f32; 2]));
    }
    // Reduce-scatter: inputs[j] = 10 rank + j, so rank r gets the sum over k of (10 k + r).
    let inputs: Vec<Tensor> = (0..world)
        .map(|j| Tensor::full([3], (10 * rank + j) as f64, dev))
        .collect::<Result<_>>()?;
    let out = Tensor::zeros([3], dev)?;
    dist::reduce_scatter(&out, &inputs, ReduceOp::Sum)?;
    let want = (0..world).map(|k| 10 * k + rank).sum::<usize>() as f32;
    assert_eq!(f32s(&out), vec![want; 3], "reduce_scatter");
    assert!(dist::reduce_scatter(&out, &inputs[..world - 1], ReduceOp::Sum).is_err());
    dist::barrier()?;
    Ok(())
}

/// Rank 0 alone writes the checkpoint; every rank resumes from it, and DDP keeps the replicas
/// equal even if a rank resumed from something else.
fn checkpoint(rank: usize, world: usize) -> Result<()> {
    use wgtorch::io::Checkpoint;
    let dev = Device::Cpu;
    // One directory for the job: rank 0 makes it and broadcasts its name's suffix.
    let id = Tensor::from_vec(vec![std::process::id() as i64], [1], &dev)?;
    dist::broadcast(&id, 0)?;
    let dir = std::env::temp_dir().join(format!("wgtorch-ddp-ckpt-{}", id.to_vec::<i64>()?[0]));
    let path = dir.join("ck.safetensors");
    wgtorch::manual_seed(rank as u64);
    let ddp = DistributedDataParallel::new(SimpleCnn::new(&dev)?)?;
    let mut opt = wgtorch::optim::Adam::new(ddp.module().parameters(), 1e-3)?;
    let x = Tensor::randn([2, 3, 32, 32], &dev)?;
    let y = Tensor::from_vec(vec![1i64, 2], [2], &dev)?;
    F::cross_entropy(&ddp.forward(&x)?, &y)?.backward()?;
    opt.step()?;
    if rank == 0 {
        std::fs::create_dir_all(&dir).map_err(|e| wgtorch::Error::msg(e.to_string()))?;
        Checkpoint {
            model: ddp.module().state_dict(),
            optim: opt.state_dict(),
            scheduler: Default::default(),
            epoch: 1,
            rng: [1, 2, 3, 4],
            metrics: vec![],
        }
        .save(&path)?;
    }
    dist::barrier()?; // the file is complete before anyone reads it
    let ck = Checkpoint::load(&path, &dev)?;
    let mut resumed = SimpleCnn::new(&dev)?;
    resumed.load_state_dict(&ck.model, true)?;
    for ((n, a), (_, b)) in ddp
        .module()
        .named_parameters()
        .iter()
        .zip(resumed.named_parameters())
    {
        assert_eq!(
            common::vals(a),
            common::vals(&b),
            "{n} resumed on rank {rank}"
        );
    }
    let mut opt2 = wgtorch::optim::Adam::new(resumed.parameters(), 1e-3)?;
    opt2.load_state_dict(&ck.optim)?;
    // A rank that resumed from other weights still gets rank 0's through DDP.
    if rank == world - 1 {
        wgtorch::manual_seed(99);
        resumed = SimpleCnn::new(&dev)?;
    }
    let again = DistributedDataParallel::new(resumed)?;
    for ((n, a), (_, b)) in ddp
        .module()
        .named_parameters()
        .iter()
        .zip(again.module().named_parameters())
    {
        assert_eq!(
            common::vals(a),
            common::vals(&b),
            "{n} after DDP's broadcast on rank {rank}"
        );
    }
    dist::barrier()?;
    if rank == 0 {
        let files: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| wgtorch::Error::msg(e.to_string()))?
            .collect();
        assert_eq!(
            files.len(),
            1,
            "only rank 0's checkpoint, no temporaries: {files:?}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(())
}

fn mismatch(rank: usize, world: usize) -> Result<()> {
    assert_eq!(world, 2);
    let dev = Device::Cpu;
    let shape: [usize; 2] = if rank == 0 { [2, 3] } else { [3, 2] };
    let t = Tensor::ones(shape, &dev)?;
    let e = dist::all_reduce(&t, ReduceOp::Sum)
        .expect_err("shapes differ")
        .to_string();
    assert!(
        e.contains("rank 0: all_reduce(sum) of a float32 tensor of shape [2, 3]"),
        "{e}"
    );
    assert!(
        e.contains("rank 1: all_reduce(sum) of a float32 tensor of shape [3, 2]"),
        "{e}"
    );
    assert_eq!(
        t.to_vec::<f32>()?,
        vec![1.0; 6],
        "a refused call leaves the tensor alone"
    );
    // Different collectives on different ranks.
    let e = if rank == 0 {
        dist::all_reduce(&t, ReduceOp::Sum)
    } else {
        dist::broadcast(&t, 0)
    }
    .expect_err("calls differ")
    .to_string();
    assert!(
        e.contains("broadcast(src=0)") && e.contains("all_reduce(sum)"),
        "{e}"
    );
    // Different models: DDP's initial broadcast refuses them on every rank.
    let (i, o) = if rank == 0 { (4, 2) } else { (2, 4) };
    let e = DistributedDataParallel::new(Linear::new(i, o, &dev)?)
        .err()
        .expect("models differ")
        .to_string();
    assert!(
        e.contains("shape [2, 4]") && e.contains("shape [4, 2]"),
        "{e}"
    );
    // The group still works afterwards.
    let t = Tensor::ones([2], &dev)?;
    dist::all_reduce(&t, ReduceOp::Sum)?;
    assert_eq!(t.to_vec::<f32>()?, [2.0, 2.0]);
    Ok(())
}

/// A model with a parameter that the forward pass never uses.
#[derive(wgtorch::nn::Module)]
struct Unused {
    used: Linear,
    unused: Linear,
}

impl Forward for Unused {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.used.forward(x)
    }
}

fn grads(m: &impl Module) -> Vec<Vec<f64>> {
    m.parameters()
        .iter()
        .map(|p| common::vals(&p.grad().expect("a gradient")))
        .collect()
}

fn ddp(rank: usize, world: usize, dev: &Device) -> Result<()> {
    let b = 3; // samples per rank and step
               // Each rank starts from different weights; DDP must replace them with rank 0's.
    wgtorch::manual_seed(100 + rank as u64);
    let opts = DdpOptions {
        bucket_cap_mb: 1.0,
        first_bucket_mb: 0.05,
        ..Default::default()
    };
    let ddp = DistributedDataParallel::new_with(SimpleCnn::new(dev)?, opts)?;
    assert!(
        ddp.buckets().len() >= 3,
        "small caps make several buckets: {:?}",
        ddp.buckets()
    );
    // The reference: one process with rank 0's initial weights, on every rank's batch at once.
    wgtorch::manual_seed(100);
    let reference = SimpleCnn::new(dev)?;
    for ((n, p), (_, q)) in ddp
        .module()
        .named_parameters()
        .iter()
        .zip(reference.named_parameters())
    {
        assert_eq!(
            common::vals(p),
            common::vals(&q),
            "{n} after the initial broadcast"
        );
    }
    let mut opt = Sgd::new(ddp.module().parameters(), 0.05)?;
    let mut ref_opt = Sgd::new(reference.parameters(), 0.05)?;
    wgtorch::manual_seed(7);
    let x_all = Tensor::randn([4, b * world, 3, 32, 32], dev)?;
    let y_all = Tensor::from_vec(
        (0..4 * b * world)
            .map(|i| (i * 7 % 10) as i64)
            .collect::<Vec<_>>(),
        [4, b * world],
        dev,
    )?;
    let mine = |s: usize| -> Result<(Tensor, Tensor)> {
        Ok((
            x_all.select(0, s as i64)?.narrow(0, rank * b, b)?,
            y_all.select(0, s as i64)?.narrow(0, rank * b, b)?,
        ))
    };
    let tol = if dev.is_gpu() { 2e-4 } else { 1e-5 };
    let check = |what: &str, a: Vec<Vec<f64>>, b: Vec<Vec<f64>>| {
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            common::assert_close(
                &format!("{what} (parameter {i}, rank {rank})"),
                a,
                b,
                tol,
                tol,
            );
        }
    };
    // Steps 0 and 1: one batch each. Step 2: batches 2 and 3 accumulated, the first's forward
    // and backward under no_sync (local only), the second averaged with it.
    for step in 0..3 {
        opt.zero_grad();
        ref_opt.zero_grad();
        let micro: &[usize] = if step < 2 { &[step] } else { &[2, 3] };
        for (k, &s) in micro.iter().enumerate() {
            let (x, y) = mine(s)?;
            let _local = (k + 1 < micro.len()).then(|| ddp.no_sync());
            F::cross_entropy(&ddp.forward(&x)?, &y)?.backward()?;
            let xs = x_all.select(0, s as i64)?;
            let ys = y_all.select(0, s as i64)?;
            F::cross_entropy(&reference.forward(&xs)?, &ys)?.backward()?;
        }
        check(
            &format!("gradient at step {step}"),
            grads(ddp.module()),
            grads(&reference),
        );
        opt.step()?;
        ref_opt.step()?;
        // The replicas stay bit-identical.
        for (n, p) in ddp.module().named_parameters() {
            let all = dist::all_gather(&p.detach())?;
            for (r, q) in all.iter().enumerate() {
                assert_eq!(
                    common::vals(q),
                    common::vals(&p),
                    "{n}: rank {r} differs after step {step}"
                );
            }
        }
    }
    let stats = ddp.take_comm_stats();
    assert_eq!(stats.steps, 3);
    assert_eq!(stats.all_reduces, 3 * ddp.buckets().len());
    assert!(stats.all_reduce_time > Duration::ZERO && (0.0..=1.0).contains(&stats.overlap()));
    // The forward pass decides, as in PyTorch: a backward through the module alone (here on
    // rank 0 only) stays local, and the next synced step still agrees across the ranks.
    if rank == 0 {
        let (x, y) = mine(0)?;
        F::cross_entropy(&ddp.module().forward(&x)?, &y)?.backward()?;
        assert_eq!(ddp.take_comm_stats().steps, 0);
    }
    opt.zero_grad();
    let (x, y) = mine(1)?;
    F::cross_entropy(&ddp.forward(&x)?, &y)?.backward()?;
    assert_eq!(ddp.take_comm_stats().steps, 1);
    for (n, p) in ddp.module().named_parameters() {
        let all = dist::all_gather(&p.grad().unwrap())?;
        for (r, g) in all.iter().enumerate() {
            assert_eq!(
                common::vals(g),
                common::vals(&all[0]),
                "{n}: rank {r}'s gradient"
            );
        }
    }
    // Parameters replaced after wrapping (a dtype change) leave the hooks on the old tensors:
    // the next forward says so instead of training without averaging.
    let mut lin = DistributedDataParallel::new(Linear::new(4, 2, dev)?)?;
    lin.module_mut().to_dtype(DType::F16)?;
    let x16 = Tensor::ones([1, 4], dev)?.to_dtype(DType::F16)?;
    let e = lin
        .forward(&x16)
        .expect_err("replaced parameters")
        .to_string();
    assert!(e.contains("parameters were replaced"), "{e}");
    // Buffers (BatchNorm's running statistics, updated from each rank's own batch) are rank
    // 0's again before every forward.
    let bn = DistributedDataParallel::new(wgtorch::nn::BatchNorm1d::new(4, dev)?)?;
    wgtorch::manual_seed(rank as u64 + 1);
    bn.forward(&Tensor::randn([6, 4], dev)?)?;
    let mean = bn.module().named_buffers()[0].1.clone();
    let before = dist::all_gather(&mean)?;
    assert_ne!(
        common::vals(&before[0]),
        common::vals(&before[1]),
        "the ranks' batches differ"
    );
    bn.pre_forward()?;
    for (r, m) in dist::all_gather(&mean)?.iter().enumerate() {
        assert_eq!(
            common::vals(m),
            common::vals(&before[0]),
            "running_mean on rank {r}"
        );
    }
    // A parameter the forward never used is reported at the next forward, by name.
    let m = DistributedDataParallel::new(Unused {
        used: Linear::new(4, 2, dev)?,
        unused: Linear::new(4, 2, dev)?,
    })?;
    let x = Tensor::ones([2, 4], dev)?;
    m.forward(&x)?.sum_all()?.backward()?;
    let e = m.forward(&x).expect_err("unused parameters").to_string();
    assert!(
        e.contains("unused.weight") && e.contains("unused.bias"),
        "{e}"
    );
    assert!(!e.contains("\"used.weight\""), "{e}");
    // The ranks' all-reduces may now be out of step: the module stays refused.
    let again = m.forward(&x).expect_err("still refused").to_string();
    assert_eq!(again, e);
    Ok(())
}
