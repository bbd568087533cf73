//! Mixed precision: autocast's dtype rules and gradients, GradScaler's skip/backoff/growth, half
//! inference with a converted module, and AMP training on digits against f32 on the GPU.

mod common;

use std::sync::Arc;
use wgtorch::amp::{self, GradScaler};
use wgtorch::data::{random_split, DataLoader, Dataset, Digits};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{
    functional as F, Conv2d, Conv2dOptions, Flatten, Linear, MaxPool2d, ModuleExt, ReLU, Sequential,
};
use wgtorch::optim::{Adam, Optimizer, Sgd};
use wgtorch::{DType, Device, Result, Tensor};

#[test]
fn autocast_picks_dtypes_like_pytorch_and_grads_come_back_f32() -> Result<()> {
    let _seed = common::seed_lock();
    for dev in common::devices() {
        for half in [DType::F16, DType::BF16] {
            let x = Tensor::randn([4, 8], &dev)?.requires_grad_(true);
            let w = Tensor::randn([3, 8], &dev)?.requires_grad_(true);
            let img = Tensor::randn([2, 3, 6, 6], &dev)?;
            let k = Tensor::randn([4, 3, 3, 3], &dev)?.requires_grad_(true);
            let (y, p, c, s) = amp::autocast_scope(&dev, half, || -> Result<_> {
                let y = x.linear(&w, None)?;
                let p = y.softmax(1)?;
                let c = F::conv2d_with(
                    &img,
                    &k,
                    None,
                    F::Conv2dFuncOptions {
                        padding: [1, 1].into(),
                        ..Default::default()
                    },
                )?;
                let s = c.relu()?.sum_all()?;
                Ok((y, p, c, s))
            })?;
            assert_eq!(
                (y.dtype(), p.dtype(), c.dtype(), s.dtype()),
                (half, DType::F32, half, DType::F32),
                "[{dev}] {half}"
            );
            // Outside the scope ops run in f32 again.
            assert_eq!(x.matmul(&w.t()?)?.dtype(), DType::F32);
            p.sum_all()?.add(&s)?.backward()?;
            for t in [&x, &w, &k] {
                assert_eq!(
                    t.grad().unwrap().dtype(),
                    DType::F32,
                    "[{dev}] {half}: grads flow back in the leaves' dtype"
                );
            }
            // Mixed inputs promote.
            let h = Tensor::ones([2], &dev)?.to_dtype(half)?;
            assert_eq!(h.add(&Tensor::ones([2], &dev)?)?.dtype(), DType::F32);
        }
    }
    Ok(())
}

#[test]
fn grad_scaler_skips_overflow_backs_off_and_grows() -> Result<()> {
    let _seed = common::seed_lock();
    for dev in common::devices() {
        let w = Tensor::from_slice(&[1.0f32, 2.0], [2], &dev)?.requires_grad_(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.1)?;
        let mut scaler = GradScaler::new();
        scaler.growth_interval = 3;
        // A clean step: gradients are unscaled before the update.
        let loss = w.sum_all()?;
        scaler.scale(&loss)?.backward()?;
        scaler.unscale_(&mut opt)?;
        assert_eq!(
            w.grad().unwrap().to_vec::<f32>()?,
            vec![1.0, 1.0],
            "unscale_ gives true gradients"
        );
        assert!(scaler.step(&mut opt)?);
        scaler.update()?;
        assert_eq!(w.to_vec::<f32>()?, vec![0.9, 1.9]);
        // An injected inf: the step is skipped and the scale halves.
        opt.zero_grad();
        w.set_grad(Some(Tensor::from_slice(&[f32::INFINITY, 1.0], [2], &dev)?));
        assert!(!scaler.step(&mut opt)?);
        scaler.update()?;
        assert_eq!(
            w.to_vec::<f32>()?,
            vec![0.9, 1.9],
            "a skipped step leaves the parameters as they were"
        );
        assert_eq!(scaler.get_scale(), 32768.0);
        // NaN too.
        w.set_grad(Some(Tensor::from_slice(&[f32::NAN, 1.0], [2], &dev)?));
        assert!(!scaler.step(&mut opt)?);
        scaler.update()?;
        assert_eq!(scaler.get_scale(), 16384.0);
        // growth_interval clean steps double it.
        for _ in 0..3 {
            opt.zero_grad();
            scaler.scale(&w.sum_all()?)?.backward()?;
            assert!(scaler.step(&mut opt)?);
            scaler.update()?;
        }
        assert_eq!(scaler.get_scale(), 32768.0);
    }
    Ok(())
}

