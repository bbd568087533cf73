//! The losses beyond the golden values (tests/golden/losses.json): PyTorch's clamps and
//! gradients at the edges, modules against functionals, defaults, and bad inputs.

mod common;

use common::{assert_close, vals};
use wgtorch::nn::{self, functional as F};
use wgtorch::{Device, Result, Tensor};

fn t(v: &[f32], shape: &[usize], dev: &Device) -> Tensor {
    Tensor::from_slice(v, shape, dev).unwrap()
}

/// Held while a test here profiles: one profiler runs in a process at a time.
static PROFILING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn profiling() -> std::sync::MutexGuard<'static, ()> {
    PROFILING.lock().unwrap_or_else(|e| e.into_inner())
}

fn err_text<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

/// A confident prediction keeps its small loss: log_softmax is `(x - m) - log(sum)`, as PyTorch
/// computes it, not `x - (m + log(sum))`, which rounded log(sum) to m's ulp (the CPU's fused
/// kernel gave a loss of 0 for logits [16, 0, 0, 0], PyTorch 3.6e-7). Each loss is within the
/// rounding of the f32 sum (three additions, half an ulp of 1 each) of the true log(1 + 3e^-s).
/// And `log` near 1, as in the BCE of a probability near 1: lavapipe's builtin was 73% off at
/// 0.99999994.
#[test]
fn confident_predictions_keep_their_small_losses() -> Result<()> {
    // Not beside a profiled test: its ops would land under that test's scope (one CI run saw
    // 8 launches against 13 in class_losses_on_a_gpu_are_their_ops_in_two_launches).
    let _p = profiling();
    for dev in common::devices() {
        let scores = [8.0f32, 10.0, 12.0, 14.0, 16.0];
        let mut logits = Vec::new();
        for s in scores {
            logits.extend([s, 0.0, 0.0, 0.0]);
        }
        let x = t(&logits, &[5, 4], &dev);
        let target = Tensor::from_vec(vec![0i64; 5], [5], &dev)?;
        let opts = F::CrossEntropyOptions {
            reduction: F::Reduction::None,
            ..Default::default()
        };
        let got = vals(&F::cross_entropy_with(&x, &target, opts)?);
        for (s, g) in scores.iter().zip(&got) {
            let want = (3.0 * (-*s as f64).exp()).ln_1p();
            let tol = 1.5 * f64::from(f32::EPSILON) + 1e-6 * want;
            assert!(
                (g - want).abs() <= tol,
                "[{dev}] cross_entropy of [{s}, 0, 0, 0]: {g:e}, want {want:e}"
            );
        }
        let p: [f32; 4] = [1.0 - f32::EPSILON / 2.0, 1.0 - f32::EPSILON, 0.99999, 0.999];
        let got = vals(&t(&p, &[4], &dev).log()?);
        for (p, g) in p.iter().zip(&got) {
            let want = f64::from(*p).ln();
            assert!(
                (g - want).abs() <= 4e-7 * want.abs(),
                "[{dev}] log({p:e}) = {g:e}, want {want:e}"
            );
        }
    }
    Ok(())
}

#[test]
fn bce_clamps_logs_at_minus_100_and_keeps_gradients_finite() -> Result<()> {
    for dev in common::devices() {
        // x = 0 and 1 exactly: the logs clamp to -100 and PyTorch's gradient stays finite.
        let x = t(&[0.0, 1.0, 0.0, 1.0], &[4], &dev).requires_grad_(true);
        let y = t(&[0.0, 1.0, 1.0, 0.0], &[4], &dev);
        let l = F::binary_cross_entropy_with(
            &x,
            &y,
            F::BinaryCrossEntropyOptions {
                reduction: F::Reduction::None,
                ..Default::default()
            },
        )?;
        assert_close(
            &format!("[{dev}] loss"),
            &vals(&l),
            &[0.0, 0.0, 100.0, 100.0],
            0.0,
            1e-5,
        );
        l.sum_all()?.backward()?;
        // (x - t) / max(x (1 - x), 1e-12)
        assert_close(
            &format!("[{dev}] grad"),
            &vals(&x.grad().unwrap()),
            &[0.0, 0.0, -1e12, 1e12],
            1e-5,
            0.0,
        );
    }
    Ok(())
}

