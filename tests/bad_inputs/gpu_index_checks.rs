//! Out-of-range and negative indices are errors on every device, as in PyTorch (a device-side
//! assert on CUDA): on the CPU at the op, on a GPU at the next readback or synchronize, which
//! reports the first failure and leaves the context usable. One test body per case for all
//! devices: each runs the op *and* reads its result back.

use crate::common::{assert_close, devices, gpu, vals};
use wgtorch::nn::functional as F;
use wgtorch::{Device, Result, Tensor};

/// `run`'s error is `op`'s "index `index` is out of bounds for dimension `dim` with size `size`".
fn expect_index_error<T: std::fmt::Debug>(
    dev: &Device,
    r: Result<T>,
    op: &str,
    index: i64,
    dim: usize,
    size: usize,
) {
    let e = r.expect_err(&format!(
        "{op} on {dev:?}: an out-of-range index gave a result"
    ));
    let m = e.to_string();
    let want = format!("{op}: index {index} is out of bounds for dimension {dim} with size {size}");
    assert_eq!(m, want, "on {dev:?}");
    assert!(matches!(e, wgtorch::Error::IndexOutOfRange { .. }), "{e:?}");
}

fn ints(v: &[i32], dev: &Device) -> Tensor {
    Tensor::from_vec(v.to_vec(), [v.len()], dev).unwrap()
}

fn x32(dev: &Device) -> Tensor {
    Tensor::from_vec((0..6).map(|v| v as f32).collect(), [3, 2], dev).unwrap()
}

#[test]
fn gpu_index_select_out_of_range() {
    for dev in devices() {
        let r = x32(&dev).index_select(0, &ints(&[0, 5], &dev));
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "index_select",
            5,
            0,
            3,
        );
    }
}

#[test]
fn gpu_index_select_negative_index() {
    for dev in devices() {
        let r = x32(&dev).index_select(1, &ints(&[1, -1], &dev));
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "index_select",
            -1,
            1,
            2,
        );
    }
}

#[test]
fn gpu_index_select_from_empty_dim() {
    for dev in devices() {
        let x = Tensor::zeros([0, 4], &dev).unwrap();
        let r = x.index_select(0, &ints(&[0], &dev));
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "index_select",
            0,
            0,
            0,
        );
    }
}

#[test]
fn gpu_gather_out_of_range() {
    for dev in devices() {
        let idx = Tensor::from_vec(vec![0, 1, 2, 0, 1, 1], [3, 2], &dev).unwrap();
        let r = x32(&dev).gather(1, &idx);
        expect_index_error(&dev, r.and_then(|y| y.to_vec::<f32>()), "gather", 2, 1, 2);
    }
}

#[test]
fn gpu_scatter_add_out_of_range() {
    for dev in devices() {
        let base = Tensor::zeros([3], &dev).unwrap();
        let src = Tensor::ones([2], &dev).unwrap();
        let r = base.scatter_add(0, &ints(&[1, 3], &dev), &src);
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "scatter_add",
            3,
            0,
            3,
        );
        let r = base.scatter_add(0, &ints(&[-2, 0], &dev), &src);
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "scatter_add",
            -2,
            0,
            3,
        );
    }
}

#[test]
fn gpu_scatter_add_into_empty_dim() {
    for dev in devices() {
        let base = Tensor::zeros([0, 2], &dev).unwrap();
        let src = Tensor::ones([1, 2], &dev).unwrap();
        let idx = Tensor::from_vec(vec![0, 0], [1, 2], &dev).unwrap();
        let r = base.scatter_add(0, &idx, &src);
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "scatter_add",
            0,
            0,
            0,
        );
    }
}

#[test]
fn gpu_one_hot_out_of_range() {
    for dev in devices() {
        let r = ints(&[0, 5], &dev).one_hot(3);
        expect_index_error(&dev, r.and_then(|y| y.to_vec::<i64>()), "one_hot", 5, 1, 3);
        let r = ints(&[-1, 0], &dev).one_hot(3);
        expect_index_error(&dev, r.and_then(|y| y.to_vec::<i64>()), "one_hot", -1, 1, 3);
        // And a correct one still reads right.
        let ok = ints(&[2, 0], &dev).one_hot(3).unwrap();
        assert_eq!(ok.shape(), &[2, 3]);
        assert_eq!(
            ok.to_vec::<i64>().unwrap(),
            vec![0, 0, 1, 1, 0, 0],
            "on {dev:?}"
        );
    }
}

#[test]
fn gpu_embedding_out_of_range() {
    for dev in devices() {
        let w = x32(&dev);
        let idx = Tensor::from_vec(vec![0, 3], [1, 2], &dev).unwrap();
        let r = idx.embedding(&w);
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "embedding",
            3,
            0,
            3,
        );
        let r = ints(&[-1], &dev).embedding(&w);
        expect_index_error(
            &dev,
            r.and_then(|y| y.to_vec::<f32>()),
            "embedding",
            -1,
            0,
            3,
        );
    }
}

fn logits(dev: &Device) -> Tensor {
    Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 1.5, 0.0, -0.5], [2, 3], dev)
        .unwrap()
        .requires_grad_(true)
}

#[test]
fn gpu_cross_entropy_target_out_of_range() {
    for dev in devices() {
        let r = F::cross_entropy(&logits(&dev), &ints(&[0, 3], &dev));
        expect_index_error(&dev, r.and_then(|l| l.item()), "cross_entropy", 3, 1, 3);
        // A negative target other than ignore_index is out of range too.
        let r = F::cross_entropy_with(
            &logits(&dev),
            &ints(&[-1, 0], &dev),
            F::CrossEntropyOptions {
                reduction: F::Reduction::Sum,
                ..Default::default()
            },
        );
        expect_index_error(&dev, r.and_then(|l| l.item()), "cross_entropy", -1, 1, 3);
    }
}