#[test]
fn grad_scaler_keeps_one_state_per_optimizer_and_refuses_misuse() -> Result<()> {
    let dev = Device::Cpu;
    let a = Tensor::from_slice(&[1.0f32], [1], &dev)?.requires_grad_(true);
    let b = Tensor::from_slice(&[1.0f32], [1], &dev)?.requires_grad_(true);
    let mut opt_a = Sgd::new(vec![a.clone()], 0.5)?;
    let mut opt_b = Sgd::new(vec![b.clone()], 0.5)?;
    let mut scaler = GradScaler::new();
    // Each optimizer is unscaled and checked on its own: b's step uses true gradients even
    // though a was unscaled first, and a's inf skips only a.
    a.set_grad(Some(Tensor::from_slice(&[f32::INFINITY], [1], &dev)?));
    scaler.scale(&b.sum_all()?)?.backward()?;
    scaler.unscale_(&mut opt_a)?;
    let e = scaler.unscale_(&mut opt_a).unwrap_err().to_string();
    assert!(
        e.contains("unscale_() has already been called on this optimizer"),
        "{e}"
    );
    assert!(!scaler.step(&mut opt_a)?);
    assert!(scaler.step(&mut opt_b)?);
    assert_eq!(
        (a.to_vec::<f32>()?, b.to_vec::<f32>()?),
        (vec![1.0], vec![0.5])
    );
    let e = scaler.step(&mut opt_b).unwrap_err().to_string();
    assert!(
        e.contains("step() has already been called since the last update()"),
        "{e}"
    );
    let e = scaler.unscale_(&mut opt_b).unwrap_err().to_string();
    assert!(e.contains("unscale_() is being called after step()"), "{e}");
    scaler.update()?; // a found inf: the scale backs off once
    assert_eq!(scaler.get_scale(), 32768.0);
    let e = scaler.update().unwrap_err().to_string();
    assert!(
        e.contains("No inf checks were recorded prior to update."),
        "{e}"
    );
    // State round trip, and bad states refused without changing the scaler.
    let st = scaler.state_dict();
    let mut other = GradScaler::new();
    other.load_state_dict(&st)?;
    assert_eq!(other.get_scale(), 32768.0);
    for bad in [
        vec![
            ("scale".to_string(), f64::NAN),
            ("growth_tracker".into(), 0.0),
        ],
        vec![("scale".to_string(), 0.0), ("growth_tracker".into(), 0.0)],
        vec![("scale".to_string(), 2.0), ("growth_tracker".into(), 1.5)],
        vec![("scale".to_string(), 2.0)],
        vec![
            ("scale".to_string(), 2.0),
            ("growth_tracker".into(), 0.0),
            ("x".into(), 1.0),
        ],
    ] {
        assert!(other.load_state_dict(&bad).is_err(), "{bad:?} accepted");
        assert_eq!(other.get_scale(), 32768.0);
    }
    Ok(())
}

#[test]
fn grad_scaler_knows_an_optimizer_that_moved_between_unscale_and_step() -> Result<()> {
    let dev = Device::Cpu;
    let w = Tensor::from_slice(&[1.0f32], [1], &dev)?.requires_grad_(true);
    let mut opt = Sgd::new(vec![w.clone()], 1.0)?;
    let mut scaler = GradScaler::new();
    scaler.scale(&w.sum_all()?)?.backward()?;
    scaler.unscale_(&mut opt)?;
    let mut moved = Box::new(opt); // a new address
    assert!(scaler.step(moved.as_mut())?);
    scaler.update()?;
    // Unscaled once: the true gradient 1, so w = 1 - 1 * 1.
    assert_eq!(w.to_vec::<f32>()?, vec![0.0]);
    Ok(())
}

#[test]
fn grad_scaler_async_forms_match_the_blocking_ones() -> Result<()> {
    // The browser's path (nothing blocks), driven here by a local executor, on every device.
    for dev in common::devices() {
        let w = Tensor::from_slice(&[1.0f32, 2.0], [2], &dev)?.requires_grad_(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.5)?;
        let mut scaler = GradScaler::new();
        pollster::block_on(async {
            scaler.scale(&w.sum_all()?)?.backward()?;
            assert!(scaler.step_async(&mut opt).await?);
            scaler.update_async().await?;
            w.set_grad(Some(Tensor::from_slice(&[f32::NAN, 1.0], [2], &dev)?));
            assert!(!scaler.step_async(&mut opt).await?);
            scaler.update_async().await?;
            let host = w.to_async(&wgtorch::Device::Cpu).await?;
            assert_eq!(host.to_vec::<f32>()?, vec![0.5, 1.5]);
            Ok::<(), wgtorch::Error>(())
        })?;
        assert_eq!(scaler.get_scale(), 32768.0);
    }
    Ok(())
}