#[test]
fn bce_refuses_probabilities_outside_0_1_on_the_cpu() {
    let y = t(&[0.0, 1.0], &[2], &Device::Cpu);
    for bad in [[1.5f32, 0.5], [-0.1, 0.5], [f32::NAN, 0.5]] {
        let e = err_text(F::binary_cross_entropy(&t(&bad, &[2], &Device::Cpu), &y));
        assert!(
            e.contains("all elements of input should be between 0 and 1"),
            "{e}"
        );
    }
    let e = err_text(F::binary_cross_entropy(
        &t(&[0.5; 3], &[3], &Device::Cpu),
        &y,
    ));
    assert!(
        e.contains("binary_cross_entropy") && e.contains("same size"),
        "{e}"
    );
}

#[test]
fn modules_match_functionals_with_options() -> Result<()> {
    for dev in common::devices() {
        let x = t(&[0.2, 0.7, 0.4, 0.9], &[2, 2], &dev);
        let y = t(&[0.0, 1.0, 1.0, 0.5], &[2, 2], &dev);
        let sum = F::Reduction::Sum;
        let same = |a: Tensor, b: Tensor| assert_eq!(vals(&a), vals(&b), "[{dev}]");
        same(
            nn::BCELoss::new().forward(&x, &y)?,
            F::binary_cross_entropy(&x, &y)?,
        );
        same(
            nn::HuberLoss::with_options(F::HuberLossOptions {
                delta: 0.3,
                reduction: sum,
                ..Default::default()
            })
            .forward(&x, &y)?,
            F::huber_loss_with(
                &x,
                &y,
                F::HuberLossOptions {
                    delta: 0.3,
                    reduction: sum,
                    weight: None,
                },
            )?,
        );
        let logx = x.log()?;
        same(
            nn::KLDivLoss::with_options(F::KlDivOptions {
                reduction: F::Reduction::BatchMean,
                log_target: false,
            })
            .forward(&logx, &y)?,
            F::kl_div_with(
                &logx,
                &y,
                F::KlDivOptions {
                    reduction: sum,
                    log_target: false,
                },
            )?
            .div_scalar(2.0)?,
        );
        let r = t(&[1.0, -1.0, 1.0, -1.0], &[2, 2], &dev);
        same(
            nn::MarginRankingLoss::new().forward(&x, &y, &r)?,
            F::margin_ranking_loss(&x, &y, &r)?,
        );
        same(
            nn::CosineSimilarity::with_options(F::CosineSimilarityOptions { dim: 0, eps: 1e-8 })
                .forward(&x, &y)?,
            F::cosine_similarity_with(&x, &y, F::CosineSimilarityOptions { dim: 0, eps: 1e-8 })?,
        );
        // Defaults are PyTorch's.
        let d = F::CrossEntropyOptions::default();
        assert_eq!(
            (d.ignore_index, d.label_smoothing, d.reduction),
            (-100, 0.0, F::Reduction::Mean)
        );
        assert!(d.weight.is_none());
        assert_eq!(F::HuberLossOptions::default().delta, 1.0);
        assert_eq!(F::SmoothL1LossOptions::default().beta, 1.0);
        assert_eq!(F::CosineSimilarityOptions::default().dim, 1);
        assert_eq!(F::CosineSimilarityOptions::default().eps, 1e-8);
        assert!(!F::KlDivOptions::default().log_target);
        assert_eq!(F::MarginRankingLossOptions::default().margin, 0.0);
    }
    Ok(())
}

#[test]
fn cosine_similarity_of_a_zero_vector_is_zero_with_finite_gradients() -> Result<()> {
    for dev in common::devices() {
        let a = t(&[0.0, 0.0, 1.0, 2.0], &[2, 2], &dev).requires_grad_(true);
        let b = t(&[1.0, 1.0, 2.0, 4.0], &[2, 2], &dev).requires_grad_(true);
        let s = F::cosine_similarity(&a, &b)?;
        assert_close(&format!("[{dev}] sim"), &vals(&s), &[0.0, 1.0], 1e-6, 1e-6);
        s.sum_all()?.backward()?;
        for g in vals(&a.grad().unwrap())
            .iter()
            .chain(&vals(&b.grad().unwrap()))
        {
            assert!(g.is_finite(), "[{dev}] gradient {g}");
        }
        // The zero vector's gradient: b / (eps |b|), as PyTorch's.
        let ga = vals(&a.grad().unwrap());
        let want = 1.0 / (2f64.sqrt() * 1e-8);
        assert_close(&format!("[{dev}] grad"), &ga[..2], &[want, want], 1e-5, 0.0);
    }
    Ok(())
}

