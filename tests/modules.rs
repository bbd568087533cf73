//! Modules and the training stack with tied (shared) parameters, and matrix products that fold a
//! batch into rows (issue #12, items 1 and 2): each checked against hand-computed f64 references
//! on every device of `common::devices()`.

mod common;

use common::{assert_close, vals};
use wgtorch::nn::{Embedding, Linear, Module, ModuleExt};
use wgtorch::optim::{clip_grad_norm_, Adam, Optimizer, ParamGroup, Sgd};
use wgtorch::{no_grad, DType, Device, Result, Tensor};

const VOCAB: usize = 10;
const DIM: usize = 4;
const IDX: [i32; 6] = [1, 3, 3, 7, 0, 9];

/// nanoGPT's tie: the output layer's weight IS the embedding's weight (`lm_head.weight =
/// wte.weight`), the same tensor in both modules.
#[derive(Module)]
struct TiedLm {
    wte: Embedding,
    head: Linear,
}

impl TiedLm {
    /// Built on the CPU from a fixed seed, then moved to `dev`.
    fn new(dev: &Device) -> Result<TiedLm> {
        let mut m = {
            let _lock = common::seed_lock();
            wgtorch::manual_seed(12);
            let wte = Embedding::new(VOCAB, DIM, &Device::Cpu)?;
            let mut head = Linear::new(DIM, VOCAB, &Device::Cpu)?;
            head.weight = wte.weight.clone();
            TiedLm { wte, head }
        };
        m.to_device(dev)?;
        Ok(m)
    }
}

impl TiedLm {
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        self.head.forward(&self.wte.forward(idx)?)
    }
}

/// Fixed upstream weights: the loss is `sum(C * logits)`.
fn upstream() -> Vec<f64> {
    (0..IDX.len() * VOCAB)
        .map(|i| ((i * 7 % 11) as f64 - 5.0) / 8.0)
        .collect()
}

/// One forward/backward of the tied model with the loss `sum(C * logits)`.
fn backward(m: &TiedLm, dev: &Device) -> Result<()> {
    let idx = Tensor::from_vec(IDX.to_vec(), [IDX.len()], dev)?;
    let c: Vec<f32> = upstream().iter().map(|&v| v as f32).collect();
    let c = Tensor::from_vec(c, [IDX.len(), VOCAB], dev)?;
    m.forward(&idx)?.mul(&c)?.sum_all()?.backward()
}

/// The gradient of `sum(C * (E[idx] Eᵀ + b))` by hand: the shared weight's gradient is the sum
/// of its two uses (the output layer's and the lookup's); returns (gE, gb).
fn hand_grad(e: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let c = upstream();
    let mut ge = vec![0.0; VOCAB * DIM];
    let mut gb = vec![0.0; VOCAB];
    for (i, &row) in IDX.iter().enumerate() {
        let x = &e[row as usize * DIM..][..DIM];
        for j in 0..VOCAB {
            let cij = c[i * VOCAB + j];
            gb[j] += cij;
            for d in 0..DIM {
                ge[j * DIM + d] += cij * x[d]; // the output layer's use
                ge[row as usize * DIM + d] += cij * e[j * DIM + d]; // the lookup's use
            }
        }
    }
    (ge, gb)
}

fn assert_tied(m: &TiedLm, what: &str) -> Result<()> {
    assert_eq!(
        m.wte.weight.id(),
        m.head.weight.id(),
        "{what}: the modules no longer share the weight"
    );
    assert_eq!(m.parameters().len(), 2, "{what}: parameters()");
    assert!(m.wte.weight.requires_grad(), "{what}: requires_grad lost");
    // An in-place update through one module is seen through the other.
    let before = vals(&m.wte.weight);
    {
        let _g = no_grad();
        m.head.weight.add_(
            &Tensor::ones([VOCAB, DIM], &m.head.weight.device())?
                .to_dtype(m.head.weight.dtype())?,
        )?;
    }
    let want: Vec<f64> = before.iter().map(|v| v + 1.0).collect();
    assert_close(what, &vals(&m.wte.weight), &want, 1e-2, 1e-2);
    Ok(())
}

