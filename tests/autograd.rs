//! Autograd semantics: accumulation, retain_grad, no_grad, detach, misuse errors, in-place checks,
//! double backward, gradcheck for the differentiable ops, and flat GPU memory.

mod common;

use wgtorch::autograd::gradcheck;
use wgtorch::nn::functional as F;
use wgtorch::{Device, Result, Tensor};

fn t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, &Device::Cpu).unwrap()
}

#[test]
fn grads_accumulate_until_zeroed() -> Result<()> {
    for dev in common::devices() {
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3], &dev)?.requires_grad_(true);
        for _ in 0..2 {
            x.mul(&x)?.sum_all()?.backward()?;
        }
        assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![4.0, 8.0, 12.0]);
        x.zero_grad()?;
        assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0; 3]);
        x.set_grad(None);
        assert!(x.grad().is_none());
    }
    Ok(())
}

#[test]
fn retain_grad_detach_and_no_grad() -> Result<()> {
    let x = t(&[1.0, -2.0], &[2]).requires_grad_(true);
    let h = x.mul_scalar(3.0)?;
    h.retain_grad();
    let y = h.square()?.sum_all()?;
    y.backward()?;
    assert_eq!(h.grad().unwrap().to_vec::<f32>()?, vec![6.0, -12.0]);
    assert!(x.detach().grad_fn().is_none() && !x.detach().requires_grad());
    let z = {
        let _g = wgtorch::no_grad();
        x.exp()?
    };
    assert!(!z.requires_grad());
    assert!(x.exp()?.requires_grad());
    Ok(())
}

#[test]
fn misuse_gives_pytorch_errors() -> Result<()> {
    let x = t(&[1.0, 2.0], &[2]);
    let m = x.sum_all()?.backward().unwrap_err().to_string();
    assert!(
        m.contains("does not require grad and does not have a grad_fn"),
        "{m}"
    );
    let w = t(&[1.0, 2.0], &[2]).requires_grad_(true);
    let m = w.mul_scalar(2.0)?.backward().unwrap_err().to_string();
    assert!(
        m.contains("grad can be implicitly created only for scalar outputs"),
        "{m}"
    );
    let y = w.exp()?.sum_all()?;
    y.backward()?;
    let m = y.backward().unwrap_err().to_string();
    assert!(
        m.contains("backward through the graph a second time"),
        "{m}"
    );
    let y = w.exp()?.sum_all()?;
    y.backward_with(None, true, false)?;
    y.backward()?; // retained once
    let m = w.add_(&x).unwrap_err().to_string();
    assert!(
        m.contains("a leaf Variable that requires grad is being used in an in-place operation"),
        "{m}"
    );
    {
        let _g = wgtorch::no_grad();
        w.add_(&x)?; // optimizers update parameters this way
    }
    assert_eq!(w.to_vec::<f32>()?, vec![2.0, 4.0]);
    // A saved tensor changed in place is caught at backward.
    let a = t(&[1.0, 2.0], &[2]).requires_grad_(true);
    let b = t(&[3.0, 4.0], &[2]);
    let y = a.mul(&b)?.sum_all()?;
    b.mul_(&b)?;
    let m = y.backward().unwrap_err().to_string();
    assert!(
        m.contains("modified by an inplace operation") && m.contains("mul"),
        "{m}"
    );
    Ok(())
}

#[test]
fn double_backward() -> Result<()> {
    // d²/dx² x³ = 6x
    let x = t(&[2.0], &[1]).requires_grad_(true);
    let y = x.pow_scalar(3.0)?.sum_all()?;
    y.backward_with(None, true, true)?;
    let g = x.grad().unwrap();
    assert_eq!(g.to_vec::<f32>()?, vec![12.0]);
    x.set_grad(None);
    g.sum_all()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![12.0]);
    // Through tanh: d²/dx² tanh(x) = -2 t (1 - t²).
    let x = t(&[0.7], &[1]).requires_grad_(true);
    x.tanh()?.sum_all()?.backward_with(None, true, true)?;
    let g = x.grad().unwrap();
    x.set_grad(None);
    g.sum_all()?.backward()?;
    let th = 0.7f64.tanh();
    let want = -2.0 * th * (1.0 - th * th);
    assert!((x.grad().unwrap().item()? - want).abs() < 1e-6);
    // Through matmul: y = sum((x w)²), dy/dx = 2 x w wᵀ, d/dx sum(dy/dx) = 2 rowsum(w wᵀ) per row.
    let x = t(&[0.3, -0.5, 0.8, 0.1], &[2, 2]).requires_grad_(true);
    let w = t(&[0.7, -0.2, 0.4, 0.9], &[2, 2]);
    x.matmul(&w)?
        .square()?
        .sum_all()?
        .backward_with(None, true, true)?;
    let g = x.grad().unwrap();
    x.set_grad(None);
    g.sum_all()?.backward()?;
    let m = w
        .matmul(&w.t()?)?
        .sum_dims([1], false)?
        .mul_scalar(2.0)?
        .to_vec::<f32>()?;
    let got = x.grad().unwrap().to_vec::<f32>()?;
    for r in 0..2 {
        for c in 0..2 {
            assert!((got[r * 2 + c] - m[c]).abs() < 1e-5, "{got:?} vs {m:?}");
        }
    }
    Ok(())
}