#[test]
fn a_module_converted_to_half_runs_inference() -> Result<()> {
    let _seed = common::seed_lock();
    for dev in common::devices() {
        wgtorch::manual_seed(3);
        let mut model = SimpleCnn::new(&dev)?;
        model.eval();
        let x = Tensor::rand([2, 3, 32, 32], &dev)?;
        let want = common::vals(&model.forward(&x)?);
        for half in [DType::F16, DType::BF16] {
            let mut m = SimpleCnn::new(&dev)?;
            m.load_state_dict(&model.state_dict(), true)?;
            m.to_dtype(half)?;
            assert!(m.parameters().iter().all(|p| p.dtype() == half));
            let y = m.forward(&x.to_dtype(half)?)?;
            assert_eq!(y.dtype(), half);
            let tol = if half == DType::F16 { 2e-2 } else { 8e-2 };
            common::assert_close(
                &format!("[{dev}] {half} inference"),
                &common::vals(&y),
                &want,
                tol,
                tol,
            );
        }
    }
    Ok(())
}

/// SimpleCNN's layers at a quarter of its widths (conv 3→8→16, linear 1024→64→10): the same
/// kinds of kernels under autocast at a twelfth of the arithmetic, so that two epochs twice fit
/// a CPU-emulated GPU (lavapipe) in CI.
fn narrow_cnn(dev: &Device) -> Result<Sequential> {
    let pad1 = Conv2dOptions {
        padding: 1.into(),
        ..Default::default()
    };
    Ok(Sequential::new()
        .append(Conv2d::with_options(3, 8, 3, pad1, dev)?)
        .append(ReLU {})
        .append(MaxPool2d::new(2))
        .append(Conv2d::with_options(8, 16, 3, pad1, dev)?)
        .append(ReLU {})
        .append(MaxPool2d::new(2))
        .append(Flatten::new())
        .append(Linear::new(16 * 8 * 8, 64, dev)?)
        .append(ReLU {})
        .append(Linear::new(64, 10, dev)?))
}

fn run(dev: &Device, amp_dtype: Option<DType>) -> Result<f64> {
    let all: Arc<dyn Dataset> = Arc::new(Digits::load()?);
    let (train, test) = random_split(all, 0.8, 0)?;
    wgtorch::manual_seed(0);
    let mut model = narrow_cnn(dev)?;
    let mut opt = Adam::new(model.parameters(), 2e-3)?;
    let mut scaler = GradScaler::new();
    scaler.enabled = amp_dtype == Some(DType::F16);
    let loader = DataLoader::new(Arc::new(train), 32, dev)?.shuffle(0);
    for batch in loader.epoch(0).chain(loader.epoch(1)) {
        let (x, y) = batch?;
        let loss = {
            let _ac = amp_dtype.map(|d| amp::autocast(dev, d));
            F::cross_entropy(&model.forward(&x)?, &y)?
        };
        opt.zero_grad();
        scaler.scale(&loss)?.backward()?;
        scaler.step(&mut opt)?;
        scaler.update()?;
    }
    model.eval();
    let _g = wgtorch::no_grad();
    let _ac = amp_dtype.map(|d| amp::autocast(dev, d));
    common::accuracy(Arc::new(test), dev, |x| model.forward(x))
}

#[test]
fn amp_training_matches_f32_accuracy_on_the_gpu() -> Result<()> {
    let _seed = common::seed_lock();
    let dev = common::gpu().unwrap_or(Device::Cpu);
    let f32_acc = run(&dev, None)?;
    let amp_acc = run(&dev, Some(DType::F16))?;
    println!(
        "[{dev}] two digits epochs: f32 {:.2}%, autocast f16 + GradScaler {:.2}%",
        f32_acc * 100.0,
        amp_acc * 100.0
    );
    assert!(f32_acc >= 0.9, "[{dev}] f32 accuracy {f32_acc}");
    assert!(
        amp_acc >= f32_acc - 0.01,
        "AMP accuracy {amp_acc} vs f32 {f32_acc}"
    );
    Ok(())
}