#[test]
fn tied_parameters_listed_once_under_first_name() -> Result<()> {
    for dev in common::devices() {
        let m = TiedLm::new(&dev)?;
        let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["wte.weight", "head.bias"], "{dev:?}");
        let params = m.parameters();
        assert_eq!(params.len(), 2, "{dev:?}");
        assert_eq!(params[0].id(), m.head.weight.id());
        assert_eq!(m.num_parameters(), VOCAB * DIM + VOCAB);
    }
    Ok(())
}

#[test]
fn tied_state_dict_has_both_names_and_loads_one_tensor() -> Result<()> {
    for dev in common::devices() {
        let m = TiedLm::new(&dev)?;
        let sd = m.state_dict();
        let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["wte.weight", "head.weight", "head.bias"], "{dev:?}");
        assert_eq!(
            sd[0].1.id(),
            sd[1].1.id(),
            "{dev:?}: state_dict entries differ"
        );

        // Loading the tied model's own state_dict into another tied model: consistent values,
        // still one tensor.
        let mut other = TiedLm::new(&dev)?;
        {
            let _g = no_grad();
            other.wte.weight.fill_(0.5)?;
        }
        let report = other.load_state_dict(&sd, true)?;
        assert!(report.missing_keys.is_empty() && report.unexpected_keys.is_empty());
        assert_eq!(vals(&other.wte.weight), vals(&m.wte.weight), "{dev:?}");
        assert_tied(&other, &format!("{dev:?} after load_state_dict"))?;
    }
    Ok(())
}

/// The optimizers' update rules in f64, for the hand-computed trajectory.
enum Rule {
    SgdMomentum { lr: f64, momentum: f64 },
    Adam { lr: f64 },
}

impl Rule {
    /// Update `p` in place with gradient `g` at step `t` (1-based); `s` holds the state.
    fn step(&self, p: &mut [f64], g: &[f64], s: &mut [Vec<f64>; 2], t: i32) {
        for i in 0..p.len() {
            match *self {
                Rule::SgdMomentum { lr, momentum } => {
                    s[0][i] = if t == 1 {
                        g[i]
                    } else {
                        momentum * s[0][i] + g[i]
                    };
                    p[i] -= lr * s[0][i];
                }
                Rule::Adam { lr } => {
                    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
                    s[0][i] = b1 * s[0][i] + (1.0 - b1) * g[i];
                    s[1][i] = b2 * s[1][i] + (1.0 - b2) * g[i] * g[i];
                    let mh = s[0][i] / (1.0 - b1.powi(t));
                    let vh = s[1][i] / (1.0 - b2.powi(t));
                    p[i] -= lr * mh / (vh.sqrt() + eps);
                }
            }
        }
    }
}

/// Three optimizer steps on the tied model equal the hand-computed steps: the gradient is the
/// sum of both uses and it is applied once.
fn check_tied_training<O: Optimizer>(
    make: impl Fn(Vec<Tensor>) -> Result<O>,
    rule: Rule,
) -> Result<()> {
    for dev in common::devices() {
        let m = TiedLm::new(&dev)?;
        let mut opt = make(m.parameters())?;
        let mut e = vals(&m.wte.weight);
        let mut b = vals(m.head.bias.as_ref().expect("bias"));
        let mut se = [vec![0.0; e.len()], vec![0.0; e.len()]];
        let mut sb = [vec![0.0; b.len()], vec![0.0; b.len()]];
        for t in 1..=3 {
            opt.zero_grad();
            backward(&m, &dev)?;
            let (ge, gb) = hand_grad(&e);
            assert_close(
                &format!("{dev:?} step {t}: tied gradient"),
                &vals(&m.wte.weight.grad().expect("grad")),
                &ge,
                1e-4,
                1e-4,
            );
            opt.step()?;
            rule.step(&mut e, &ge, &mut se, t);
            rule.step(&mut b, &gb, &mut sb, t);
            let what = format!("{dev:?} step {t}");
            assert_close(&what, &vals(&m.wte.weight), &e, 1e-4, 1e-5);
            assert_close(&what, &vals(&m.head.weight), &e, 1e-4, 1e-5);
            assert_close(
                &what,
                &vals(m.head.bias.as_ref().expect("bias")),
                &b,
                1e-4,
                1e-5,
            );
        }
    }
    Ok(())
}