#[test]
fn gpu_cross_entropy_gradient_not_silent() {
    // The loss is never read: the bad target still surfaces, at the gradient's readback.
    for dev in devices() {
        let x = logits(&dev);
        let r = F::cross_entropy(&x, &ints(&[0, 3], &dev))
            .and_then(|l| l.backward())
            .and_then(|_| x.grad().expect("a gradient").to_vec::<f32>());
        expect_index_error(&dev, r, "cross_entropy", 3, 1, 3);
    }
}

#[test]
fn gpu_nll_loss_target_out_of_range() {
    for dev in devices() {
        let logp = logits(&dev).log_softmax(1).unwrap();
        let r = F::nll_loss(&logp, &ints(&[3, 1], &dev));
        expect_index_error(&dev, r.and_then(|l| l.item()), "nll_loss", 3, 1, 3);
    }
}

#[test]
fn gpu_loss_ignore_index_still_works() {
    // Row 1 ignored: the loss is row 0's alone, and row 1's gradient is zero.
    let row0 = [0.5f64, -1.0, 2.0];
    let lse = row0.iter().map(|v| v.exp()).sum::<f64>().ln();
    for dev in devices() {
        for ignore in [-100i64, 7] {
            let x = logits(&dev);
            let t = ints(&[2, ignore as i32], &dev);
            let o = F::CrossEntropyOptions {
                ignore_index: ignore,
                ..Default::default()
            };
            let loss = F::cross_entropy_with(&x, &t, o).unwrap();
            assert_close("loss", &vals(&loss), &[lse - 2.0], 1e-5, 1e-6);
            loss.backward().unwrap();
            let g = vals(&x.grad().unwrap());
            let p: Vec<f64> = row0.iter().map(|v| (v - lse).exp()).collect();
            let want = [p[0], p[1], p[2] - 1.0, 0.0, 0.0, 0.0];
            assert_close(&format!("grad on {dev:?}"), &g, &want, 1e-5, 1e-6);
            let logp = logits(&dev).log_softmax(1).unwrap();
            let o = F::NllLossOptions {
                ignore_index: ignore,
                reduction: F::Reduction::Sum,
                ..Default::default()
            };
            let nll = F::nll_loss_with(&logp, &t, o).unwrap();
            assert_close("nll_loss", &vals(&nll), &[lse - 2.0], 1e-5, 1e-6);
        }
    }
}

#[test]
fn gpu_index_error_leaves_context_usable() {
    for dev in devices() {
        let bad = x32(&dev).index_select(0, &ints(&[4], &dev));
        expect_index_error(
            &dev,
            bad.and_then(|y| y.to_vec::<f32>()),
            "index_select",
            4,
            0,
            3,
        );
        // Reported once: the next ops and readbacks are right.
        let y = x32(&dev).index_select(0, &ints(&[2, 0], &dev)).unwrap();
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            vec![4.0, 5.0, 0.0, 1.0],
            "on {dev:?}"
        );
        let s = Tensor::zeros([3], &dev)
            .unwrap()
            .scatter_add(
                0,
                &ints(&[1, 1, 2], &dev),
                &Tensor::ones([3], &dev).unwrap(),
            )
            .unwrap();
        assert_eq!(
            s.to_vec::<f32>().unwrap(),
            vec![0.0, 2.0, 1.0],
            "on {dev:?}"
        );
        // And the check is armed again.
        let again = x32(&dev).gather(0, &Tensor::from_vec(vec![9], [1, 1], &dev).unwrap());
        expect_index_error(
            &dev,
            again.and_then(|y| y.to_vec::<f32>()),
            "gather",
            9,
            0,
            3,
        );
    }
}

#[test]
fn gpu_index_error_keeps_the_first_failure() {
    let Some(dev) = gpu() else { return };
    // Two failing ops before any readback: the first is reported, the second was never a
    // separate failure to report (the flag holds one), and the context is clean afterwards.
    let a = x32(&dev).index_select(0, &ints(&[7], &dev)).unwrap();
    let b = ints(&[0, 9], &dev).one_hot(3).unwrap();
    expect_index_error(&dev, b.to_vec::<i64>(), "index_select", 7, 0, 3);
    drop(a);
    assert_eq!(x32(&dev).sum_all().unwrap().item().unwrap(), 15.0);
}

#[test]
fn gpu_index_error_reported_at_synchronize() {
    let Some(dev) = gpu() else { return };
    let Device::Gpu(n) = dev else { unreachable!() };
    let ctx = wgtorch::backend::gpu::context(n).unwrap();
    let _y = x32(&dev).index_select(0, &ints(&[3], &dev)).unwrap();
    expect_index_error(&dev, ctx.synchronize(), "index_select", 3, 0, 3);
    // Reported once.
    ctx.synchronize().unwrap();
    assert_eq!(ints(&[1, 2], &dev).to_vec::<i32>().unwrap(), vec![1, 2]);
}

#[test]
fn gpu_index_error_stays_with_its_thread() {
    let Some(dev) = gpu() else { return };
    // Another thread's failure is not this thread's error (concurrent tests share the context),
    // and it is still reported to the thread that ran the op.
    let (ran, read) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            let y = x32(&dev).index_select(0, &ints(&[6], &dev)).unwrap();
            ran.wait();
            read.wait();
            expect_index_error(&dev, y.to_vec::<f32>(), "index_select", 6, 0, 3);
        });
        ran.wait();
        let ok = x32(&dev).index_select(0, &ints(&[1], &dev)).unwrap();
        assert_eq!(ok.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
        read.wait();
    });
}