#[test]
fn loss_bad_inputs_name_the_op() {
    for dev in common::devices() {
        let x = t(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[2, 3], &dev);
        let y = t(&[0.1, 0.2, 0.3], &[3], &dev);
        let cls = Tensor::from_slice(&[0i32, 2], [2], &dev).unwrap();
        let cases: Vec<(Result<Tensor>, &str)> = vec![
            (F::kl_div(&x, &y), "kl_div"),
            (F::huber_loss(&x, &y), "huber_loss"),
            (
                F::huber_loss_with(
                    &x,
                    &x,
                    F::HuberLossOptions {
                        delta: 0.0,
                        ..Default::default()
                    },
                ),
                "huber_loss does not support non-positive values for delta",
            ),
            (
                F::smooth_l1_loss_with(
                    &x,
                    &x,
                    F::SmoothL1LossOptions {
                        beta: -1.0,
                        ..Default::default()
                    },
                ),
                "smooth_l1_loss does not support negative values for beta",
            ),
            (
                F::mse_loss_with(
                    &x,
                    &x,
                    F::MseLossOptions {
                        reduction: F::Reduction::BatchMean,
                        ..Default::default()
                    },
                ),
                "batchmean is not a valid value for reduction",
            ),
            (
                F::mse_loss_with(
                    &x,
                    &x,
                    F::MseLossOptions {
                        weight: Some(y.clone()),
                        ..Default::default()
                    },
                ),
                "Weights and input must have the same size",
            ),
            (
                F::cross_entropy_with(
                    &x,
                    &cls,
                    F::CrossEntropyOptions {
                        weight: Some(x.clone()),
                        ..Default::default()
                    },
                ),
                "weight tensor should be defined either for all 3 classes or no classes",
            ),
            (
                F::nll_loss_with(
                    &x,
                    &cls,
                    F::NllLossOptions {
                        reduction: F::Reduction::BatchMean,
                        ..Default::default()
                    },
                ),
                "batchmean",
            ),
            (
                F::margin_ranking_loss(&x, &x, &y),
                "All input tensors should have same dimension",
            ),
            (
                F::cosine_similarity(&x, &y.reshape([3, 1]).unwrap()),
                "cosine_similarity",
            ),
            (
                F::cosine_similarity_with(&x, &x, F::CosineSimilarityOptions { dim: 2, eps: 1e-8 }),
                "Dimension out of range",
            ),
        ];
        for (i, (r, want)) in cases.into_iter().enumerate() {
            let e = err_text(r);
            assert!(e.contains(want), "[{dev}] case {i}: {e}");
        }
        assert!(F::Reduction::parse("batchmean").is_ok());
        assert!(
            err_text(F::Reduction::parse("avg")).contains("avg is not a valid value for reduction")
        );
    }
    if let Some(g) = common::gpu() {
        let a = t(&[0.5], &[1], &Device::Cpu);
        let b = t(&[0.5], &[1], &g);
        assert!(err_text(F::binary_cross_entropy(&a, &b)).contains("same device"));
        assert!(err_text(F::kl_div(&a, &b)).contains("same device"));
    }
}

