//! The optimizers and schedulers beyond ../shared/golden (Adadelta, Adagrad, Adamax, NAdam,
//! RAdam, LBFGS, SGD's nesterov/dampening, `maximize` everywhere; ReduceLROnPlateau, CosineAnnealingWarmRestarts) against
//! PyTorch's trajectories in tests/golden/{optim,sched}/, on the CPU and the GPU; PyTorch's
//! argument checks; state_dict round trips; `scheduler.step()` without the optimizer.

mod common;

use common::{assert_close, vals};
use serde_json::Value;
use wgtorch::optim::*;
use wgtorch::{DType, Device, Result, Tensor};

fn doc(rel: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(rel);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn tensor(v: &Value, dev: &Device) -> Tensor {
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
    Tensor::from_f64(&data, shape, DType::F32, dev).unwrap()
}

/// The optimizer a golden case names, over `params`.
fn build(case: &Value, params: Vec<Tensor>) -> Result<Box<dyn Optimizer>> {
    let kw = &case["kwargs"];
    let f = |k: &str, d: f64| kw[k].as_f64().unwrap_or(d);
    let b = |k: &str| kw[k].as_bool().unwrap_or(false);
    let betas = kw["betas"]
        .as_array()
        .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()))
        .unwrap_or((0.9, 0.999));
    let g = vec![ParamGroup::new(params)];
    Ok(match case["optimizer"].as_str().unwrap() {
        "Adadelta" => Box::new(Adadelta::with_options(
            g,
            AdadeltaOptions {
                lr: f("lr", 1.0),
                rho: f("rho", 0.9),
                eps: f("eps", 1e-6),
                weight_decay: f("weight_decay", 0.0),
                maximize: b("maximize"),
            },
        )?),
        "Adagrad" => Box::new(Adagrad::with_options(
            g,
            AdagradOptions {
                lr: f("lr", 1e-2),
                lr_decay: f("lr_decay", 0.0),
                weight_decay: f("weight_decay", 0.0),
                initial_accumulator_value: f("initial_accumulator_value", 0.0),
                eps: f("eps", 1e-10),
                maximize: b("maximize"),
            },
        )?),
        "Adamax" => Box::new(Adamax::with_options(
            g,
            AdamaxOptions {
                lr: f("lr", 2e-3),
                betas,
                eps: f("eps", 1e-8),
                weight_decay: f("weight_decay", 0.0),
                maximize: b("maximize"),
            },
        )?),
        "NAdam" => Box::new(NAdam::with_options(
            g,
            NAdamOptions {
                lr: f("lr", 2e-3),
                betas,
                eps: f("eps", 1e-8),
                weight_decay: f("weight_decay", 0.0),
                momentum_decay: f("momentum_decay", 4e-3),
                decoupled_weight_decay: b("decoupled_weight_decay"),
                maximize: b("maximize"),
            },
        )?),
        "RAdam" => Box::new(RAdam::with_options(
            g,
            RAdamOptions {
                lr: f("lr", 1e-3),
                betas,
                eps: f("eps", 1e-8),
                weight_decay: f("weight_decay", 0.0),
                decoupled_weight_decay: b("decoupled_weight_decay"),
                maximize: b("maximize"),
            },
        )?),
        "SGD" => {
            let mut o = Sgd::with_options(
                g,
                wgtorch::optim::SgdOptions {
                    lr: f("lr", 1e-3),
                    momentum: f("momentum", 0.0),
                    dampening: f("dampening", 0.0),
                    weight_decay: f("weight_decay", 0.0),
                    nesterov: b("nesterov"),
                    ..Default::default()
                },
            )?;
            o.maximize = b("maximize");
            Box::new(o)
        }
        "Adam" | "AdamW" => {
            let o = AdamOptions {
                lr: f("lr", 1e-3),
                betas,
                eps: f("eps", 1e-8),
                weight_decay: f("weight_decay", 0.0),
                amsgrad: b("amsgrad"),
                maximize: b("maximize"),
            };
            Box::new(if case["optimizer"] == "AdamW" {
                let wd = f("weight_decay", 0.01);
                AdamW::with_options(
                    g,
                    AdamWOptions {
                        weight_decay: wd,
                        ..o.into()
                    },
                )?
            } else {
                Adam::with_options(g, o)?
            })
        }
        "RMSprop" => {
            let mut o = RMSprop::with_options(
                g,
                wgtorch::optim::RMSpropOptions {
                    lr: f("lr", 1e-2),
                    alpha: f("alpha", 0.99),
                    eps: f("eps", 1e-8),
                    weight_decay: f("weight_decay", 0.0),
                    momentum: f("momentum", 0.0),
                    centered: b("centered"),
                    ..Default::default()
                },
            )?;
            o.maximize = b("maximize");
            Box::new(o)
        }
        o => panic!("unknown optimizer {o}"),
    })
}

