//! The training stack against PyTorch: the SimpleCNN golden run (forward, gradients, three Adam
//! steps), every optimizer trajectory and LR schedule, a short digits run, and exact resume.

mod common;

use common::assert_close;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use wgtorch::data::{random_split, DataLoader, Dataset, Digits};
use wgtorch::io::Checkpoint;
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, ModuleExt};
use wgtorch::optim::{Adam, AdamW, LrScheduler, Optimizer, ParamGroup, RMSprop, Schedule, Sgd};
use wgtorch::{Device, Result, Tensor};

fn golden() -> PathBuf {
    std::env::var("WGTORCH_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"))
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn get<'a>(ts: &'a [(String, Tensor)], k: &str) -> &'a Tensor {
    &ts.iter()
        .find(|(n, _)| n == k)
        .unwrap_or_else(|| panic!("missing {k}"))
        .1
}

#[test]
fn simple_cnn_matches_pytorch_forward_backward_and_adam() -> Result<()> {
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(golden().join("simple_cnn.json")).unwrap())
            .unwrap();
    let tol = |k: &str| {
        (
            meta["tolerances"][k]["rtol"].as_f64().unwrap(),
            meta["tolerances"][k]["atol"].as_f64().unwrap(),
        )
    };
    // Eager, then with the forward pass through a compiled graph (training mode: the backward
    // pass and Adam as usual).
    for (dev, compiled) in common::devices()
        .into_iter()
        .flat_map(|d| [(d, false), (d, true)])
    {
        let ts = wgtorch::io::load(golden().join("simple_cnn.safetensors"), &dev)?;
        let mut model = SimpleCnn::new(&dev)?;
        let init: Vec<(String, Tensor)> = ts
            .iter()
            .filter_map(|(k, t)| k.strip_prefix("init.").map(|n| (n.to_string(), t.clone())))
            .collect();
        let report = model.load_state_dict(&init, true)?;
        assert!(report.missing_keys.is_empty() && report.unexpected_keys.is_empty());
        let (x, y) = (get(&ts, "input"), get(&ts, "target"));
        let mut opt = Adam::new(model.parameters(), meta["kwargs"]["lr"].as_f64().unwrap())?;
        let want_losses: Vec<f64> = meta["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let fast = wgtorch::compile_module(&model);
        let what = if compiled { " compiled" } else { "" };
        for (step, want) in want_losses.iter().enumerate() {
            let logits = if compiled {
                fast.forward(x)?
            } else {
                model.forward(x)?
            };
            if step == 0 {
                let (r, a) = tol("logits_step0");
                assert_close(
                    &format!("[{dev}{what}] logits_step0"),
                    &vals(&logits),
                    &vals(get(&ts, "logits_step0")),
                    r,
                    a,
                );
            }
            let loss = F::cross_entropy(&logits, y)?;
            let (r, a) = tol("losses");
            assert_close(
                &format!("[{dev}{what}] loss {step}"),
                &[loss.item()?],
                &[*want],
                r,
                a,
            );
            opt.zero_grad();
            loss.backward()?;
            if step == 0 {
                let (r, a) = tol("grad");
                for (n, p) in model.named_parameters() {
                    assert_close(
                        &format!("[{dev}{what}] grad.{n}"),
                        &vals(&p.grad().unwrap()),
                        &vals(get(&ts, &format!("grad.{n}"))),
                        r,
                        a,
                    );
                }
            }
            opt.step()?;
        }
        if compiled {
            let s = fast.stats();
            assert_eq!(
                (s.graphs, s.cache_hits, s.eager_calls),
                (1, 2, 0),
                "{}",
                fast.explain()
            );
        }
        let (r, a) = tol("final");
        for (n, p) in model.named_parameters() {
            assert_close(
                &format!("[{dev}{what}] final.{n}"),
                &vals(&p),
                &vals(get(&ts, &format!("final.{n}"))),
                r,
                a,
            );
        }
    }
    Ok(())
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    Tensor::from_f64(&data, shape, wgtorch::DType::F32, &Device::Cpu).unwrap()
}