/// `gather`'s gradient (the losses' too) is zeros with the incoming gradient added at the index:
/// over many classes (the CPU writes the zeros in place), from a transposed (strided) incoming
/// gradient, with repeated indices, and differentiable again (`create_graph`).
#[test]
fn gather_gradients_scatter_into_zeros() -> Result<()> {
    for dev in common::devices() {
        let (n, c) = (4, 300);
        let x = Tensor::randn([n, c], &dev)?.requires_grad_(true);
        let idx: Vec<i64> = vec![7, 7, 299, 0, 5, 5, 1, 2, 3, 150, 150, 150];
        let index = Tensor::from_vec(idx.clone(), [n, 3], &dev)?;
        let w = Tensor::randn([3, n], &dev)?;
        // The gradient that reaches gather is a transposed view of w.
        x.gather(1, &index)?
            .backward_with(Some(&w.t()?), false, false)?;
        let (xv, wv) = (vals(&x), vals(&w));
        let mut want = vec![0.0; n * c];
        for r in 0..n {
            for k in 0..3 {
                want[r * c + idx[r * 3 + k] as usize] += wv[k * n + r];
            }
        }
        assert_close(
            &format!("{dev} strided"),
            &vals(&x.grad().unwrap()),
            &want,
            1e-6,
            1e-6,
        );
        x.set_grad(None);
        let y = x.gather(1, &index)?;
        y.square()?
            .t()?
            .mul(&w)?
            .sum_all()?
            .backward_with(None, false, true)?;
        let g = x.grad().expect("a gradient"); // 2 y * wᵀ scattered
        x.set_grad(None);
        let mut want = vec![0.0; n * c];
        let mut second = vec![0.0; n * c];
        let cw: Vec<f64> = (0..n * c).map(|i| (i % 7) as f64 - 3.0).collect();
        for r in 0..n {
            for k in 0..3 {
                let j = idx[r * 3 + k] as usize;
                want[r * c + j] += 2.0 * xv[r * c + j] * wv[k * n + r];
                // d/dx sum(g * cw): each picked x gets 2 w cw at its own index, per pick.
                second[r * c + j] += 2.0 * wv[k * n + r] * cw[r * c + j];
            }
        }
        assert_close(&format!("{dev} first"), &vals(&g), &want, 1e-5, 1e-5);
        let cwt = Tensor::from_vec(cw.iter().map(|&v| v as f32).collect(), [n, c], &dev)?;
        g.mul(&cwt)?.sum_all()?.backward()?;
        let gg = x.grad().expect("a second gradient");
        assert_close(&format!("{dev} second"), &vals(&gg), &second, 1e-5, 1e-5);
    }
    Ok(())
}