#[test]
fn tied_weight_sgd_momentum_step_applied_once() -> Result<()> {
    check_tied_training(
        |p| {
            Sgd::with_options(
                vec![ParamGroup::new(p)],
                wgtorch::optim::SgdOptions {
                    lr: 0.05,
                    momentum: 0.9,
                    dampening: 0.0,
                    weight_decay: 0.0,
                    nesterov: false,
                    ..Default::default()
                },
            )
        },
        Rule::SgdMomentum {
            lr: 0.05,
            momentum: 0.9,
        },
    )
}

#[test]
fn tied_weight_adam_step_applied_once() -> Result<()> {
    check_tied_training(|p| Adam::new(p, 0.01), Rule::Adam { lr: 0.01 })
}

#[test]
fn tied_weight_clip_grad_norm_counts_it_once() -> Result<()> {
    for dev in common::devices() {
        let m = TiedLm::new(&dev)?;
        backward(&m, &dev)?;
        let (ge, gb) = hand_grad(&vals(&m.wte.weight));
        let norm = ge.iter().chain(&gb).map(|v| v * v).sum::<f64>().sqrt();
        let max_norm = norm / 4.0;
        let coef = max_norm / (norm + 1e-6);
        // The parameters as listed by the module, and a hand-made list naming the tie twice.
        let lists = [
            m.parameters(),
            vec![
                m.wte.weight.clone(),
                m.head.weight.clone(),
                m.head.bias.clone().expect("bias"),
            ],
        ];
        for (i, params) in lists.iter().enumerate() {
            let (ge, gb) = if i == 0 {
                (ge.clone(), gb.clone())
            } else {
                // The second call sees the gradients the first one clipped.
                let s = coef;
                (
                    ge.iter().map(|v| v * s).collect(),
                    gb.iter().map(|v| v * s).collect(),
                )
            };
            let norm = ge.iter().chain(&gb).map(|v| v * v).sum::<f64>().sqrt();
            let total = clip_grad_norm_(params, max_norm, 2.0)?.expect("gradients");
            let what = format!("{dev:?} list {i}");
            assert_close(&what, &[total.item()?], &[norm], 1e-5, 1e-5);
            let c = (max_norm / (norm + 1e-6)).min(1.0);
            let want: Vec<f64> = ge.iter().map(|v| v * c).collect();
            assert_close(
                &what,
                &vals(&m.wte.weight.grad().expect("grad")),
                &want,
                1e-4,
                1e-5,
            );
        }
    }
    Ok(())
}

#[test]
fn tied_weight_stays_tied_across_to_device_and_to_dtype() -> Result<()> {
    let devs = common::devices();
    for dev in &devs {
        let mut m = TiedLm::new(dev)?;
        assert_tied(&m, &format!("{dev:?} after to_device"))?;
        m.to_device(&Device::Cpu)?;
        assert_tied(&m, &format!("{dev:?} and back to the CPU"))?;
        m.to_device(dev)?;
        m.to_dtype(DType::F16)?;
        assert_eq!(m.wte.weight.dtype(), DType::F16);
        assert_tied(&m, &format!("{dev:?} after to_dtype(F16)"))?;
    }
    let mut m = TiedLm::new(&Device::Cpu)?;
    m.to_dtype(DType::F64)?;
    assert_tied(&m, "to_dtype(F64)")
}

#[test]
fn to_device_where_it_already_is_keeps_the_tensors() -> Result<()> {
    // Tensors already on the device (or of the dtype) stay the same tensors: an optimizer made
    // before still updates the module, and the gradient stays.
    for dev in common::devices() {
        let mut m = TiedLm::new(&dev)?;
        backward(&m, &dev)?;
        let id = m.wte.weight.id();
        m.to_device(&dev)?;
        m.to_dtype(DType::F32)?;
        assert_eq!(m.wte.weight.id(), id, "{dev:?}");
        assert!(m.wte.weight.grad().is_some(), "{dev:?}: gradient dropped");
    }
    Ok(())
}

#[test]
fn to_dtype_keeps_a_frozen_parameter_frozen() -> Result<()> {
    let mut fc = Linear::new(3, 2, &Device::Cpu)?;
    fc.weight = fc.weight.clone().requires_grad_(false);
    fc.to_dtype(DType::F64)?;
    assert_eq!(fc.weight.dtype(), DType::F64);
    assert!(!fc.weight.requires_grad(), "a frozen weight was unfrozen");
    assert!(fc.bias.as_ref().expect("bias").requires_grad());
    Ok(())
}