#[test]
fn new_optimizers_follow_pytorch_trajectories() -> Result<()> {
    let doc = doc("optim/optim.json");
    for dev in common::devices() {
        for case in doc["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let params: Vec<Tensor> = case["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| tensor(p, &dev).requires_grad_(true))
                .collect();
            let mut opt = build(case, params.clone())?;
            let (rtol, atol) = (
                case["rtol"].as_f64().unwrap(),
                case["atol"].as_f64().unwrap(),
            );
            for (s, grads) in case["grads"].as_array().unwrap().iter().enumerate() {
                for (p, g) in params.iter().zip(grads.as_array().unwrap()) {
                    p.set_grad(Some(tensor(g, &dev)));
                }
                opt.step()?;
                for (i, (p, e)) in params
                    .iter()
                    .zip(case["expected"][s].as_array().unwrap())
                    .enumerate()
                {
                    assert_close(
                        &format!("[{dev}] {name} step {s} param {i}"),
                        &vals(p),
                        &vals(&tensor(e, &Device::Cpu)),
                        rtol,
                        atol,
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn optimizer_state_dict_resumes_exactly() -> Result<()> {
    // Three steps straight vs. two steps, state_dict into a fresh optimizer, one more step.
    let doc = doc("optim/optim.json");
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let dev = Device::Cpu;
        let init = || -> Vec<Tensor> {
            case["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| tensor(p, &dev).requires_grad_(true))
                .collect()
        };
        let grads = case["grads"].as_array().unwrap();
        let run = |opt: &mut dyn Optimizer, ps: &[Tensor], steps: std::ops::Range<usize>| {
            for s in steps {
                for (p, g) in ps.iter().zip(grads[s].as_array().unwrap()) {
                    p.set_grad(Some(tensor(g, &dev)));
                }
                opt.step().unwrap();
            }
        };
        let a = init();
        let mut oa = build(case, a.clone())?;
        run(oa.as_mut(), &a, 0..3);
        let b = init();
        let mut ob = build(case, b.clone())?;
        run(ob.as_mut(), &b, 0..2);
        let state = ob.state_dict();
        let c: Vec<Tensor> = b.iter().map(|p| p.detach().requires_grad_(true)).collect();
        let mut oc = build(case, c.clone())?;
        oc.load_state_dict(&state)?;
        run(oc.as_mut(), &c, 2..3);
        for (x, y) in a.iter().zip(&c) {
            assert_eq!(vals(x), vals(y), "{name} differs after resume");
        }
    }
    Ok(())
}

#[test]
fn optimizers_check_arguments_with_pytorch_messages() {
    let w = || {
        vec![Tensor::zeros([2], &Device::Cpu)
            .unwrap()
            .requires_grad_(true)]
    };
    let g = || vec![ParamGroup::new(w())];
    let cases: Vec<(Result<()>, &str)> = vec![
        (
            Adadelta::new(w(), -1.0).map(|_| ()),
            "Invalid learning rate: -1",
        ),
        (
            Adadelta::with_options(
                g(),
                AdadeltaOptions {
                    rho: 1.5,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid rho value: 1.5",
        ),
        (
            Adadelta::with_options(
                g(),
                AdadeltaOptions {
                    eps: -1.0,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid epsilon value: -1",
        ),
        (
            Adagrad::with_options(
                g(),
                AdagradOptions {
                    lr_decay: -0.1,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid lr_decay value: -0.1",
        ),
        (
            Adagrad::with_options(
                g(),
                AdagradOptions {
                    initial_accumulator_value: -1.0,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid initial_accumulator_value value: -1",
        ),
        (
            Adamax::with_options(
                g(),
                AdamaxOptions {
                    betas: (1.0, 0.9),
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid beta parameter at index 0: 1",
        ),
        (
            NAdam::with_options(
                g(),
                NAdamOptions {
                    betas: (0.9, -0.1),
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid beta parameter at index 1: -0.1",
        ),
        (
            NAdam::with_options(
                g(),
                NAdamOptions {
                    momentum_decay: -1.0,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid momentum_decay value: -1",
        ),
        (
            RAdam::with_options(
                g(),
                RAdamOptions {
                    weight_decay: -1.0,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid weight_decay value: -1",
        ),
        (
            RAdam::new(w(), f64::NAN).map(|_| ()),
            "Invalid learning rate: NaN",
        ),
        (
            Sgd::with_options(
                g(),
                wgtorch::optim::SgdOptions {
                    lr: 0.1,
                    momentum: 0.0,
                    dampening: 0.0,
                    weight_decay: 0.0,
                    nesterov: true,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Nesterov momentum requires a momentum and zero dampening",
        ),
        (
            Sgd::with_options(
                g(),
                wgtorch::optim::SgdOptions {
                    lr: 0.1,
                    momentum: 0.9,
                    dampening: 0.1,
                    weight_decay: 0.0,
                    nesterov: true,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Nesterov momentum requires a momentum and zero dampening",
        ),
        (
            Sgd::with_options(
                g(),
                wgtorch::optim::SgdOptions {
                    lr: 0.1,
                    momentum: -0.9,
                    dampening: 0.0,
                    weight_decay: 0.0,
                    nesterov: false,
                    ..Default::default()
                },
            )
            .map(|_| ()),
            "Invalid momentum value: -0.9",
        ),
    ];
    for (i, (r, want)) in cases.into_iter().enumerate() {
        let e = r.expect_err(want).to_string();
        assert!(e.contains(want), "case {i}: {e}");
    }
    // A state of the wrong shape is refused naming the key, and changes nothing.
    let p = w();
    let mut opt = Adagrad::new(p.clone(), 0.1).unwrap();
    let bad = OptimState {
        tensors: vec![("0.0.sum".into(), Tensor::zeros([3], &Device::Cpu).unwrap())],
        scalars: vec![],
    };
    let e = opt.load_state_dict(&bad).unwrap_err().to_string();
    assert!(e.contains("0.0.sum") && e.contains("shape"), "{e}");
}

#[test]
fn schedulers_follow_pytorch_without_the_optimizer_at_step() -> Result<()> {
    let doc = doc("sched/sched.json");
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let kw = &case["kwargs"];
        let base: Vec<f64> = case["base_lrs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let groups = base
            .iter()
            .map(|&lr| {
                ParamGroup::new(vec![Tensor::zeros([1], &Device::Cpu)
                    .unwrap()
                    .requires_grad_(true)])
                .lr(lr)
            })
            .collect();
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
        enum Sched {
            Closed(LrScheduler),
            Plateau(ReduceLROnPlateau),
        }
        let mut sched = match case["scheduler"].as_str().unwrap() {
            "CosineAnnealingWarmRestarts" => Sched::Closed(LrScheduler::new(
                &opt,
                Schedule::CosineAnnealingWarmRestarts {
                    t_0: kw["T_0"].as_u64().unwrap() as usize,
                    t_mult: kw["T_mult"].as_u64().unwrap_or(1) as usize,
                    eta_min: kw["eta_min"].as_f64().unwrap_or(0.0),
                },
            )?),
            "ReduceLROnPlateau" => {
                let min = &kw["min_lr"];
                let o = ReduceLROnPlateauOptions {
                    mode: match kw["mode"].as_str() {
                        Some("max") => PlateauMode::Max,
                        _ => PlateauMode::Min,
                    },
                    factor: kw["factor"].as_f64().unwrap_or(0.1),
                    patience: kw["patience"].as_u64().unwrap_or(10) as usize,
                    threshold: kw["threshold"].as_f64().unwrap_or(1e-4),
                    threshold_mode: match kw["threshold_mode"].as_str() {
                        Some("abs") => ThresholdMode::Abs,
                        _ => ThresholdMode::Rel,
                    },
                    cooldown: kw["cooldown"].as_u64().unwrap_or(0) as usize,
                    min_lr: min.as_f64().unwrap_or(0.0),
                    min_lrs: min
                        .as_array()
                        .map(|a| a.iter().map(|v| v.as_f64().unwrap()).collect())
                        .unwrap_or_default(),
                    eps: kw["eps"].as_f64().unwrap_or(1e-8),
                };
                Sched::Plateau(ReduceLROnPlateau::with_options(&opt, o)?)
            }
            o => panic!("unknown scheduler {o}"),
        };
        for (e, want) in case["lrs"].as_array().unwrap().iter().enumerate() {
            for (gi, w) in want.as_array().unwrap().iter().enumerate() {
                let got = opt.param_groups()[gi].lr.get();
                let w = w.as_f64().unwrap();
                assert!(
                    (got - w).abs() <= 1e-12 * w.abs().max(1e-3),
                    "{name} epoch {e} group {gi}: {got} vs {w}"
                );
            }
            opt.step()?;
            match &mut sched {
                Sched::Closed(s) => s.step()?,
                Sched::Plateau(s) => s.step(case["metrics"][e].as_f64().unwrap()),
            }
        }
    }
    Ok(())
}

#[test]
fn scheduler_state_dicts_resume_and_check() -> Result<()> {
    let w = || {
        vec![Tensor::zeros([1], &Device::Cpu)
            .unwrap()
            .requires_grad_(true)]
    };
    // Closed form: resume at epoch 7 of a warm-restart schedule.
    let sch = Schedule::CosineAnnealingWarmRestarts {
        t_0: 2,
        t_mult: 2,
        eta_min: 0.0,
    };
    let a = Sgd::new(w(), 0.1)?;
    let mut sa = LrScheduler::new(&a, sch.clone())?;
    for _ in 0..7 {
        sa.step()?;
    }
    let b = Sgd::new(w(), 0.1)?;
    let mut sb = LrScheduler::new(&b, sch)?;
    sb.load_state_dict(&sa.state_dict())?;
    assert_eq!(b.param_groups()[0].lr.get(), a.param_groups()[0].lr.get());
    sa.step()?;
    sb.step()?;
    assert_eq!(b.param_groups()[0].lr.get(), a.param_groups()[0].lr.get());
    let e = sb
        .load_state_dict(&[("last_epoch".into(), -1.0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("last_epoch"), "{e}");
    // Plateau: the counters carry over; the rate lives in the optimizer's state.
    let a = Sgd::new(w(), 1.0)?;
    let o = ReduceLROnPlateauOptions {
        patience: 2,
        ..Default::default()
    };
    let mut pa = ReduceLROnPlateau::with_options(&a, o.clone())?;
    for m in [1.0, 1.0, 1.0] {
        pa.step(m);
    }
    let mut b = Sgd::new(w(), 1.0)?;
    b.load_state_dict(&a.state_dict())?;
    let mut pb = ReduceLROnPlateau::with_options(&b, o)?;
    pb.load_state_dict(&pa.state_dict())?;
    pa.step(1.0);
    pb.step(1.0);
    assert!((a.param_groups()[0].lr.get() - 0.1).abs() < 1e-12);
    assert_eq!(b.param_groups()[0].lr.get(), a.param_groups()[0].lr.get());
    let e = pb
        .load_state_dict(&[("nope".into(), 1.0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unexpected scheduler state key nope"), "{e}");
    // PyTorch's argument checks.
    let o = ReduceLROnPlateauOptions {
        factor: 1.0,
        ..Default::default()
    };
    let e = ReduceLROnPlateau::with_options(&a, o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Factor should be < 1.0."), "{e}");
    let o = ReduceLROnPlateauOptions {
        min_lrs: vec![0.0, 0.0],
        ..Default::default()
    };
    let e = ReduceLROnPlateau::with_options(&a, o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected 1 min_lrs, got 2"), "{e}");
    let e = LrScheduler::new(
        &a,
        Schedule::CosineAnnealingWarmRestarts {
            t_0: 0,
            t_mult: 1,
            eta_min: 0.0,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("Expected positive integer T_0, but got 0"),
        "{e}"
    );
    let e = LrScheduler::new(
        &a,
        Schedule::CosineAnnealingWarmRestarts {
            t_0: 1,
            t_mult: 0,
            eta_min: 0.0,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("Expected integer T_mult >= 1, but got 0"), "{e}");
    // Values PyTorch refuses (or divides by zero on), refused before any rate is touched, also
    // inside a SequentialLR.
    let lr0 = a.param_groups()[0].lr.get();
    let linear = |start_factor, end_factor| Schedule::LinearLR {
        start_factor,
        end_factor,
        total_iters: 3,
    };
    let one_cycle = |total_steps, pct_start| Schedule::OneCycleLR {
        max_lr: 0.1,
        total_steps,
        pct_start,
        div_factor: 25.0,
        final_div_factor: 1e4,
    };
    let cases = [
        (
            Schedule::StepLR {
                step_size: 0,
                gamma: 0.1,
            },
            "step_size must be a positive integer, but got 0",
        ),
        (
            Schedule::CosineAnnealingLR {
                t_max: 0,
                eta_min: 0.0,
            },
            "T_max must be a positive integer, but got 0",
        ),
        (linear(0.0, 1.0), "Starting multiplicative factor expected"),
        (linear(1.5, 1.0), "Starting multiplicative factor expected"),
        (
            linear(f64::NAN, 1.0),
            "Starting multiplicative factor expected",
        ),
        (linear(0.5, -0.1), "Ending multiplicative factor expected"),
        (one_cycle(0, 0.3), "Expected positive integer total_steps"),
        (
            one_cycle(10, 1.5),
            "Expected float between 0 and 1 pct_start",
        ),
        (one_cycle(10, 0.1), "leaves a warm-up of zero steps"),
        (
            Schedule::SequentialLR {
                schedules: vec![linear(0.5, 1.0), linear(1.0, 2.0)],
                milestones: vec![2],
            },
            "Ending multiplicative factor expected",
        ),
        (
            Schedule::SequentialLR {
                schedules: vec![linear(0.5, 1.0), linear(0.5, 1.0), linear(0.5, 1.0)],
                milestones: vec![4, 2],
            },
            "milestones must be ascending",
        ),
    ];
    for (schedule, want) in cases {
        let e = LrScheduler::new(&a, schedule.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{schedule:?}: {e}");
        assert_eq!(
            a.param_groups()[0].lr.get(),
            lr0,
            "{schedule:?} changed the rate"
        );
    }
    Ok(())
}

#[test]
fn one_cycle_refuses_to_step_past_its_total() -> Result<()> {
    let w = Tensor::zeros([1], &Device::Cpu)?.requires_grad_(true);
    let opt = Sgd::new(vec![w], 1.0)?;
    let mut s = LrScheduler::new(&opt, Schedule::one_cycle(0.1, 4))?;
    for _ in 0..4 {
        s.step()?; // PyTorch allows last_epoch == total_steps
    }
    let lr = opt.param_groups()[0].lr.get();
    let e = s.step().unwrap_err().to_string();
    assert!(
        e.contains("Tried to step 5 times. The specified number of total steps is 4"),
        "{e}"
    );
    // The failed step changed nothing.
    assert_eq!((s.last_epoch, opt.param_groups()[0].lr.get()), (4, lr));
    let mut state = s.state_dict();
    state.iter_mut().find(|(k, _)| k == "last_epoch").unwrap().1 = 9.0;
    assert!(s.load_state_dict(&state).is_err());
    assert_eq!(s.last_epoch, 4);
    Ok(())
}

#[test]
fn step_closure_evaluates_once_then_steps() -> Result<()> {
    for dev in common::devices() {
        let w = Tensor::from_slice(&[1.0f32, -2.0], [2], &dev)?.requires_grad_(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.25)?;
        let mut calls = 0;
        let loss = {
            let _ng = wgtorch::no_grad(); // the closure runs with grad enabled regardless
            opt.step_closure(&mut || {
                calls += 1;
                w.set_grad(None);
                let l = w.square()?.sum_all()?;
                l.backward()?;
                Ok(l)
            })?
        };
        assert_eq!(calls, 1);
        assert_eq!(loss.item()?, 5.0);
        assert_eq!(w.to_vec::<f32>()?, vec![0.5, -1.0]);
    }
    Ok(())
}

#[test]
fn lbfgs_follows_pytorch_with_and_without_line_search() -> Result<()> {
    let doc = doc("optim/lbfgs.json");
    for dev in common::devices() {
        for case in doc["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let kw = &case["kwargs"];
            let (x, y) = (tensor(&case["x"], &dev), tensor(&case["y"], &dev));
            let params: Vec<Tensor> = case["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| tensor(p, &dev).requires_grad_(true))
                .collect();
            let (w, b) = (params[0].clone(), params[1].clone());
            let maximize = kw["maximize"].as_bool().unwrap_or(false);
            let o = LBFGSOptions {
                lr: kw["lr"].as_f64().unwrap_or(1.0),
                max_iter: kw["max_iter"].as_u64().unwrap_or(20) as usize,
                history_size: kw["history_size"].as_u64().unwrap_or(100) as usize,
                line_search_fn: kw["line_search_fn"]
                    .as_str()
                    .map(|_| LineSearch::StrongWolfe),
                maximize,
                ..Default::default()
            };
            let mut opt = LBFGS::with_options(params.clone(), o)?;
            let sign = if maximize { -1.0 } else { 1.0 };
            let (rtol, atol) = (
                case["rtol"].as_f64().unwrap(),
                case["atol"].as_f64().unwrap(),
            );
            for (s, want) in case["losses"].as_array().unwrap().iter().enumerate() {
                let mut closure = || -> Result<Tensor> {
                    w.set_grad(None);
                    b.set_grad(None);
                    let r = x.matmul(&w)?.add(&b)?.sub(&y)?;
                    let l = r
                        .square()?
                        .mean_all()?
                        .add(&w.pow_scalar(4.0)?.sum_all()?.mul_scalar(0.1)?)?;
                    let l = l.mul_scalar(sign)?;
                    l.backward()?;
                    Ok(l)
                };
                let loss = opt.step_closure(&mut closure)?;
                let what = format!("[{dev}] {name} step {s}");
                assert_close(
                    &format!("{what} loss"),
                    &[loss.item()?],
                    &[want.as_f64().unwrap()],
                    rtol,
                    atol,
                );
                for (i, (p, e)) in params
                    .iter()
                    .zip(case["expected"][s].as_array().unwrap())
                    .enumerate()
                {
                    assert_close(
                        &format!("{what} param {i}"),
                        &vals(p),
                        &vals(&tensor(e, &Device::Cpu)),
                        rtol,
                        atol,
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn lbfgs_needs_a_closure_and_resumes_from_its_state() -> Result<()> {
    let w = Tensor::from_slice(&[3.0f32, -2.0], [2], &Device::Cpu)?.requires_grad_(true);
    let mut opt = LBFGS::new(vec![w.clone()])?;
    let e = opt.step().unwrap_err().to_string();
    assert!(e.contains("closure"), "{e}");
    let o = LBFGSOptions {
        max_iter: 2,
        ..Default::default()
    };
    let run = |opt: &mut LBFGS, w: &Tensor| {
        opt.step_closure(&mut || {
            w.set_grad(None);
            let l = w.sub_scalar(1.0)?.pow_scalar(4.0)?.sum_all()?;
            l.backward()?;
            Ok(l)
        })
        .unwrap();
    };
    let a = Tensor::from_slice(&[3.0f32, -2.0], [2], &Device::Cpu)?.requires_grad_(true);
    let mut oa = LBFGS::with_options(vec![a.clone()], o)?;
    for _ in 0..3 {
        run(&mut oa, &a);
    }
    let b = Tensor::from_slice(&[3.0f32, -2.0], [2], &Device::Cpu)?.requires_grad_(true);
    let mut ob = LBFGS::with_options(vec![b.clone()], o)?;
    for _ in 0..2 {
        run(&mut ob, &b);
    }
    let c = b.detach().requires_grad_(true);
    let mut oc = LBFGS::with_options(vec![c.clone()], o)?;
    oc.load_state_dict(&ob.state_dict())?;
    run(&mut oc, &c);
    assert_eq!(vals(&a), vals(&c));
    // A history vector of the wrong size is refused.
    let mut st = ob.state_dict();
    st.tensors[0].1 = Tensor::zeros([3], &Device::Cpu)?;
    let e = oc.load_state_dict(&st).unwrap_err().to_string();
    assert!(e.contains("lbfgs.d") && e.contains("2 elements"), "{e}");
    let e = LBFGS::with_options(
        vec![w.clone()],
        LBFGSOptions {
            lr: -1.0,
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("Invalid learning rate: -1"), "{e}");
    Ok(())
}

#[test]
fn a_checkpoint_carries_the_whole_scheduler_state() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("wgtorch-sched-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("ck.safetensors");
    let save = |scheduler: SchedState| -> Result<wgtorch::io::Checkpoint> {
        wgtorch::io::Checkpoint {
            scheduler,
            ..Default::default()
        }
        .save(&path)?;
        wgtorch::io::Checkpoint::load(&path, &Device::Cpu)
    };
    // ReduceLROnPlateau: its counters and best metric survive, so the resumed one reduces on
    // the same epoch as the original.
    let opt = Sgd::new(vec![Tensor::zeros([1], &Device::Cpu)?], 1.0)?;
    let o = || ReduceLROnPlateauOptions {
        patience: 2,
        ..Default::default()
    };
    let mut p = ReduceLROnPlateau::with_options(&opt, o())?;
    for m in [1.0, 2.0, 2.0] {
        p.step(m);
    }
    let ck = save(p.state_dict())?;
    let opt2 = Sgd::new(vec![Tensor::zeros([1], &Device::Cpu)?], 1.0)?;
    let mut p2 = ReduceLROnPlateau::with_options(&opt2, o())?;
    p2.load_state_dict(&ck.scheduler)?;
    p.step(2.0);
    p2.step(2.0);
    assert_eq!(
        opt.param_groups()[0].lr.get(),
        0.1,
        "third bad epoch reduces"
    );
    assert_eq!(opt2.param_groups()[0].lr.get(), 0.1);
    // LrScheduler: epoch and base rates; restoring it before or after the optimizer's state
    // gives the same rate.
    let opt = Sgd::new(vec![Tensor::zeros([1], &Device::Cpu)?], 0.8)?;
    let mut s = LrScheduler::new(&opt, Schedule::ExponentialLR { gamma: 0.5 })?;
    s.step()?;
    s.step()?;
    let ck = save(s.state_dict())?;
    let opt2 = Sgd::new(vec![Tensor::zeros([1], &Device::Cpu)?], 0.8)?;
    opt2.param_groups()[0].lr.set(0.2); // as if the optimizer's state had been loaded first
    let mut s2 = LrScheduler::new(&opt2, Schedule::ExponentialLR { gamma: 0.5 })?;
    s2.load_state_dict(&ck.scheduler)?;
    assert_eq!((s2.last_epoch, opt2.param_groups()[0].lr.get()), (2, 0.2));
    s2.step()?;
    assert_eq!(opt2.param_groups()[0].lr.get(), 0.1);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