/// cross_entropy's gradient, written in one pass over the log-probabilities where the backend
/// has a kernel for it (`ops/loss.rs`, `log_softmax_at`), against the ops it stands for
/// (log_softmax, then nll_loss's gather): the same bits for every option that reaches it, a
/// transposed input, ignored targets and a per-row upstream gradient; and, under `create_graph`,
/// the same first and second derivatives.
#[test]
fn cross_entropy_gradient_is_log_softmax_then_nll_loss_to_the_bit() -> Result<()> {
    use F::Reduction::{Mean, None as Each, Sum};
    let (n, c) = (6, 37);
    let xv: Vec<f32> = (0..n * c)
        .map(|i| ((i * 7919) % 103) as f32 * 0.11 - 5.0)
        .collect();
    let wv: Vec<f32> = (0..c).map(|i| 0.5 + (i % 5) as f32 * 0.25).collect();
    let upv: Vec<f32> = (0..n).map(|i| i as f32 - 2.5).collect();
    let cwv: Vec<f32> = (0..n * c).map(|i| (i % 7) as f32 - 3.0).collect();
    for dev in common::devices() {
        let t = Tensor::from_vec(vec![3i64, -100, 36, 0, 3, 20], [n], &dev)?;
        let w = Tensor::from_vec(wv.clone(), [c], &dev)?;
        let up = Tensor::from_vec(upv.clone(), [n], &dev)?;
        let cw = Tensor::from_vec(cwv.clone(), [n, c], &dev)?;
        let loss = |x: &Tensor, fused: bool, weight: Option<Tensor>, reduction| {
            let l = if fused {
                let o = F::CrossEntropyOptions {
                    weight,
                    reduction,
                    ..Default::default()
                };
                F::cross_entropy_with(x, &t, o)?
            } else {
                let o = F::NllLossOptions {
                    weight,
                    reduction,
                    ..Default::default()
                };
                F::nll_loss_with(&x.log_softmax(1)?, &t, o)?
            };
            match reduction {
                Each => l.mul(&up)?.sum_all(),
                _ => Ok(l),
            }
        };
        let bits = |t: &Tensor| -> Result<Vec<u32>> {
            Ok(t.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect())
        };
        for transposed in [false, true] {
            let base = if transposed {
                Tensor::from_vec(xv.clone(), [c, n], &dev)?.t()?
            } else {
                Tensor::from_vec(xv.clone(), [n, c], &dev)?
            };
            for (weight, reduction) in [
                (None, Mean),
                (Some(&w), Mean),
                (None, Sum),
                (Some(&w), Each),
            ] {
                let run = |fused: bool| -> Result<(Vec<u32>, Vec<u32>)> {
                    let x = base.detach().requires_grad_(true);
                    let l = loss(&x, fused, weight.cloned(), reduction)?;
                    l.backward()?;
                    Ok((bits(&l)?, bits(&x.grad().expect("a gradient"))?))
                };
                let ((l1, g1), (l2, g2)) = (run(true)?, run(false)?);
                let differ = g1.iter().zip(&g2).position(|(a, b)| a != b);
                let what = format!(
                    "{dev} {reduction:?} weighted {} transposed {transposed}",
                    weight.is_some()
                );
                assert_eq!(l1, l2, "{what}: the loss");
                assert_eq!(differ, None, "{what}: first differing gradient element");
            }
        }
        if dev == Device::Cpu {
            // Which path each took: log-softmax's own backward (the ops), or none (one pass).
            let backwards = |fused: bool| -> Result<usize> {
                let scope = format!("cross_entropy_gradient_is_log_softmax_then_nll_loss {fused}");
                let _one = profiling();
                let prof = wgtorch::profiler::profile(Default::default(), |_| {
                    let _s = wgtorch::profiler::record_function(&scope);
                    let x = Tensor::from_vec(xv.clone(), [n, c], &dev)?.requires_grad_(true);
                    loss(&x, fused, None, Mean)?.backward()
                })?;
                let names = common::events_under(&prof, &scope);
                Ok(names
                    .iter()
                    .filter(|n| *n == "log_softmax_backward")
                    .count())
            };
            assert_eq!(
                (backwards(true)?, backwards(false)?),
                (0, 1),
                "one pass, then ops"
            );
        }
        // Twice differentiable: the first derivative, then d/dx sum(grad * cw).
        let twice = |fused: bool| -> Result<(Vec<f64>, Vec<f64>)> {
            let x = Tensor::from_vec(xv.clone(), [n, c], &dev)?.requires_grad_(true);
            loss(&x, fused, Some(w.clone()), Mean)?.backward_with(None, false, true)?;
            let g = x.grad().expect("a gradient");
            x.set_grad(None);
            g.mul(&cw)?.sum_all()?.backward()?;
            Ok((vals(&g), vals(&x.grad().expect("a second gradient"))))
        };
        let ((g1, s1), (g2, s2)) = (twice(true)?, twice(false)?);
        assert_close(&format!("{dev} first"), &g1, &g2, 1e-5, 1e-6);
        assert_close(&format!("{dev} second"), &s1, &s2, 1e-5, 1e-6);
        assert!(
            s1.iter().any(|v| v.abs() > 1e-3),
            "{dev}: a second derivative"
        );
    }
    Ok(())
}