// ---- matrix products that fold a batch into rows ----

/// Host f64 reference for `Y[s] = A[s] @ B[s]` over `bsz` batches, an operand without batch
/// shared by all; returns (Y, dL/dA, dL/dB) for `L = sum(C * Y)` (the shared operand's gradient
/// summed over the batch).
#[allow(clippy::too_many_arguments)]
fn host_mm(
    a: &[f64],
    b: &[f64],
    c: &[f64],
    bsz: usize,
    (m, k, n): (usize, usize, usize),
    a_batched: bool,
    b_batched: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut y = vec![0.0; bsz * m * n];
    let mut ga = vec![0.0; a.len()];
    let mut gb = vec![0.0; b.len()];
    for s in 0..bsz {
        let ao = if a_batched { s * m * k } else { 0 };
        let bo = if b_batched { s * k * n } else { 0 };
        for i in 0..m {
            for j in 0..n {
                let cij = c[(s * m + i) * n + j];
                for p in 0..k {
                    y[(s * m + i) * n + j] += a[ao + i * k + p] * b[bo + p * n + j];
                    ga[ao + i * k + p] += cij * b[bo + p * n + j];
                    gb[bo + p * n + j] += cij * a[ao + i * k + p];
                }
            }
        }
    }
    (y, ga, gb)
}

fn transpose2(v: &[f64], r: usize, c: usize) -> Vec<f64> {
    (0..r * c).map(|i| v[(i % r) * c + i / r]).collect()
}

fn leaf(shape: &[usize], dev: &Device) -> Result<Tensor> {
    Ok(Tensor::randn(shape, &Device::Cpu)?
        .to(dev)?
        .requires_grad_(true))
}

#[test]
fn linear_3d_gradient_matches_f64_reference() -> Result<()> {
    let (bsz, t, k, n) = (3, 5, 6, 7);
    for dev in common::devices() {
        // A contiguous input (folds as a view) and a transposed one (copied to fold).
        for strided in [false, true] {
            let x = if strided {
                leaf(&[t, bsz, k], &dev)?
            } else {
                leaf(&[bsz, t, k], &dev)?
            };
            let xin = if strided {
                x.transpose(0, 1)?
            } else {
                x.clone()
            };
            let (w, bias) = (leaf(&[n, k], &dev)?, leaf(&[n], &dev)?);
            let c = Tensor::randn([bsz, t, n], &Device::Cpu)?.to(&dev)?;
            let y = xin.linear(&w, Some(&bias))?;
            assert_eq!(y.shape(), &[bsz, t, n]);
            y.mul(&c)?.sum_all()?.backward()?;

            let (xv, wv, bv, cv) = (vals(&xin), vals(&w), vals(&bias), vals(&c));
            let (mut yh, gx, gwt) = host_mm(
                &xv,
                &transpose2(&wv, n, k),
                &cv,
                bsz,
                (t, k, n),
                true,
                false,
            );
            yh.iter_mut().enumerate().for_each(|(i, v)| *v += bv[i % n]);
            let gbias: Vec<f64> = (0..n).map(|j| cv.iter().skip(j).step_by(n).sum()).collect();
            let what = format!("{dev:?} strided {strided}");
            assert_close(&format!("{what} y"), &vals(&y), &yh, 1e-4, 1e-4);
            // x's gradient read in the order of the [B, T, K] input the product saw.
            let gx_in = x.grad().expect("x grad");
            let gx_in = if strided {
                gx_in.transpose(0, 1)?
            } else {
                gx_in
            };
            assert_close(&format!("{what} dx"), &vals(&gx_in), &gx, 1e-4, 1e-4);
            assert_close(
                &format!("{what} dW"),
                &vals(&w.grad().expect("w grad")),
                &transpose2(&gwt, k, n),
                1e-4,
                1e-4,
            );
            assert_close(
                &format!("{what} db"),
                &vals(&bias.grad().expect("b grad")),
                &gbias,
                1e-4,
                1e-4,
            );
        }
    }
    Ok(())
}

/// Operand shapes, which operand is batched, and (m, k, n).
type MmCase<'a> = (&'a [usize], &'a [usize], bool, bool, (usize, usize, usize));