#[test]
fn gradcheck_every_differentiable_op_family() -> Result<()> {
    let x = t(&[0.5, -1.3, 0.8, 2.1, -0.4, 1.7], &[2, 3]);
    let y = t(&[1.2, 0.3, -0.9, 0.6, 1.4, -0.2], &[2, 3]);
    let pos = t(&[0.5, 1.3, 0.8, 2.1, 0.4, 1.7], &[2, 3]);
    let idx = Tensor::from_vec(vec![2i32, 0, 1, 1], [2, 2], &Device::Cpu)?;
    type F1 = fn(&[Tensor]) -> Result<Tensor>;
    let unary: &[(&str, F1)] = &[
        ("exp", |v| v[0].exp()),
        ("tanh", |v| v[0].tanh()),
        ("sigmoid", |v| v[0].sigmoid()),
        ("gelu", |v| v[0].gelu()),
        ("gelu_tanh", |v| v[0].gelu_tanh()),
        ("silu", |v| v[0].silu()),
        ("elu", |v| v[0].elu(1.0)),
        ("softplus", |v| v[0].softplus(1.0, 20.0)),
        ("erf", |v| v[0].erf()),
        ("sin", |v| v[0].sin()),
        ("softmax", |v| v[0].softmax(1)),
        ("log_softmax", |v| v[0].log_softmax(0)),
        ("logsumexp", |v| v[0].logsumexp([1], false)),
        ("var", |v| v[0].var_dims([1], true, false)),
        ("prod", |v| v[0].prod_dim(1, false)),
        ("cumsum", |v| v[0].cumsum(1)),
        ("amax", |v| v[0].amax([0], false)),
        ("permute+slice", |v| v[0].t()?.slice(0, 0, 3, 2)?.exp()),
        ("flip+repeat", |v| v[0].flip([1])?.repeat([2, 1])?.sin()),
        ("einsum trace", |v| {
            Tensor::einsum("ij,kj->ik", &[v[0].clone(), v[0].clone()])?.diagonal(0, 1)
        }),
        ("layer_norm", |v| {
            F::layer_norm_with(
                &v[0],
                &[3],
                F::LayerNormFuncOptions {
                    weight: None,
                    bias: None,
                    eps: 1e-5,
                },
            )
        }),
        ("batch_norm", |v| {
            F::batch_norm_with(
                &v[0].reshape([2, 3, 1])?,
                None,
                None,
                F::BatchNormFuncOptions {
                    weight: None,
                    bias: None,
                    training: true,
                    momentum: 0.1,
                    eps: 1e-5,
                },
            )
        }),
        ("conv2d", |v| {
            F::conv2d_with(
                &v[0].reshape([1, 1, 2, 3])?,
                &v[0].narrow(1, 0, 2)?.reshape([1, 1, 2, 2])?,
                None,
                F::Conv2dFuncOptions {
                    padding: [1, 0].into(),
                    ..Default::default()
                },
            )
        }),
        ("max_pool2d", |v| {
            F::max_pool2d_with(
                &v[0].reshape([1, 1, 2, 3])?,
                [2, 2],
                F::MaxPool2dOptions {
                    stride: Some([1, 1].into()),
                    ..Default::default()
                },
            )
        }),
    ];
    for (name, f) in unary {
        gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-5, 1e-4)
            .map_err(|e| wgtorch::Error::Autograd(format!("{name}: {e}")))?;
    }
    gradcheck(
        |v| v[0].sqrt()?.log()?.rsqrt(),
        std::slice::from_ref(&pos),
        1e-6,
        1e-5,
        1e-4,
    )?;
    let binary: &[(&str, F1)] = &[
        ("div", |v| v[0].div(&v[1])),
        ("pow", |v| v[0].abs()?.add_scalar(0.1)?.pow(&v[1])),
        ("maximum", |v| v[0].maximum(&v[1])),
        ("matmul", |v| v[0].matmul(&v[1].t()?)),
        ("where", |v| {
            Tensor::where_cond(&v[0].gt(&v[1])?, &v[0], &v[1].square()?)
        }),
        ("mse", |v| F::mse_loss(&v[0], &v[1])),
        ("smooth_l1", |v| {
            F::smooth_l1_loss_with(
                &v[0],
                &v[1],
                F::SmoothL1LossOptions {
                    reduction: F::Reduction::Sum,
                    beta: 0.5,
                },
            )
        }),
        ("bce", |v| {
            F::binary_cross_entropy_with_logits(&v[0], &v[1].sigmoid()?)
        }),
        // The fused gradient ops, whose own rules serve double backward.
        ("sigmoid_backward", |v| {
            v[0].sigmoid_backward(&v[1].sigmoid()?)
        }),
        ("tanh_backward", |v| v[0].tanh_backward(&v[1].tanh()?)),
        ("gelu_backward", |v| v[0].gelu_backward(&v[1])),
        ("threshold_backward", |v| v[0].threshold_backward(&v[1])),
        ("cat/stack", |v| {
            Tensor::stack(
                &[
                    Tensor::cat(&[v[0].clone(), v[1].clone()], 1)?,
                    Tensor::cat(&[v[1].clone(), v[0].clone()], 1)?,
                ],
                0,
            )?
            .exp()
        }),
    ];
    for (name, f) in binary {
        gradcheck(f, &[x.clone(), y.clone()], 1e-6, 1e-5, 1e-4)
            .map_err(|e| wgtorch::Error::Autograd(format!("{name}: {e}")))?;
    }
    let i2 = idx.clone();
    gradcheck(
        move |v| {
            v[0].gather(1, &i2)?.mul(
                &v[0]
                    .index_select(1, &i2.narrow(0, 0, 1)?.reshape([-1])?)?
                    .sum_dims([1], true)?,
            )
        },
        std::slice::from_ref(&x),
        1e-6,
        1e-5,
        1e-4,
    )?;
    let tgt = Tensor::from_vec(vec![2i32, 0], [2], &Device::Cpu)?;
    // Without label smoothing, the gradient is one kernel on the CPU (f64 here), weighted and
    // with a target ignored.
    let (t2, w2) = (
        tgt.clone(),
        Tensor::from_vec(vec![0.5f64, 2.0, 1.5], [3], &Device::Cpu)?,
    );
    gradcheck(
        move |v| {
            let o = F::CrossEntropyOptions {
                weight: Some(w2.clone()),
                ignore_index: 0,
                reduction: F::Reduction::Sum,
                ..Default::default()
            };
            F::cross_entropy_with(&v[0], &t2, o)
        },
        std::slice::from_ref(&x),
        1e-6,
        1e-5,
        1e-4,
    )?;
    gradcheck(
        move |v| {
            F::cross_entropy_with(
                &v[0],
                &tgt,
                F::CrossEntropyOptions {
                    label_smoothing: 0.1,
                    ..Default::default()
                },
            )
        },
        std::slice::from_ref(&x),
        1e-6,
        1e-5,
        1e-4,
    )?;
    Ok(())
}