#[test]
fn ignored_targets_contribute_nothing_whatever_their_scores() -> Result<()> {
    // An ignored row whose score at class 0 (where its target is parked) is -inf or NaN, and a
    // class weight of inf there: PyTorch 2.15 skips the row (values below from it); multiplying
    // its term by 0 gave NaN.
    use F::Reduction::{Mean, None as Each, Sum};
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    for dev in common::devices() {
        let lp = t(&[-inf, 0.0, 0.0, -1.0, nan, -2.0], &[3, 2], &dev);
        let target = Tensor::from_vec(vec![-100i64, 1, -100], [3], &dev)?;
        let w = t(&[inf, 3.0], &[2], &dev);
        for (weight, reduction, want) in [
            (None, Each, vec![0.0, 1.0, 0.0]),
            (None, Mean, vec![1.0]),
            (None, Sum, vec![1.0]),
            (Some(&w), Each, vec![0.0, 3.0, 0.0]),
            (Some(&w), Mean, vec![1.0]),
            (Some(&w), Sum, vec![3.0]),
        ] {
            let x = lp.detach().requires_grad_(true);
            let o = F::NllLossOptions {
                weight: weight.cloned(),
                reduction,
                ..Default::default()
            };
            let l = F::nll_loss_with(&x, &target, o)?;
            let what = format!("{dev} nll_loss {reduction:?} weighted {}", weight.is_some());
            assert_eq!(vals(&l), want, "{what}");
            if reduction == Mean {
                l.backward()?;
                let g = vals(&x.grad().expect("a gradient"));
                assert_eq!(g, [0.0, 0.0, 0.0, -1.0, 0.0, 0.0], "{what}: gradient");
            }
        }
        // The ignored rows' losses are +0, as PyTorch writes them.
        let o = F::NllLossOptions {
            reduction: Each,
            ..Default::default()
        };
        let each = F::nll_loss_with(&lp, &target, o)?.to_vec::<f32>()?;
        let each: Vec<u32> = each.iter().map(|v| v.to_bits()).collect();
        assert_eq!(each, [0, 1f32.to_bits(), 0], "{dev}: +0 for ignored rows");
        // An ignore index no int32 holds ignores nothing, with or without label smoothing.
        let xs = t(&[0.5, -1.0, 2.0, 0.25, 1.0, -0.5], &[3, 2], &dev);
        let ts = Tensor::from_vec(vec![0i64, 1, 1], [3], &dev)?;
        for label_smoothing in [0.0, 0.1] {
            let ce = |ignore_index| {
                let o = F::CrossEntropyOptions {
                    ignore_index,
                    label_smoothing,
                    ..Default::default()
                };
                F::cross_entropy_with(&xs, &ts, o)
            };
            let what = format!("{dev}: ignore_index 2^40, smoothing {label_smoothing}");
            assert_eq!(vals(&ce(1 << 40)?), vals(&ce(-100)?), "{what}");
        }
        // cross_entropy with label smoothing, whose smoothing term sums the whole row.
        let x = t(
            &[-inf, 0.0, 1.0, 0.0, -1.0, 2.0, 1.0, 2.0, 3.0],
            &[3, 3],
            &dev,
        );
        let x = x.requires_grad_(true);
        let target = Tensor::from_vec(vec![-100i64, 1, 2], [3], &dev)?;
        let ce = |reduction| {
            let o = F::CrossEntropyOptions {
                label_smoothing: 0.2,
                reduction,
                ..Default::default()
            };
            F::cross_entropy_with(&x, &target, o)
        };
        assert_close(
            &format!("{dev} cross_entropy none"),
            &vals(&ce(Each)?),
            &[0.0, 2.903_179_6, 0.607_605_9],
            1e-6,
            1e-6,
        );
        let l = ce(Mean)?;
        assert_close(
            &format!("{dev} mean"),
            &vals(&l),
            &[1.755_392_7],
            1e-6,
            1e-6,
        );
        l.backward()?;
        #[rustfmt::skip]
        let want = [
            0.0, 0.0, 0.0,
            0.023_764_264, -0.412_328_3, 0.388_564_02,
            0.011_681_955, 0.089_030_91, -0.100_712_83,
        ];
        let g = vals(&x.grad().expect("a gradient"));
        assert_close(&format!("{dev} gradient"), &g, &want, 1e-5, 1e-6);
    }
    Ok(())
}

/// A loss's bits, its input gradient's, the events under its scope and the kernels they launched.
type Run = (Vec<u32>, Vec<u32>, Vec<String>, usize);

