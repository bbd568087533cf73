//! Loading files safely (`io::load`, `Checkpoint::load`, the optimizers' `load_state_dict`),
//! atomic saves that leave no temporaries, a bounded mutation fuzz of the loaders and a crash
//! test (a child process killed with SIGKILL mid-save, again and again).

use crate::common;
use std::path::{Path, PathBuf};
use wgtorch::io::{self, Checkpoint};
use wgtorch::nn::{Linear, ModuleExt};
use wgtorch::optim::{Adam, AdamW, OptimState, Optimizer, RMSprop, Sgd};
use wgtorch::{DType, Device, Error, Tensor};

/// A fresh, empty directory under the system temp dir for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgtorch-io-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// A safetensors file from a hand-written JSON header and its data section.
fn raw_safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

/// One tensor `t` of `dtype` holding `data`, shape `[data.len() / size]`.
fn one_tensor(dtype: &str, size: usize, data: &[u8]) -> Vec<u8> {
    let n = data.len() / size;
    raw_safetensors(
        &format!(
            r#"{{"t":{{"dtype":"{dtype}","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
            data.len()
        ),
        data,
    )
}

fn err_text<T: std::fmt::Debug>(r: wgtorch::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

fn load_bytes(bytes: &[u8], dev: &Device) -> wgtorch::Result<Vec<(String, Tensor)>> {
    Ok(io::from_safetensors_bytes(Path::new("mem"), bytes, dev)?.0)
}

// ---- defect 5: dtypes, checkpoint metadata, optimizer state ----

#[test]
fn load_int8_int16_sign_extended() -> wgtorch::Result<()> {
    for dev in common::devices() {
        let i8s: Vec<u8> = [-1i8, -128, 127, 0].iter().map(|&x| x as u8).collect();
        let t = &load_bytes(&one_tensor("I8", 1, &i8s), &dev)?[0].1;
        assert_eq!((t.dtype(), t.device()), (DType::I32, dev));
        assert_eq!(t.to_vec::<i32>()?, vec![-1, -128, 127, 0], "I8 on {dev}");
        let i16s: Vec<u8> = [-1i16, -32768, 32767]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = &load_bytes(&one_tensor("I16", 2, &i16s), &dev)?[0].1;
        assert_eq!(t.to_vec::<i32>()?, vec![-1, -32768, 32767], "I16 on {dev}");
        let u16s: Vec<u8> = [65535u16, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
        let t = &load_bytes(&one_tensor("U16", 2, &u16s), &dev)?[0].1;
        assert_eq!(t.to_vec::<i32>()?, vec![65535, 1], "U16 on {dev}");
        let t = &load_bytes(&one_tensor("U8", 1, &[255, 0]), &dev)?[0].1;
        assert_eq!(t.to_vec::<i32>()?, vec![255, 0], "U8 on {dev}");
    }
    Ok(())
}

#[test]
fn load_int64_uint32_never_wrap() -> wgtorch::Result<()> {
    for dev in common::devices() {
        // In range: exact values as int64 (PyTorch's labels and counters load as themselves).
        let ok: Vec<u8> = [-5i64, i32::MIN as i64, i32::MAX as i64]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = &load_bytes(&one_tensor("I64", 8, &ok), &dev)?[0].1;
        assert_eq!(t.dtype(), wgtorch::DType::I64);
        assert_eq!(
            t.to_vec::<i64>()?,
            vec![-5, i32::MIN as i64, i32::MAX as i64]
        );
        // Past int32: exact on the CPU; refused on a GPU (int64 held as int32), naming the value.
        let big: Vec<u8> = [1i64, 1 << 40]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let r = load_bytes(&one_tensor("I64", 8, &big), &dev);
        if dev.is_gpu() {
            let e = err_text(r);
            assert!(e.contains("1099511627776") && e.contains("int32"), "{e}");
        } else {
            assert_eq!(r?[0].1.to_vec::<i64>()?, vec![1, 1 << 40]);
        }
        // U32 loads as int64, exactly (4e9 fits int64; on a GPU it is past int32: refused).
        let u32s: Vec<u8> = [7u32, 4_000_000_000]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let r = load_bytes(&one_tensor("U32", 4, &u32s), &dev);
        if dev.is_gpu() {
            assert!(err_text(r).contains("4000000000"));
        } else {
            assert_eq!(r?[0].1.to_vec::<i64>()?, vec![7, 4_000_000_000]);
        }
        // U64 past int64: refused, naming the key, the dtype and the value.
        let u64s: Vec<u8> = u64::MAX.to_le_bytes().to_vec();
        let e = err_text(load_bytes(&one_tensor("U64", 8, &u64s), &dev));
        for want in ["tensor t", "U64", &u64::MAX.to_string(), "int64"] {
            assert!(e.contains(want), "{want:?} missing from: {e}");
        }
    }
    Ok(())
}

#[test]
fn load_f64_onto_gpu_is_refused_not_left_on_cpu() -> wgtorch::Result<()> {
    let data: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let bytes = one_tensor("F64", 8, &data);
    let dir = scratch("f64");
    let path = dir.join("f64.safetensors");
    std::fs::write(&path, &bytes).expect("write");
    for dev in common::devices() {
        let r = io::load(&path, &dev);
        if dev.is_gpu() {
            match r {
                Err(Error::DTypeNotOnDevice { dtype, device, .. }) => {
                    assert_eq!((dtype, device), (DType::F64, dev))
                }
                other => panic!("F64 onto {dev}: expected DTypeNotOnDevice, got {other:?}"),
            }
        } else {
            let t = &r?[0].1;
            assert_eq!((t.dtype(), t.device()), (DType::F64, Device::Cpu));
            assert_eq!(t.to_vec::<f64>()?, vec![1.5, -2.0]);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A valid checkpoint's bytes with one metadata entry replaced (or added).
fn checkpoint_with(key: &str, value: &str) -> Vec<u8> {
    let (tensors, mut meta) =
        io::from_safetensors_bytes(Path::new("mem"), &small_checkpoint_bytes(), &Device::Cpu)
            .expect("valid checkpoint");
    meta.insert(key.to_string(), value.to_string());
    io::to_safetensors_bytes(&tensors, Some(meta)).expect("serialize")
}

#[test]
fn checkpoint_negative_or_huge_epoch_is_refused() {
    let dir = scratch("epoch");
    let path = dir.join("ck.safetensors");
    for (key, value) in [
        ("epoch", "-5"),
        ("epoch", "1e300"),
        ("epoch", "2.5"),
        ("epoch", "NaN"),
        ("scheduler.last_epoch", "later"),
        ("rng", "1,2,3"),
        ("rng", "1,2,3,-4"),
        ("optim.lr.0", "fast"),
        ("metric.loss", "low"),
    ] {
        std::fs::write(&path, checkpoint_with(key, value)).expect("write");
        let e = err_text(Checkpoint::load(&path, &Device::Cpu));
        assert!(
            e.contains(key) && e.contains(value),
            "{key} = {value}: the error should name both: {e}"
        );
    }
    // Scheduler values are numbers here; the scheduler's own load_state_dict judges them.
    for bad in ["-1", "1e300", "2.5"] {
        std::fs::write(&path, checkpoint_with("scheduler.last_epoch", bad)).expect("write");
        let c = Checkpoint::load(&path, &Device::Cpu).expect("a number");
        let w = Tensor::zeros([1], &Device::Cpu).expect("w");
        let opt = wgtorch::optim::Sgd::new(vec![w], 0.1).expect("sgd");
        let sched = wgtorch::optim::Schedule::ExponentialLR { gamma: 0.5 };
        let mut s = wgtorch::optim::LrScheduler::new(&opt, sched).expect("sched");
        let e = err_text(s.load_state_dict(&c.scheduler));
        assert!(
            e.contains("last_epoch") && e.contains("not a count"),
            "{bad}: {e}"
        );
        assert_eq!(s.last_epoch, 0, "a refused state changes nothing");
    }
    std::fs::write(&path, checkpoint_with("epoch", "18446744073709551615")).expect("write");
    let c = Checkpoint::load(&path, &Device::Cpu).expect("u64::MAX is a valid epoch");
    assert_eq!(c.epoch as u64, u64::MAX);
    std::fs::remove_dir_all(&dir).ok();
}

/// Adam's update of one weight after `step` earlier steps: bias corrections in f64 as PyTorch.
fn adam_expected(w: f64, g: f64, step: u64, lr: f64) -> f64 {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
    let t = (step + 1) as f64;
    let (m, v) = ((1.0 - b1) * g, (1.0 - b2) * g * g);
    let (bc1, bc2) = (1.0 - b1.powf(t), 1.0 - b2.powf(t));
    w - lr / bc1 * m / (v.sqrt() / bc2.sqrt() + eps)
}

#[test]
fn adam_step_past_2_pow_31_stays_finite() -> wgtorch::Result<()> {
    for dev in common::devices() {
        for amsgrad in [false, true] {
            for step in [1u64, (1 << 31) - 1, 1 << 31, 1 << 40, 1 << 53] {
                let w = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], [3], &dev)?.requires_grad_(true);
                let mut opt = Adam::with_options(
                    vec![wgtorch::optim::ParamGroup::new(vec![w.clone()])],
                    wgtorch::optim::AdamOptions {
                        lr: 0.1,
                        betas: (0.9, 0.999),
                        eps: 1e-8,
                        weight_decay: 0.0,
                        amsgrad,
                        ..Default::default()
                    },
                )?;
                opt.load_state_dict(&OptimState {
                    tensors: vec![],
                    scalars: vec![("step.0.0".into(), step as f64)],
                })?;
                w.square()?.sum_all()?.backward()?;
                opt.step()?;
                let got = common::vals(&w);
                let want: Vec<f64> = [1.0, -2.0, 3.0]
                    .iter()
                    .map(|&x| adam_expected(x, 2.0 * x, step, 0.1))
                    .collect();
                common::assert_close(
                    &format!("Adam (amsgrad {amsgrad}) after step {step} on {dev}"),
                    &got,
                    &want,
                    1e-5,
                    1e-6,
                );
                let s = opt.state_dict();
                assert!(s.scalars.contains(&("step.0.0".into(), (step + 1) as f64)));
            }
        }
    }
    Ok(())
}

#[test]
fn adam_step_count_that_is_not_exact_is_refused_at_load() -> wgtorch::Result<()> {
    let w = Tensor::ones([2], &Device::Cpu)?.requires_grad_(true);
    let mut opt = Adam::new(vec![w], 0.1)?;
    for bad in [
        -1.0,
        0.5,
        f64::NAN,
        f64::INFINITY,
        2f64.powi(53) + 2.0,
        1e300,
    ] {
        let e = err_text(opt.load_state_dict(&OptimState {
            tensors: vec![],
            scalars: vec![("step.0.0".into(), bad)],
        }));
        assert!(e.contains("step.0.0"), "{bad}: {e}");
    }
    for bad in [-0.1, f64::NAN] {
        let e = err_text(opt.load_state_dict(&OptimState {
            tensors: vec![],
            scalars: vec![("lr.0".into(), bad)],
        }));
        assert!(e.contains("lr.0"), "{bad}: {e}");
    }
    for key in ["step.0.1", "step.1.0", "lr.1", "momentum.0", "step.x.0"] {
        let e = err_text(opt.load_state_dict(&OptimState {
            tensors: vec![],
            scalars: vec![(key.into(), 1.0)],
        }));
        assert!(e.contains(key), "{key}: {e}");
    }
    Ok(())
}

/// An optimizer and the names of its state buffers.
type WithBuffers = (Box<dyn Optimizer>, &'static [&'static str]);

/// Each optimizer with one parameter of shape [2, 3].
fn optimizers(dev: &Device) -> wgtorch::Result<Vec<WithBuffers>> {
    let p = || -> wgtorch::Result<Tensor> { Ok(Tensor::ones([2, 3], dev)?.requires_grad_(true)) };
    let g = |t: Tensor| vec![wgtorch::optim::ParamGroup::new(vec![t])];
    Ok(vec![
        (
            Box::new(Sgd::with_options(
                g(p()?),
                wgtorch::optim::SgdOptions {
                    lr: 0.1,
                    momentum: 0.9,
                    dampening: 0.0,
                    weight_decay: 0.0,
                    nesterov: false,
                    ..Default::default()
                },
            )?) as Box<dyn Optimizer>,
            &["momentum_buffer"][..],
        ),
        (
            Box::new(Adam::new(vec![p()?], 0.1)?),
            &["exp_avg", "exp_avg_sq", "max_exp_avg_sq"][..],
        ),
        (
            Box::new(AdamW::new(vec![p()?], 0.1)?),
            &["exp_avg", "exp_avg_sq"][..],
        ),
        (
            Box::new(RMSprop::with_options(
                g(p()?),
                wgtorch::optim::RMSpropOptions {
                    lr: 0.1,
                    alpha: 0.99,
                    eps: 1e-8,
                    weight_decay: 0.0,
                    momentum: 0.9,
                    centered: true,
                    ..Default::default()
                },
            )?),
            &["square_avg", "momentum_buffer", "grad_avg"][..],
        ),
    ])
}

#[test]
fn optimizer_state_of_wrong_shape_is_refused_at_load() -> wgtorch::Result<()> {
    for dev in common::devices() {
        for (mut opt, names) in optimizers(&dev)? {
            for name in names {
                let key = format!("0.0.{name}");
                for shape in [&[3, 2][..], &[6], &[2, 3, 1]] {
                    let e = err_text(opt.load_state_dict(&OptimState {
                        tensors: vec![(key.clone(), Tensor::zeros(shape, &dev)?)],
                        scalars: vec![],
                    }));
                    assert!(
                        e.contains(&key) && e.contains("[2, 3]"),
                        "{key} of shape {shape:?}: {e}"
                    );
                }
                // The right shape loads, on another device or dtype too (cast like PyTorch), and
                // a step then runs.
                let state = Tensor::zeros([2, 3], &Device::Cpu)?.to_dtype(DType::F64)?;
                opt.load_state_dict(&OptimState {
                    tensors: vec![(key.clone(), state)],
                    scalars: vec![],
                })?;
                let p = opt.param_groups()[0].params[0].clone();
                p.square()?.sum_all()?.backward()?;
                opt.step()?;
                assert!(!p.has_non_finite()?, "{key} on {dev}");
                opt.zero_grad();
            }
            // A bad key anywhere means nothing at all was loaded.
            let e = err_text(opt.load_state_dict(&OptimState {
                tensors: vec![
                    (format!("0.0.{}", names[0]), Tensor::zeros([2, 3], &dev)?),
                    ("0.0.bogus".into(), Tensor::zeros([2, 3], &dev)?),
                ],
                scalars: vec![],
            }));
            assert!(e.contains("0.0.bogus"), "{e}");
        }
    }
    Ok(())
}

#[test]
fn safetensors_overflowing_shape_is_refused() {
    for dev in common::devices() {
        for shape in [
            "[0, 1099511627776, 1099511627776]",
            "[1099511627776, 0, 1099511627776]",
            "[4294967296, 4294967296, 0]",
            "[0, 18446744073709551615]",
            "[18446744073709551615, 0]",
            "[0, 2305843009213693952]",
        ] {
            let header =
                format!(r#"{{"t":{{"dtype":"F32","shape":{shape},"data_offsets":[0,0]}}}}"#);
            let r = load_bytes(&raw_safetensors(&header, &[]), &dev);
            let e = err_text(r);
            assert!(e.contains("overflow"), "shape {shape} on {dev}: {e}");
        }
        // Zero elements with sane strides still load.
        let header = r#"{"t":{"dtype":"F32","shape":[0, 1048576, 4096],"data_offsets":[0,0]}}"#;
        let t = &load_bytes(&raw_safetensors(header, &[]), &dev).expect("empty tensor")[0].1;
        assert_eq!(t.shape(), &[0, 1048576, 4096]);
    }
}

// ---- defect 12: unbounded reads ----

#[cfg(unix)]
#[test]
fn load_dev_zero_and_urandom_is_refused() {
    for p in ["/dev/zero", "/dev/urandom", "/dev/null", "/tmp"] {
        if !Path::new(p).exists() {
            continue;
        }
        let t0 = std::time::Instant::now();
        let e = err_text(io::load(p, &Device::Cpu));
        assert!(
            e.contains(p) && e.contains("not a regular file"),
            "{p}: {e}"
        );
        let e = err_text(Checkpoint::load(p, &Device::Cpu));
        assert!(e.contains("not a regular file"), "{p}: {e}");
        assert!(t0.elapsed().as_secs() < 5, "{p} took {:?}", t0.elapsed());
    }
}

#[test]
fn header_length_past_the_end_of_the_file_is_refused() {
    let dir = scratch("hdr");
    let path = dir.join("h.safetensors");
    for (len, body) in [
        (u64::MAX, &b"{}"[..]),
        (1 << 40, b"{}"),
        (99_999_999, b"{}"),
        (3, b"{}"),
    ] {
        let mut bytes = len.to_le_bytes().to_vec();
        bytes.extend_from_slice(body);
        std::fs::write(&path, &bytes).expect("write");
        let e = err_text(io::load(&path, &Device::Cpu));
        assert!(e.contains("header"), "header length {len}: {e}");
    }
    for short in [&b""[..], b"\x01\x00"] {
        std::fs::write(&path, short).expect("write");
        let e = err_text(io::load(&path, &Device::Cpu));
        assert!(e.contains("bytes"), "{short:?}: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

// ---- defect 14: temporaries of interrupted saves ----

fn temporaries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    v.sort();
    v
}

/// (That a live writer's temporary is kept is the unit test `io::file::tests`: it holds the lock.)
#[test]
fn interrupted_saves_leave_no_temporaries() {
    let dir = scratch("stale");
    let path = dir.join("ck.safetensors");
    // Leftovers of killed writers (today's name and the old `.tmp<pid>` one), and another
    // checkpoint's temporary.
    for n in [
        ".ck.safetensors.tmp4242",
        ".ck.safetensors.tmp4242.0",
        ".ck.safetensors.tmp1.7",
    ] {
        std::fs::write(dir.join(n), vec![0u8; 1 << 16]).expect("write");
    }
    let other = ".ck.safetensors.tmp5.tmp6.0".to_string();
    std::fs::write(dir.join(&other), b"x").expect("write");
    io::write_atomic(&path, b"new").expect("save");
    assert_eq!(std::fs::read(&path).expect("read"), b"new");
    #[cfg(unix)]
    assert_eq!(
        temporaries(&dir),
        vec![other.clone()],
        "stale ones removed, others kept"
    );
    // A save that fails (the target is a non-empty directory) removes its own temporary.
    let sub = dir.join("sub");
    std::fs::create_dir_all(sub.join("x")).expect("mkdir");
    let before = temporaries(&dir);
    assert!(io::write_atomic(&sub, b"x").is_err());
    assert_eq!(temporaries(&dir), before);
    std::fs::remove_dir_all(&dir).ok();
}

// ---- the crash test ----

const CRASH_ENV: &str = "WGTORCH_IO_CRASH_CHILD";

/// A checkpoint whose every tensor holds `k`, with `epoch` k: a torn write cannot pass for valid.
fn checkpoint_numbered(k: usize) -> Checkpoint {
    let t = |n: usize| Tensor::full([n], k as f64, &Device::Cpu).expect("full");
    Checkpoint {
        model: vec![("w".into(), t(1 << 20)), ("b".into(), t(7))],
        epoch: k,
        ..Default::default()
    }
}

fn check_numbered(path: &Path) -> usize {
    let c = Checkpoint::load(path, &Device::Cpu).expect("the last checkpoint loads");
    for (n, t) in &c.model {
        let v = t.to_vec::<f32>().expect("read");
        assert!(
            v.iter().all(|&x| x == c.epoch as f32),
            "{n} of checkpoint {} is torn",
            c.epoch
        );
    }
    c.epoch
}

/// Not a test on its own: the body of the child process `sigkill_mid_save_...` starts, saving
/// checkpoints without end until it is killed. Without the variable set it returns at once.
#[test]
fn crash_child_saves_until_killed() {
    let Ok(path) = std::env::var(CRASH_ENV) else {
        return;
    };
    let start: usize = std::env::var("WGTORCH_IO_CRASH_START")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for k in start.. {
        checkpoint_numbered(k).save(&path).expect("save");
        println!("saved {k}");
    }
}

#[cfg(unix)]
#[test]
fn sigkill_mid_save_keeps_last_checkpoint_and_leaves_no_temporaries() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let dir = scratch("crash");
    let path = dir.join("ck.safetensors");
    checkpoint_numbered(0).save(&path).expect("first save");
    let exe = std::env::current_exe().expect("test binary");
    let mut last = 0;
    let mut leftovers = 0;
    for round in 0..10u64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "io_fuzz::crash_child_saves_until_killed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_ENV, &path)
            .env("WGTORCH_IO_CRASH_START", (last + 1).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child");
        // Let it finish one save or more, then kill it at a varying point in a later one.
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let saved = lines
            .find_map(|l| l.ok().filter(|l| l.starts_with("saved ")))
            .expect("the child saves");
        std::thread::sleep(std::time::Duration::from_micros(round * 1700 % 9000));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let k = check_numbered(&path);
        assert!(k > last, "round {round}: checkpoint {k} after {saved}");
        last = k;
        leftovers += temporaries(&dir).len();
        assert!(temporaries(&dir).len() <= 1, "{:?}", temporaries(&dir));
    }
    eprintln!("{leftovers} temporaries left by 10 kills, each removed by the next save");
    checkpoint_numbered(last + 1).save(&path).expect("save");
    assert_eq!(temporaries(&dir), Vec::<String>::new());
    assert_eq!(check_numbered(&path), last + 1);
    std::fs::remove_dir_all(&dir).ok();
}

// ---- the mutation fuzz ----

/// A small real checkpoint: a Linear layer, Adam state after one step, scheduler, metrics. The
/// same bytes every run: fixed weights, and the JSON header's keys sorted (metadata is a hash map).
fn small_checkpoint_bytes() -> Vec<u8> {
    let dev = Device::Cpu;
    let (mut model, mut opt) = model_and_optimizer(&dev);
    let fixed: Vec<(String, Tensor)> = model
        .state_dict()
        .into_iter()
        .map(|(k, t)| {
            let v: Vec<f32> = (0..t.numel()).map(|i| i as f32 / 8.0 - 0.3).collect();
            (k, Tensor::from_vec(v, t.shape(), &dev).expect("fixed"))
        })
        .collect();
    model.load_state_dict(&fixed, true).expect("load");
    let x = Tensor::ones([2, 3], &dev).expect("x");
    model
        .forward(&x)
        .and_then(|y| y.sum_all())
        .and_then(|l| l.backward())
        .expect("backward");
    opt.step().expect("step");
    let dir = scratch(&format!("seed{:?}", std::thread::current().id()));
    let path = dir.join("ck.safetensors");
    Checkpoint {
        model: model.state_dict(),
        optim: opt.state_dict(),
        scheduler: vec![("last_epoch".into(), 3.0)],
        epoch: 4,
        rng: [1, 2, 3, 4],
        metrics: vec![("loss".into(), 0.25)],
    }
    .save(&path)
    .expect("save");
    let b = std::fs::read(&path).expect("read");
    std::fs::remove_dir_all(&dir).ok();
    let n = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).expect("json");
    header.sort_all_objects();
    raw_safetensors(&header.to_string(), &b[8 + n..])
}

fn model_and_optimizer(dev: &Device) -> (Linear, Adam) {
    let model = Linear::new(3, 2, dev).expect("model");
    let opt = Adam::new(model.parameters(), 1e-3).expect("adam");
    (model, opt)
}

/// xorshift64*: a deterministic stream for the mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Replacements for numbers and names inside the JSON header.
const EDITS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-5",
    "7",
    "65535",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "1e300",
    "2.5",
    "NaN",
    "null",
    "\"\"",
    "[]",
    "{}",
    "F64",
    "I64",
    "I8",
    "U32",
    "U64",
    "BOOL",
    "F8_E4M3",
    "F4",
    "complex",
    "[0, 1099511627776, 1099511627776]",
    "[4294967296, 4294967296]",
    "\"data_offsets\"",
    "\"shape\"",
    "\"dtype\"",
    "\"__metadata__\"",
];

/// One mutation of a valid file.
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    let hlen = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as usize;
    match rng.below(6) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        1 => b.truncate(rng.below(b.len())),
        2 => {
            let n = match rng.below(4) {
                0 => rng.next(),
                1 => hlen as u64 + rng.below(64) as u64,
                2 => (hlen as u64).wrapping_sub(rng.below(64) as u64),
                _ => b.len() as u64 + rng.below(3) as u64 - 1,
            };
            b[..8].copy_from_slice(&n.to_le_bytes());
        }
        3 => b.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
        _ => {
            // Replace a token of the JSON header (a run of digits, letters or a quoted string)
            // and fix the header length, so the edit reaches the loaders' own checks.
            let header = String::from_utf8_lossy(&b[8..8 + hlen]).into_owned();
            let mut h = header.clone();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(h.len());
                let is_tok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
                let start = h[..at].rfind(|c: char| !is_tok(c)).map_or(0, |i| i + 1);
                let end = h[at..]
                    .find(|c: char| !is_tok(c))
                    .map_or(h.len(), |i| at + i);
                if h.is_char_boundary(start) && h.is_char_boundary(end) {
                    h.replace_range(start..end, rng.pick(EDITS));
                }
            }
            let mut out = (h.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(&b[8 + hlen..]);
            b = out;
        }
    }
    b
}