#[test]
fn anomaly_mode_names_the_op_that_made_nan() -> Result<()> {
    wgtorch::autograd::set_anomaly_enabled(true);
    let x = t(&[0.0, 1.0], &[2]).requires_grad_(true);
    // sqrt'(0) is infinite: SqrtBackward is the first to produce a non-finite gradient.
    let y = x.sqrt()?.mul_scalar(2.0)?.sum_all()?;
    let err = y.backward().unwrap_err().to_string();
    wgtorch::autograd::set_anomaly_enabled(false);
    assert!(
        err.contains("Function 'sqrtBackward' returned nan or inf values"),
        "{err}"
    );
    assert!(err.contains("forward was created at"), "{err}");
    Ok(())
}

#[test]
fn no_grad_closure_and_enable_grad_inside() -> Result<()> {
    let w = t(&[1.0], &[1]).requires_grad_(true);
    let (a, b) = wgtorch::autograd::no_grad_scope(|| -> Result<(Tensor, Tensor)> {
        let a = w.exp()?;
        let _e = wgtorch::enable_grad();
        Ok((a, w.exp()?))
    })?;
    assert!(!a.requires_grad() && b.requires_grad());
    Ok(())
}

#[test]
fn gradcheck_the_remaining_ops() -> Result<()> {
    let x = t(&[0.5, -1.3, 0.8, 2.1, -0.4, 1.7], &[2, 3]);
    let y = t(&[1.2, 0.3, -0.9, 0.6, 1.4, -0.2], &[2, 3]);
    type F1 = fn(&[Tensor]) -> Result<Tensor>;
    let unary: &[(&str, F1)] = &[
        ("neg/abs", |v| v[0].neg()?.abs()),
        ("log", |v| v[0].abs()?.add_scalar(0.5)?.log()),
        ("cos", |v| v[0].cos()),
        ("relu/leaky", |v| v[0].relu()?.add(&v[0].leaky_relu(0.1)?)),
        ("square/reciprocal", |v| {
            v[0].square()?.add_scalar(1.0)?.reciprocal()
        }),
        ("clamp", |v| v[0].clamp(Some(-0.5), Some(1.0))),
        ("pow_scalar", |v| {
            v[0].abs()?.add_scalar(0.1)?.pow_scalar(2.5)
        }),
        ("sum/mean", |v| {
            v[0].sum_dims([0], true)?.mul(&v[0].mean_dims([1], true)?)
        }),
        ("amin", |v| v[0].amin([1], false)),
        ("max_dim", |v| v[0].max_dim(1, false).map(|p| p.0)),
        ("std", |v| v[0].std_dims([0, 1], false, false)),
        ("vector_norm", |v| v[0].vector_norm(2.0, [-1], false)),
        ("transpose/squeeze/unsqueeze", |v| {
            v[0].transpose(0, 1)?.unsqueeze(0)?.squeeze_dim(0)?.exp()
        }),
        ("expand/narrow", |v| {
            v[0].narrow(1, 1, 1)?.expand([2, 4])?.sin()
        }),
        ("split/chunk", |v| {
            v[0].split(2, 1)?[1].mul(&v[0].chunk(3, 1)?[0])
        }),
        ("masked_fill/select", |v| {
            v[0].masked_fill(&v[0].gt_scalar(1.0)?, 0.0)?
                .masked_select(&v[0].lt_scalar(0.0)?)
        }),
        ("avg/adaptive pool", |v| {
            let i = v[0].reshape([1, 1, 2, 3])?;
            F::avg_pool2d_with(
                &i,
                [1, 2],
                F::AvgPool2dOptions {
                    stride: Some([1, 1].into()),
                    ..Default::default()
                },
            )?
            .add(&F::adaptive_avg_pool2d(&i, [2, 2])?)
        }),
        ("log_softmax+nll", |v| {
            F::nll_loss_with(
                &v[0].log_softmax(1)?,
                &Tensor::from_vec(vec![1i32, 2], [2], &Device::Cpu)?,
                F::NllLossOptions {
                    reduction: F::Reduction::Sum,
                    ..Default::default()
                },
            )
        }),
    ];
    for (name, f) in unary {
        gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-5, 1e-4)
            .map_err(|e| wgtorch::Error::Autograd(format!("{name}: {e}")))?;
    }
    let binary: &[(&str, F1)] = &[
        ("add/sub/mul", |v| {
            v[0].add_alpha(&v[1], 0.5)?.sub(&v[1])?.mul(&v[0])
        }),
        ("minimum", |v| v[0].minimum(&v[1])),
        ("broadcast", |v| {
            v[0].mul(&v[1].narrow(0, 0, 1)?.reshape([3])?)
        }),
        ("bmm", |v| v[0].unsqueeze(0)?.bmm(&v[1].t()?.unsqueeze(0)?)),
        ("linear", |v| {
            v[0].linear(
                &v[1],
                Some(&v[1].narrow(0, 0, 1)?.reshape([3])?.narrow(0, 0, 2)?),
            )
        }),
        ("einsum outer", |v| {
            Tensor::einsum("ij,kj->ik", &[v[0].clone(), v[1].clone()])
        }),
        ("scatter_add", |v| {
            let idx = Tensor::from_vec(vec![2i32, 0, 1, 1, 0, 2], [2, 3], &Device::Cpu)?;
            v[0].scatter_add(1, &idx, &v[1])
        }),
        ("embedding", |v| {
            Tensor::from_vec(vec![1i32, 0, 1], [3], &Device::Cpu)?
                .embedding(&v[0])?
                .mul(&v[1].t()?.narrow(1, 0, 1)?)
        }),
        ("l1", |v| F::l1_loss(&v[0], &v[1])),
    ];
    for (name, f) in binary {
        gradcheck(f, &[x.clone(), y.clone()], 1e-6, 1e-5, 1e-4)
            .map_err(|e| wgtorch::Error::Autograd(format!("{name}: {e}")))?;
    }
    Ok(())
}