#[test]
fn matmul_folds_either_matrix_operand_with_correct_gradients() -> Result<()> {
    let (bsz, m, k, n) = (4, 3, 5, 6);
    for dev in common::devices() {
        // [B, M, K] @ [K, N] (the batch folds into the left rows), [M, K] @ [B, K, N] (folded
        // transposed), and the 1-D cases, each with both operands requiring grad.
        let cases: [MmCase; 4] = [
            (&[bsz, m, k], &[k, n], true, false, (m, k, n)),
            (&[m, k], &[bsz, k, n], false, true, (m, k, n)),
            (&[bsz, m, k], &[k], true, false, (m, k, 1)),
            (&[k], &[bsz, k, n], false, true, (1, k, n)),
        ];
        for (sa, sb, a_batched, b_batched, dims) in cases {
            let (a, b) = (leaf(sa, &dev)?, leaf(sb, &dev)?);
            let y = a.matmul(&b)?;
            let c = Tensor::randn(y.shape(), &Device::Cpu)?.to(&dev)?;
            y.mul(&c)?.sum_all()?.backward()?;
            let (yh, ga, gb) = host_mm(
                &vals(&a),
                &vals(&b),
                &vals(&c),
                bsz,
                dims,
                a_batched,
                b_batched,
            );
            let what = format!("{dev:?} {sa:?} @ {sb:?}");
            assert_close(&format!("{what} y"), &vals(&y), &yh, 1e-4, 1e-4);
            assert_close(
                &format!("{what} da"),
                &vals(&a.grad().expect("a grad")),
                &ga,
                1e-4,
                1e-4,
            );
            assert_close(
                &format!("{what} db"),
                &vals(&b.grad().expect("b grad")),
                &gb,
                1e-4,
                1e-4,
            );
            // Without gradients (a transposed, unfoldable left operand: the batched product).
            let _g = no_grad();
            let at = match a.ndim() {
                1 => a.detach(),
                _ => a
                    .detach()
                    .transpose(-1, -2)?
                    .contiguous()?
                    .transpose(-1, -2)?,
            };
            assert_close(
                &format!("{what} no_grad"),
                &vals(&at.matmul(&b)?),
                &yh,
                1e-4,
                1e-4,
            );
        }
    }
    Ok(())
}

#[test]
fn linear_3d_backward_does_not_materialise_broadcast_weight_grad() -> Result<()> {
    // [64, 8, 128] through Linear(128, 256): the weight's gradient broadcast over the batch
    // would be [64, 128, 256] floats (8 MiB); folded it is one [256, 128] product.
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let ctx = wgtorch::backend::gpu::context(0)?;
    let (bsz, t, k, n) = (64, 8, 128, 256);
    let x = Tensor::randn([bsz, t, k], &gpu)?;
    let fc = Linear::new(k, n, &gpu)?;
    ctx.synchronize()?;
    let base = ctx.stats().bytes_in_use;
    ctx.reset_peak();
    fc.forward(&x)?.sum_all()?.backward()?;
    ctx.synchronize()?;
    let grew = ctx.stats().peak_bytes.saturating_sub(base);
    let broadcast = (bsz * k * n * 4) as u64;
    assert!(
        grew < broadcast / 2,
        "the backward grew the pool by {grew} bytes (the broadcast weight gradient is {broadcast})"
    );
    assert_eq!(fc.weight.grad().expect("grad").shape(), &[n, k]);
    Ok(())
}

#[test]
fn optimizer_refuses_a_tied_tensor_listed_twice() -> Result<()> {
    // A list built by hand from both modules names the tie twice: stepping it twice would be a
    // silently wrong update, so the optimizers refuse it (PyTorch's messages).
    let m = TiedLm::new(&Device::Cpu)?;
    let twice = vec![m.wte.weight.clone(), m.head.weight.clone()];
    let err = Adam::new(twice.clone(), 1e-3).err().expect("refused");
    assert!(err.to_string().contains("duplicate parameters"), "{err}");
    let err = Sgd::with_options(
        vec![
            ParamGroup::new(vec![twice[0].clone()]),
            ParamGroup::new(vec![twice[1].clone()]),
        ],
        wgtorch::optim::SgdOptions {
            lr: 0.1,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            ..Default::default()
        },
    )
    .err()
    .expect("refused");
    assert!(
        err.to_string().contains("more than one parameter group"),
        "{err}"
    );
    Ok(())
}