#[test]
fn class_losses_on_a_gpu_are_their_ops_in_two_launches() -> Result<()> {
    // On a GPU nll_loss's rows are one kernel forward and one backward (a cross_entropy on
    // 64×10 logits went from 20 launches to 11): the same bits as the ops written out here
    // (PyTorch's formulas as `ops/loss.rs` composes them).
    use F::Reduction::{Mean, None as Each, Sum};
    let Some(dev) = common::devices().into_iter().find(Device::is_gpu) else {
        return Ok(());
    };
    let (n, c) = (7, 11);
    let xv: Vec<f32> = (0..n * c)
        .map(|i| ((i * 37) % 23) as f32 * 0.3 - 3.0)
        .collect();
    let w = Tensor::from_vec((0..c).map(|i| 0.5 + i as f32 * 0.1).collect(), [c], &dev)?;
    let up = Tensor::from_vec(
        (0..n).map(|i| i as f32 - 3.5).collect::<Vec<f32>>(),
        [n],
        &dev,
    )?;
    let tv = vec![3i64, -100, 10, 0, 3, -100, 5];
    // The ops: -logp[t]·w[t] and w[t], both masked to 0 where the target is ignored.
    let ops = |logp: &Tensor, t: &Tensor, w: Option<&Tensor>, reduction| -> Result<Tensor> {
        let ignored = t.eq(&t.full_like(-100.0)?)?;
        let kept = |v: &Tensor| v.masked_fill(&ignored, 0.0);
        let safe = kept(t)?;
        let picked = kept(&logp.gather(1, &safe.unsqueeze(1)?)?.reshape([-1])?.neg()?)?;
        let wt = match w {
            Some(w) => kept(&w.gather(0, &safe)?)?,
            None => kept(&t.full_like(1.0)?.to_dtype(wgtorch::DType::F32)?)?,
        };
        let loss = picked.mul(&wt)?;
        match reduction {
            Mean => loss.sum_all()?.div(&wt.sum_all()?),
            Sum => loss.sum_all(),
            _ => Ok(loss),
        }
    };
    let bits = |t: &Tensor| -> Result<Vec<u32>> {
        Ok(t.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect())
    };
    for index_dtype in [wgtorch::DType::I64, wgtorch::DType::I32] {
        let t = Tensor::from_vec(tv.clone(), [n], &dev)?.to_dtype(index_dtype)?;
        for logits in [true, false] {
            for (weight, reduction) in [
                (None, Mean),
                (Some(&w), Mean),
                (None, Sum),
                (Some(&w), Each),
            ] {
                let what = format!(
                    "{index_dtype:?} logits {logits} {reduction:?} weighted {}",
                    weight.is_some()
                );
                let run = |fused: bool| -> Result<Run> {
                    let x = Tensor::from_vec(xv.clone(), [n, c], &dev)?.requires_grad_(true);
                    let scope = format!("class_losses_on_a_gpu {what} {fused}");
                    let mut loss = None;
                    let opts = wgtorch::profiler::ProfileOptions::default();
                    let one = profiling();
                    let prof = wgtorch::profiler::profile(opts, |_| {
                        let _s = wgtorch::profiler::record_function(&scope);
                        let l = match (fused, logits) {
                            (true, true) => F::cross_entropy_with(
                                &x,
                                &t,
                                F::CrossEntropyOptions {
                                    weight: weight.cloned(),
                                    reduction,
                                    ..Default::default()
                                },
                            )?,
                            (true, false) => F::nll_loss_with(
                                &x,
                                &t,
                                F::NllLossOptions {
                                    weight: weight.cloned(),
                                    reduction,
                                    ..Default::default()
                                },
                            )?,
                            (false, true) => ops(&x.log_softmax(1)?, &t, weight, reduction)?,
                            (false, false) => ops(&x, &t, weight, reduction)?,
                        };
                        // Each row's loss (+0 where ignored, as PyTorch), then a sum to
                        // differentiate with a per-row upstream gradient.
                        let mut b = bits(&l)?;
                        let l = match reduction {
                            Each => l.mul(&up)?.sum_all()?,
                            _ => l,
                        };
                        l.backward()?;
                        b.extend(bits(&l)?);
                        loss = Some(b);
                        Ok(())
                    })?;
                    drop(one);
                    // The kernels launched by ops under the scope.
                    let ev = prof.events();
                    let at = ev.iter().position(|e| e.name == scope);
                    let under = |mut p: Option<usize>| {
                        while let Some(q) = p {
                            if Some(q) == at {
                                return true;
                            }
                            p = ev[q].parent;
                        }
                        false
                    };
                    let launches = prof.gpu_kernels().iter().filter(|k| under(k.op)).count();
                    let names = common::events_under(&prof, &scope);
                    let g = bits(&x.grad().expect("a gradient"))?;
                    Ok((loss.expect("a loss"), g, names, launches))
                };
                let ((l1, g1, n1, k1), (l2, g2, n2, k2)) = (run(true)?, run(false)?);
                assert_eq!(l1, l2, "{what}: the loss");
                let differ = g1.iter().zip(&g2).position(|(a, b)| a != b);
                assert_eq!(differ, None, "{what}: first differing gradient element");
                // Which path each took: the rows' node, or a gather and its scatter.
                let op = if logits { "cross_entropy" } else { "nll_loss" };
                let has = |names: &[String], e: &str| names.iter().any(|n| n == e);
                assert!(has(&n1, &format!("{op}_backward")), "{what}: {n1:?}");
                let masked = |names: &[String]| has(names, "where_backward");
                assert!(!masked(&n1) && masked(&n2), "{what}: {n1:?} {n2:?}");
                assert!(k1 * 2 <= k2, "{what}: {k1} launches against the ops' {k2}");
            }
        }
    }
    Ok(())
}