#[test]
fn ties_split_like_pytorch() -> Result<()> {
    for dev in common::devices() {
        let x = Tensor::from_slice(&[1.0f32, 3.0, 3.0], [3], &dev)?.requires_grad_(true);
        x.amax([0], false)?.backward()?;
        assert_eq!(
            x.grad().unwrap().to_vec::<f32>()?,
            vec![0.0, 0.5, 0.5],
            "amax splits evenly"
        );
        x.set_grad(None);
        x.reshape([1, 3])?
            .max_dim(1, false)?
            .0
            .sum_all()?
            .backward()?;
        assert_eq!(
            x.grad().unwrap().to_vec::<f32>()?,
            vec![0.0, 1.0, 0.0],
            "max(dim) routes to the first maximum"
        );
        x.set_grad(None);
        let y = Tensor::from_slice(&[2.0f32, 3.0, 1.0], [3], &dev)?.requires_grad_(true);
        x.maximum(&y)?.sum_all()?.backward()?;
        assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0, 0.5, 1.0]);
        assert_eq!(y.grad().unwrap().to_vec::<f32>()?, vec![1.0, 0.5, 0.0]);
    }
    Ok(())
}

/// View gradients are added into one buffer per input in place; a gradient another input
/// shares (an add passes the same tensor to both sides) must be copied first, not changed.
#[test]
fn view_gradients_accumulate_without_touching_shared_gradients() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0], &[3]).requires_grad_(true);
    let x = t(&[0.5, -1.0, 4.0], &[3]).requires_grad_(true);
    let w = Tensor::from_vec(vec![1.0f32, 10.0, 100.0], [3], &Device::Cpu)?;
    let v = Tensor::from_vec(vec![7.0f32, 9.0], [2], &Device::Cpu)?;
    let y = x.mul_scalar(2.0)?;
    let u = a.add(&y)?;
    let loss = u
        .mul(&w)?
        .sum_all()?
        .add(&y.narrow(0, 0, 2)?.mul(&v)?.sum_all()?)?
        .add(&y.narrow(0, 1, 2)?.sum_all()?)?;
    loss.backward()?;
    assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![1.0, 10.0, 100.0]);
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>()?,
        vec![
            2.0 * (1.0 + 7.0),
            2.0 * (10.0 + 9.0 + 1.0),
            2.0 * (100.0 + 1.0)
        ]
    );
    Ok(())
}