/// Whatever loaded must be consistent: every tensor's data as long as its shape says.
fn check_tensors(what: &str, ts: &[(String, Tensor)]) {
    for (k, t) in ts {
        let n = t.to_f64_vec().map(|v| v.len());
        let numel: usize = t.shape().iter().product();
        assert_eq!(n.ok(), Some(numel), "{what}: tensor {k} {:?}", t.shape());
    }
}

/// Returns whether the bytes still loaded as a checkpoint.
fn fuzz_one(bytes: &[u8], path: &Path, dev: &Device, what: &str) -> bool {
    if let Ok((ts, _)) = io::from_safetensors_bytes(path, bytes, dev) {
        check_tensors(what, &ts);
    }
    // Unlink first: ext4 flushes a file truncated and rewritten in place (auto_da_alloc).
    let _ = std::fs::remove_file(path);
    std::fs::write(path, bytes).expect("write");
    if let Ok(ts) = io::load(path, dev) {
        check_tensors(what, &ts);
    }
    let Ok(c) = Checkpoint::load(path, dev) else {
        return false;
    };
    check_tensors(what, &c.model);
    check_tensors(what, &c.optim.tensors);
    let (mut model, mut opt) = model_and_optimizer(dev);
    let _ = model.load_state_dict(&c.model, false);
    if opt.load_state_dict(&c.optim).is_ok() {
        // State accepted at load must not fail later.
        let p = model.parameters();
        for p in &p {
            p.set_grad(Some(Tensor::ones(p.shape(), dev).expect("grad")));
        }
        opt.step()
            .unwrap_or_else(|e| panic!("{what}: state accepted at load fails in step(): {e}"));
    }
    true
}