#[test]
fn optimizers_follow_pytorch_trajectories() -> Result<()> {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(golden().join("optim.json")).unwrap())
            .unwrap();
    for dev in common::devices() {
        for case in doc["cases"].as_array().unwrap() {
            let kw = &case["kwargs"];
            let f = |k: &str, d: f64| kw[k].as_f64().unwrap_or(d);
            let params: Vec<Tensor> = case["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| tensor(p).to(&dev).unwrap().requires_grad_(true))
                .collect();
            let group = vec![ParamGroup::new(params.clone())];
            let betas = kw["betas"]
                .as_array()
                .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()))
                .unwrap_or((0.9, 0.999));
            let mut opt: Box<dyn Optimizer> = match case["optimizer"].as_str().unwrap() {
                "SGD" => Box::new(Sgd::with_options(
                    group,
                    wgtorch::optim::SgdOptions {
                        lr: f("lr", 0.0),
                        momentum: f("momentum", 0.0),
                        dampening: f("dampening", 0.0),
                        weight_decay: f("weight_decay", 0.0),
                        nesterov: kw["nesterov"].as_bool().unwrap_or(false),
                        ..Default::default()
                    },
                )?),
                "Adam" => Box::new(Adam::with_options(
                    group,
                    wgtorch::optim::AdamOptions {
                        lr: f("lr", 1e-3),
                        betas,
                        eps: f("eps", 1e-8),
                        weight_decay: f("weight_decay", 0.0),
                        amsgrad: kw["amsgrad"].as_bool().unwrap_or(false),
                        ..Default::default()
                    },
                )?),
                "AdamW" => Box::new(AdamW::with_options(
                    group,
                    wgtorch::optim::AdamWOptions {
                        lr: f("lr", 1e-3),
                        betas,
                        eps: f("eps", 1e-8),
                        weight_decay: f("weight_decay", 0.01),
                        amsgrad: kw["amsgrad"].as_bool().unwrap_or(false),
                        ..Default::default()
                    },
                )?),
                "RMSprop" => Box::new(RMSprop::with_options(
                    group,
                    wgtorch::optim::RMSpropOptions {
                        lr: f("lr", 1e-2),
                        alpha: f("alpha", 0.99),
                        eps: f("eps", 1e-8),
                        weight_decay: f("weight_decay", 0.0),
                        momentum: f("momentum", 0.0),
                        centered: kw["centered"].as_bool().unwrap_or(false),
                        ..Default::default()
                    },
                )?),
                o => panic!("unknown optimizer {o}"),
            };
            let (rtol, atol) = (
                case["rtol"].as_f64().unwrap(),
                case["atol"].as_f64().unwrap(),
            );
            let steps = case["grads"].as_array().unwrap();
            for (s, grads) in steps.iter().enumerate() {
                for (p, g) in params.iter().zip(grads.as_array().unwrap()) {
                    p.set_grad(Some(tensor(g).to(&dev)?));
                }
                opt.step()?;
                for (i, (p, e)) in params
                    .iter()
                    .zip(case["expected"][s].as_array().unwrap())
                    .enumerate()
                {
                    assert_close(
                        &format!("[{dev}] {} step {s} param {i}", case["name"]),
                        &vals(p),
                        &vals(&tensor(e)),
                        rtol,
                        atol.max(1e-6),
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn schedulers_follow_pytorch() -> Result<()> {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(golden().join("sched.json")).unwrap())
            .unwrap();
    for case in doc["cases"].as_array().unwrap() {
        let kw = &case["kwargs"];
        let f = |k: &str| kw[k].as_f64().unwrap();
        let u = |k: &str| kw[k].as_u64().unwrap() as usize;
        let schedule = match case["scheduler"].as_str().unwrap() {
            "StepLR" => Schedule::StepLR {
                step_size: u("step_size"),
                gamma: f("gamma"),
            },
            "MultiStepLR" => Schedule::MultiStepLR {
                milestones: kw["milestones"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_u64().unwrap() as usize)
                    .collect(),
                gamma: f("gamma"),
            },
            "ExponentialLR" => Schedule::ExponentialLR { gamma: f("gamma") },
            "CosineAnnealingLR" => Schedule::CosineAnnealingLR {
                t_max: u("T_max"),
                eta_min: kw["eta_min"].as_f64().unwrap_or(0.0),
            },
            "LinearLR" => Schedule::LinearLR {
                start_factor: f("start_factor"),
                end_factor: f("end_factor"),
                total_iters: u("total_iters"),
            },
            "OneCycleLR" => Schedule::one_cycle(f("max_lr"), u("total_steps")),
            o => panic!("unknown scheduler {o}"),
        };
        let w = Tensor::zeros([1], &Device::Cpu)?.requires_grad_(true);
        let mut opt = Sgd::new(vec![w], case["base_lr"].as_f64().unwrap())?;
        let mut s = LrScheduler::new(&opt, schedule)?;
        for (e, want) in case["lrs"].as_array().unwrap().iter().enumerate() {
            let got = opt.param_groups()[0].lr.get();
            assert!(
                (got - want.as_f64().unwrap()).abs() < 1e-9,
                "{} epoch {e}: {got} vs {want}",
                case["name"]
            );
            opt.step()?;
            s.step()?;
        }
    }
    // SequentialLR: warm up linearly for 2 epochs, then step decay restarted at the milestone.
    let w = Tensor::zeros([1], &Device::Cpu)?.requires_grad_(true);
    let opt = Sgd::new(vec![w], 1.0)?;
    let seq = Schedule::SequentialLR {
        schedules: vec![
            Schedule::LinearLR {
                start_factor: 0.5,
                end_factor: 1.0,
                total_iters: 2,
            },
            Schedule::StepLR {
                step_size: 1,
                gamma: 0.5,
            },
        ],
        milestones: vec![2],
    };
    let mut s = LrScheduler::new(&opt, seq)?;
    let mut lrs = vec![];
    for _ in 0..5 {
        lrs.push(opt.param_groups()[0].lr.get());
        s.step()?;
    }
    assert_eq!(lrs, vec![0.5, 0.75, 1.0, 0.5, 0.25]);
    Ok(())
}

#[test]
fn param_groups_clipping_and_accumulation() -> Result<()> {
    let w = Tensor::from_slice(&[1.0f32, 1.0], [2], &Device::Cpu)?.requires_grad_(true);
    let b = Tensor::from_slice(&[1.0f32], [1], &Device::Cpu)?.requires_grad_(true);
    let groups = vec![
        ParamGroup::new(vec![w.clone()]).weight_decay(0.5),
        ParamGroup::new(vec![b.clone()]).lr(1.0).weight_decay(0.0),
    ];
    let mut opt = Sgd::with_options(
        groups,
        wgtorch::optim::SgdOptions {
            lr: 0.1,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            ..Default::default()
        },
    )?;
    // Two backward calls accumulate before one step.
    for _ in 0..2 {
        w.sum_all()?.add(&b.sum_all()?)?.backward()?;
    }
    opt.step()?;
    assert_close(
        "w",
        &vals(&w),
        &[1.0 - 0.1 * (2.0 + 0.5), 1.0 - 0.1 * 2.5],
        1e-6,
        1e-7,
    );
    assert_close("b", &vals(&b), &[1.0 - 2.0], 1e-6, 1e-7);
    w.set_grad(Some(Tensor::from_slice(&[3.0f32, 4.0], [2], &Device::Cpu)?));
    let n = wgtorch::optim::clip_grad_norm_(std::slice::from_ref(&w), 1.0, 2.0)?.unwrap();
    assert_close("norm", &vals(&n), &[5.0], 1e-6, 1e-6);
    assert_close(
        "clipped",
        &vals(&w.grad().unwrap()),
        &[0.6, 0.8],
        1e-5,
        1e-6,
    );
    wgtorch::optim::clip_grad_value_(std::slice::from_ref(&w), 0.7)?;
    assert_close(
        "clamped",
        &vals(&w.grad().unwrap()),
        &[0.6, 0.7],
        1e-6,
        1e-7,
    );
    Ok(())
}

fn digits_split() -> (Arc<dyn Dataset>, Arc<dyn Dataset>) {
    let all: Arc<dyn Dataset> = Arc::new(Digits::load().unwrap());
    let (a, b) = random_split(all, 0.8, 0).unwrap();
    (Arc::new(a), Arc::new(b))
}

fn train_epochs(
    model: &SimpleCnn,
    opt: &mut dyn Optimizer,
    loader: &DataLoader,
    epochs: std::ops::Range<usize>,
) -> Result<()> {
    for e in epochs {
        for batch in loader.epoch(e) {
            let (x, y) = batch?;
            let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
        }
    }
    Ok(())
}

/// One epoch of the SimpleCNN on the CPU. On the GPU the same kernels are pinned to PyTorch's
/// numbers step by step above, and a digits run to accuracy is `tests/amp.rs`'s f32 run, with a
/// narrower CNN: a SimpleCNN epoch takes lavapipe 100 s on a 2-core machine.
#[test]
fn short_digits_run_reaches_90_percent() -> Result<()> {
    let _seed = common::seed_lock();
    let (train, test) = digits_split();
    let dev = Device::Cpu;
    wgtorch::manual_seed(0);
    let mut model = SimpleCnn::new(&dev)?;
    let mut opt = Adam::new(model.parameters(), 2e-3)?;
    let loader = DataLoader::new(train, 32, &dev)?.shuffle(0);
    train_epochs(&model, &mut opt, &loader, 0..1)?;
    model.eval();
    let _g = wgtorch::no_grad();
    let acc = common::accuracy(test, &dev, |x| model.forward(x))?;
    println!("digits accuracy after one epoch: {:.2}%", acc * 100.0);
    assert!(acc >= 0.90, "accuracy {acc}");
    Ok(())
}

#[test]
fn resume_from_checkpoint_is_bitwise_identical_on_cpu() -> Result<()> {
    let _seed = common::seed_lock();
    let (train, _) = digits_split();
    let small: Arc<dyn Dataset> = Arc::new(wgtorch::data::Subset {
        dataset: train,
        indices: (0..256).collect(),
    });
    let dev = Device::Cpu;
    let loader = DataLoader::new(small, 64, &dev)?.shuffle(5);
    // Uninterrupted: two epochs.
    wgtorch::manual_seed(1);
    let straight = SimpleCnn::new(&dev)?;
    let mut opt = Adam::new(straight.parameters(), 1e-3)?;
    train_epochs(&straight, &mut opt, &loader, 0..2)?;
    // Interrupted after one epoch, checkpointed, resumed in a fresh model and optimizer.
    wgtorch::manual_seed(1);
    let first = SimpleCnn::new(&dev)?;
    let mut opt1 = Adam::new(first.parameters(), 1e-3)?;
    train_epochs(&first, &mut opt1, &loader, 0..1)?;
    let path =
        std::env::temp_dir().join(format!("wgtorch-resume-{}.safetensors", std::process::id()));
    Checkpoint {
        model: first.state_dict(),
        optim: opt1.state_dict(),
        scheduler: vec![],
        epoch: 1,
        rng: wgtorch::with_default_generator(|g| g.state()),
        metrics: vec![],
    }
    .save(&path)?;
    let ck = Checkpoint::load(&path, &dev)?;
    std::fs::remove_file(&path).ok();
    wgtorch::manual_seed(99);
    let mut resumed = SimpleCnn::new(&dev)?;
    resumed.load_state_dict(&ck.model, true)?;
    let mut opt2 = Adam::new(resumed.parameters(), 1e-3)?;
    opt2.load_state_dict(&ck.optim)?;
    wgtorch::with_default_generator(|g| g.set_state(ck.rng));
    train_epochs(&resumed, &mut opt2, &loader, ck.epoch..2)?;
    for ((n, a), (_, b)) in straight
        .named_parameters()
        .iter()
        .zip(resumed.named_parameters())
    {
        assert_eq!(
            a.to_vec::<f32>()?,
            b.to_vec::<f32>()?,
            "{n} differs after resume"
        );
    }
    Ok(())
}

/// SGD's fused step (one kernel per dense f32 parameter: `optim/sgd.rs`, `shaders/sgd.wgsl`)
/// against its tensor ops, which a transposed parameter takes: the same bits on the CPU, within
/// f32 rounding on a GPU (whose compiler may contract `w - d·lr`), over three steps of each
/// option, the momentum buffer's first step and two more included. 130×131 elements: more than
/// one of the CPU's parallel chunks.
#[test]
fn sgd_fused_step_is_its_tensor_ops() -> Result<()> {
    use wgtorch::optim::SgdOptions;
    let (r, c) = (130, 131);
    let f = |i: usize, j: usize| ((i * 131 + j) * 7919 % 1009) as f32 / 1009.0 - 0.5;
    let rows: Vec<f32> = (0..r * c).map(|k| f(k / c, k % c)).collect();
    let cols: Vec<f32> = (0..r * c).map(|k| f(k % r, k / r)).collect();
    let shift: Vec<f32> = (0..r * c).map(|k| (k % 13) as f32 * 0.1 - 0.6).collect();
    let options = [
        (0.0, 0.0, false, 0.0, false),
        (0.0, 0.0, false, 0.01, true),
        (0.9, 0.0, false, 0.0, false),
        (0.9, 0.25, false, 0.01, false),
        (0.8, 0.0, true, 0.01, true),
    ];
    for dev in common::devices() {
        let k = Tensor::from_vec(shift.clone(), [r, c], &dev)?;
        for (momentum, dampening, nesterov, weight_decay, maximize) in options {
            let run = |transposed: bool| -> Result<Vec<f32>> {
                let p = if transposed {
                    Tensor::from_vec(cols.clone(), [c, r], &dev)?.t()?
                } else {
                    Tensor::from_vec(rows.clone(), [r, c], &dev)?
                }
                .requires_grad_(true);
                let o = SgdOptions {
                    lr: 0.1,
                    momentum,
                    dampening,
                    weight_decay,
                    nesterov,
                    maximize,
                };
                let mut opt = Sgd::with_options(vec![ParamGroup::new(vec![p.clone()])], o)?;
                for _ in 0..3 {
                    opt.zero_grad();
                    // d/dp = p + k
                    let l = p.square()?.mul_scalar(0.5)?.add(&p.mul(&k)?)?.sum_all()?;
                    l.backward()?;
                    opt.step()?;
                }
                p.contiguous()?.to_vec::<f32>()
            };
            let (fused, ops) = (run(false)?, run(true)?);
            if dev == Device::Cpu {
                // Which path each took: the ops' `sub` in each of the three steps, or none.
                let subs = |transposed: bool| -> Result<usize> {
                    let scope = format!("sgd_fused_step_is_its_tensor_ops {transposed}");
                    let prof = wgtorch::profiler::profile(Default::default(), |_| {
                        let _s = wgtorch::profiler::record_function(&scope);
                        run(transposed).map(|_| ())
                    })?;
                    let names = common::events_under(&prof, &scope);
                    Ok(names.iter().filter(|n| *n == "sub").count())
                };
                assert_eq!((subs(false)?, subs(true)?), (0, 3), "kernel, then ops");
            }
            let what = format!("{dev} momentum {momentum} dampening {dampening} nesterov {nesterov} wd {weight_decay} maximize {maximize}");
            assert_ne!(fused, rows, "{what}: the parameter moved");
            if dev == Device::Cpu {
                let differ = fused
                    .iter()
                    .zip(&ops)
                    .position(|(a, b)| a.to_bits() != b.to_bits());
                assert_eq!(differ, None, "{what}: first differing element");
            } else {
                let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
                assert_close(&what, &wide(&fused), &wide(&ops), 1e-6, 1e-6);
            }
        }
    }
    Ok(())
}

/// SGD's and Adam's fused kernels write their buffers in place: a `state_dict()` taken before a
/// step keeps its values, an optimizer that loaded it shares no buffer with the one it came from,
/// and with no snapshot held the buffers are not copied at each step.
#[test]
fn fused_optimizer_buffers_are_not_shared_with_state_dicts() -> Result<()> {
    use wgtorch::optim::{OptimState, SgdOptions};
    for dev in common::devices() {
        let make = |adam: bool| -> Result<(Tensor, Box<dyn Optimizer>)> {
            let v: Vec<f32> = (0..64).map(|i| i as f32 * 0.1 - 3.0).collect();
            let p = Tensor::from_vec(v, [8, 8], &dev)?.requires_grad_(true);
            let o: Box<dyn Optimizer> = if adam {
                Box::new(Adam::new(vec![p.clone()], 0.1)?)
            } else {
                let o = SgdOptions {
                    lr: 0.1,
                    momentum: 0.9,
                    ..Default::default()
                };
                Box::new(Sgd::with_options(
                    vec![ParamGroup::new(vec![p.clone()])],
                    o,
                )?)
            };
            Ok((p, o))
        };
        let step = |p: &Tensor, o: &mut Box<dyn Optimizer>| -> Result<()> {
            o.zero_grad();
            p.square()?.sum_all()?.backward()?;
            o.step()
        };
        let vals = |s: &OptimState| -> Result<Vec<Vec<f32>>> {
            s.tensors.iter().map(|(_, t)| t.to_vec::<f32>()).collect()
        };
        let ids = |o: &dyn Optimizer| -> Vec<u64> {
            o.state_dict().tensors.iter().map(|(_, t)| t.id()).collect()
        };
        for adam in [false, true] {
            let what = format!("{dev} {}", if adam { "Adam" } else { "SGD" });
            let (p, mut o) = make(adam)?;
            step(&p, &mut o)?;
            let snap = o.state_dict();
            let before = vals(&snap)?;
            assert!(!before.is_empty(), "{what}: buffers");
            let (_q, mut loaded) = make(adam)?;
            loaded.load_state_dict(&snap)?;
            step(&p, &mut o)?;
            assert_eq!(vals(&snap)?, before, "{what}: the snapshot");
            assert_eq!(
                vals(&loaded.state_dict())?,
                before,
                "{what}: the loaded optimizer"
            );
            assert_ne!(vals(&o.state_dict())?, before, "{what}: the buffers moved");
            drop(snap);
            let held = ids(&*o);
            step(&p, &mut o)?;
            assert_eq!(
                ids(&*o),
                held,
                "{what}: a step without a snapshot copies no buffer"
            );
        }
    }
    Ok(())
}