/// Post-accumulate-grad hooks (what DDP builds on): each leaf's hook sees its whole gradient,
/// summed over every use, and the engine runs them as early as PyTorch's does: the last layer's
/// parameters first, each right after its layer's backward.
#[test]
fn post_accumulate_grad_hooks_fire_once_with_the_full_gradient_last_layer_first() -> Result<()> {
    use std::sync::{Arc, Mutex};
    use wgtorch::nn::{Linear, ModuleExt};
    let dev = Device::Cpu;
    wgtorch::manual_seed(3);
    let fc1 = Linear::new(4, 8, &dev)?;
    let fc2 = Linear::new(8, 2, &dev)?;
    type Seen = Arc<Mutex<Vec<(String, Vec<f64>)>>>;
    let seen: Seen = Arc::default();
    let mut handles = Vec::new();
    for (prefix, m) in [("fc1", &fc1), ("fc2", &fc2)] {
        for (n, p) in m.named_parameters() {
            let (s, name) = (seen.clone(), format!("{prefix}.{n}"));
            handles.push(p.register_post_accumulate_grad_hook(move |p| {
                s.lock()
                    .unwrap()
                    .push((name.clone(), common::vals(&p.grad().unwrap())));
                Ok(())
            })?);
        }
    }
    let x = Tensor::randn([5, 4], &dev)?;
    // fc1's weight is used twice: its hook must see the sum of both uses.
    let h = fc1.forward(&x)?.relu()?;
    let loss = fc2
        .forward(&h)?
        .sum_all()?
        .add(&fc1.weight.square()?.sum_all()?)?;
    loss.backward()?;
    let seen = seen.lock().unwrap().clone();
    let order: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order.len(), 4, "{order:?}");
    let pos = |n: &str| order.iter().position(|o| *o == n).unwrap();
    assert!(
        pos("fc2.weight") < pos("fc1.bias") && pos("fc2.bias") < pos("fc1.bias"),
        "{order:?}"
    );
    for (name, g) in &seen {
        let p = if name.starts_with("fc1") { &fc1 } else { &fc2 };
        let final_grad = p
            .named_parameters()
            .into_iter()
            .find(|(n, _)| name.ends_with(n.as_str()))
            .unwrap()
            .1
            .grad()
            .unwrap();
        assert_eq!(
            g,
            &common::vals(&final_grad),
            "{name}: the hook saw a partial gradient"
        );
    }
    // A hook's error ends the backward pass with it; a removed hook is not called.
    let failing = fc2
        .bias
        .as_ref()
        .unwrap()
        .register_post_accumulate_grad_hook(|_| Err(wgtorch::Error::msg("hook says no")))?;
    let e = fc2.forward(&h.detach())?.sum_all()?.backward().unwrap_err();
    assert!(e.to_string().contains("hook says no"), "{e}");
    failing.remove();
    for handle in handles {
        handle.remove();
    }
    fc2.forward(&h.detach())?.sum_all()?.backward()?;
    // Only leaves that require grad take a hook.
    assert!(h.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
    assert!(x.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
    Ok(())
}

/// Each leaf's `.grad()` owns its storage, as PyTorch's AccumulateGrad makes sure: the same
/// upstream gradient reaching two leaves (add), a broadcast view (sum's expand) and the user's
/// own gradient given to `backward_with` are copied, so in-place changes to one `.grad()` (the
/// optimizers, `clip_grad_norm_`) never reach another tensor.
#[test]
fn leaf_gradients_never_alias() -> Result<()> {
    let dev = Device::Cpu;
    let a = Tensor::zeros([2], &dev)?.requires_grad_(true);
    let b = Tensor::zeros([2], &dev)?.requires_grad_(true);
    a.add(&b)?.sum_all()?.backward()?;
    let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
    assert!(!ga.shares_storage_with(&gb));
    assert!(ga.is_contiguous() && gb.is_contiguous());
    // Both norms are 1 (total √2): clipped to 1, each becomes 1/√2 · 1 = 0.5 per element, once.
    wgtorch::optim::clip_grad_norm_(&[a.clone(), b.clone()], 1.0, 2.0)?;
    for g in [a.grad().unwrap(), b.grad().unwrap()] {
        for v in g.to_vec::<f32>()? {
            assert!((v - 0.5).abs() < 1e-6, "{v}");
        }
    }
    let up = Tensor::ones([2], &dev)?;
    let c = Tensor::zeros([2], &dev)?.requires_grad_(true);
    c.backward_with(Some(&up), false, false)?; // a leaf: its gradient is `up` itself
    c.grad().unwrap().mul_(&Tensor::full([2], 3.0, &dev)?)?;
    assert_eq!(
        up.to_vec::<f32>()?,
        [1.0, 1.0],
        "the user's gradient is untouched"
    );
    Ok(())
}

#[test]
fn backward_with_a_gradient_on_another_device_is_an_error() -> Result<()> {
    // A GPU output and a host gradient: an error in PyTorch's words, not a backend panic.
    let Some(gpu) = common::devices().into_iter().find(|d| d.is_gpu()) else {
        return Ok(());
    };
    let x = Tensor::ones([2, 3], &gpu)?.requires_grad_(true);
    let y = wgtorch::nn::functional::max_pool2d(&x.reshape([1, 1, 2, 3])?, 2)?;
    let g = Tensor::ones(y.shape(), &Device::Cpu)?;
    let e = y.backward_with(Some(&g), false, false).unwrap_err();
    assert!(
        e.to_string().contains("expected device gpu:0 but got cpu"),
        "{e}"
    );
    assert!(x.grad().is_none());
    Ok(())
}