/// Fails the whole run if the counter stops moving for `limit`: a hang is reported, naming the
/// mutation, rather than waiting for a CI timeout.
struct Watchdog {
    progress: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    fn start(what: &'static str, limit: std::time::Duration) -> Watchdog {
        use std::sync::atomic::Ordering::Relaxed;
        let w = Watchdog {
            progress: Default::default(),
            done: Default::default(),
        };
        let (progress, done) = (w.progress.clone(), w.done.clone());
        std::thread::spawn(move || {
            let (mut last, mut since) = (usize::MAX, std::time::Instant::now());
            while !done.load(Relaxed) {
                let now = progress.load(Relaxed);
                if now != last {
                    (last, since) = (now, std::time::Instant::now());
                } else if since.elapsed() > limit {
                    eprintln!("{what}: step {now} hung for {limit:?}");
                    std::process::exit(1);
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        w
    }
    fn tick(&self) {
        self.progress
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Deterministic mutations of a real checkpoint through every loader: no panic, no hang, no
/// tensor whose data disagrees with its shape. For long runs, `WGTORCH_FUZZ_ITERS` sets the count
/// (CPU; the GPU runs a quarter) and `WGTORCH_FUZZ_SEED` the stream.
#[test]
fn fuzz_loaders_with_mutated_checkpoints() {
    let iters = common::env_number("WGTORCH_FUZZ_ITERS", 5000) as usize;
    let stream = common::env_number("WGTORCH_FUZZ_SEED", 0x9e37_79b9_7f4a_7c15).max(1);
    let dir = scratch("fuzz");
    let path = dir.join("f.safetensors");
    let seed = small_checkpoint_bytes();
    std::fs::write(&path, &seed).expect("write");
    Checkpoint::load(&path, &Device::Cpu).expect("the unmutated checkpoint loads");
    let t0 = std::time::Instant::now();
    let watchdog = Watchdog::start("fuzz", std::time::Duration::from_secs(60));
    let mut loaded = Vec::new();
    for dev in common::devices() {
        let mut rng = Rng(stream);
        let n = if dev.is_gpu() { iters / 4 } else { iters };
        let t = std::time::Instant::now();
        let ok = (0..n)
            .filter(|i| {
                watchdog.tick();
                let b = mutate(&mut rng, &seed);
                fuzz_one(
                    &b,
                    &path,
                    &dev,
                    &format!("mutation {i} (seed {stream}) on {dev}"),
                )
            })
            .count();
        loaded.push(format!("{ok} of {n} on {dev} in {:?}", t.elapsed()));
    }
    eprintln!(
        "fuzz: {iters} mutations in {:?}; checkpoints still loading: {loaded:?}",
        t0.elapsed()
    );
    std::fs::remove_dir_all(&dir).ok();
}
