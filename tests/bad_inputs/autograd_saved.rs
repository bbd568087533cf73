//! Saved tensors are version-checked (issue #11, defect 6): a tensor a backward rule reads that
//! was changed in place after the forward pass gives PyTorch's error, for every op family, never
//! the gradient of the new value; ops whose rule reads no data (views, add, sum) keep working; and
//! ordinary training, which changes parameters only after backward, is unaffected.

use crate::common;
use wgtorch::nn::functional as F;
use wgtorch::nn::{Conv2d, Conv2dOptions, Linear, ModuleExt};
use wgtorch::optim::{Optimizer, Sgd};
use wgtorch::{DType, Device, Result, Tensor};

/// `0.1, 0.2, ...` with `shape` on `dev`, requiring grad if `grad`.
fn seq(shape: &[usize], grad: bool, dev: &Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| 0.1 * (i as f32 + 1.0)).collect();
    Tensor::from_slice(&v, shape, dev)
        .unwrap()
        .requires_grad_(grad)
}

fn idx(v: &[i32], shape: &[usize], dev: &Device) -> Tensor {
    Tensor::from_slice(v, shape, dev).unwrap()
}

/// Double the float tensor `t` in place, under no_grad as an optimizer does (so leaves that
/// require grad can be changed too).
fn bump(t: &Tensor) {
    let _g = wgtorch::no_grad();
    t.mul_(&t.full_like(2.0).unwrap()).unwrap();
}

/// The start of PyTorch's message for a saved `[dtype shape]` tensor now at version `now`.
fn modified(t: &Tensor, origin: &str, now: u64, was: u64) -> String {
    let ty = match t.dtype() {
        DType::F32 => "FloatTensor",
        DType::I32 => "IntTensor",
        DType::I64 => "LongTensor",
        DType::Bool => "BoolTensor",
        other => panic!("no test for {other}"),
    };
    let dev = if t.device().is_gpu() { "gpu." } else { "" };
    format!(
        "one of the variables needed for gradient computation has been modified by an inplace operation: [torch.{dev}{ty} {:?}]{origin} is at version {now}; expected version {was} instead. Hint: it was saved for ",
        t.shape()
    )
}

/// `loss.backward()` fails with `want`, naming `op`'s backward.
fn expect_err(loss: &Tensor, want: &str, op: &str) {
    let m = loss
        .backward()
        .expect_err("backward after an in-place change of a saved tensor must fail")
        .to_string();
    assert!(m.contains(want), "got:  {m}\nwant: {want}");
    assert!(m.contains(&format!("saved for {op}Backward")), "{m}");
}

/// Run `loss.backward()`, which must fail with the in-place message for a saved tensor now at
/// version `now` (recorded at `was`); the message, for further checks.
fn expect_version_err(loss: &Tensor, now: u64, was: u64) -> String {
    let m = loss
        .backward()
        .expect_err("backward after an in-place change of a saved tensor must fail")
        .to_string();
    let want = format!("is at version {now}; expected version {was} instead");
    assert!(
        m.contains("modified by an inplace operation") && m.contains(&want),
        "got:  {m}\nwant: {want}"
    );
    m
}

/// `x.grad()` as f32s.
fn grad(x: &Tensor) -> Vec<f32> {
    x.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

#[test]
fn conv2d_weight_changed_in_place_between_forward_and_backward() -> Result<()> {
    for dev in common::devices() {
        let conv = Conv2d::with_options(
            3,
            4,
            3,
            Conv2dOptions {
                padding: 1.into(),
                ..Default::default()
            },
            &dev,
        )?;
        let x = seq(&[2, 3, 5, 5], false, &dev);
        // The weight is at version 1 after its initialisation (as in PyTorch).
        let loss = conv.forward(&x)?.sum_all()?;
        bump(&conv.weight);
        expect_err(&loss, &modified(&conv.weight, "", 2, 1), "conv2d");
    }
    Ok(())
}

#[test]
fn conv2d_input_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let (x, w) = (
            seq(&[1, 2, 4, 4], false, &dev),
            seq(&[3, 2, 3, 3], true, &dev),
        );
        let loss = F::conv2d_with(
            &x,
            &w,
            None,
            F::Conv2dFuncOptions {
                padding: [1, 1].into(),
                ..Default::default()
            },
        )?
        .sum_all()?;
        bump(&x);
        expect_err(&loss, &modified(&x, "", 1, 0), "conv2d");
    }
    Ok(())
}

#[test]
fn unary_output_changed_in_place() -> Result<()> {
    // PyTorch: y = x.exp(); y.add_(1) (here through a detached alias); y.sum().backward() raises.
    for dev in common::devices() {
        let x = seq(&[3], true, &dev);
        for op in ["exp", "sigmoid", "tanh", "sqrt"] {
            let y = match op {
                "exp" => x.exp()?,
                "sigmoid" => x.sigmoid()?,
                "tanh" => x.tanh()?,
                _ => x.sqrt()?,
            };
            let loss = y.sum_all()?;
            y.detach().add_(&y.detach().ones_like()?)?;
            let origin = format!(", which is output 0 of {op}Backward,");
            expect_err(&loss, &modified(&y, &origin, 1, 0), op);
        }
    }
    Ok(())
}

#[test]
fn unary_input_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        for op in ["log", "sin", "relu", "gelu", "square"] {
            let x = seq(&[4], true, &dev);
            let y = match op {
                "log" => x.log()?,
                "sin" => x.sin()?,
                "relu" => x.relu()?,
                "gelu" => x.gelu()?,
                _ => x.square()?,
            };
            let loss = y.sum_all()?;
            bump(&x);
            expect_err(&loss, &modified(&x, "", 1, 0), op);
        }
    }
    Ok(())
}

#[test]
fn non_leaf_input_changed_in_place_names_its_producer() -> Result<()> {
    for dev in common::devices() {
        let x = seq(&[3], true, &dev);
        let h = x.mul_scalar(2.0)?;
        let loss = h.log()?.sum_all()?;
        h.detach().add_(&h.detach())?;
        let origin = ", which is output 0 of mul_scalarBackward,";
        expect_err(&loss, &modified(&h, origin, 1, 0), "log");
    }
    Ok(())
}

#[test]
fn ops_that_read_no_saved_data_do_not_raise() -> Result<()> {
    // neg, add, sub, sum and the movement ops' backward needs no values: an in-place change after
    // the forward pass changes nothing in their gradients (PyTorch does not raise either).
    for dev in common::devices() {
        let (x, b) = (seq(&[2, 3], true, &dev), seq(&[2, 3], true, &dev));
        let parts = [
            x.neg()?,
            x.add(&b)?,
            x.sub(&b)?,
            x.add_scalar(1.0)?,
            x.view([3, 2])?.permute([1, 0])?,
            x.transpose(0, 1)?.reshape([6])?.view([2, 3])?,
            x.unsqueeze(0)?.expand([2, 2, 3])?.sum_dims([0], false)?,
            x.narrow(1, 1, 2)?,
            Tensor::cat(&[x.clone(), b.clone()], 0)?,
            x.flip([1])?,
        ];
        let loss = parts
            .iter()
            .map(|p| p.sum_all())
            .reduce(|a, p| a?.add(&p?))
            .unwrap()?;
        bump(&x);
        bump(&b);
        loss.backward()?;
        // d/dx: -1 + 1 + 1 + 1 + 1 + 1 + 2 + (0, 1, 1) + 1 + 1; d/db: 1 - 1 + 1
        assert_eq!(grad(&x), vec![8.0, 9.0, 9.0, 8.0, 9.0, 9.0]);
        assert_eq!(grad(&b), vec![1.0; 6]);
    }
    Ok(())
}

#[test]
fn mul_operand_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let (a, b) = (seq(&[2, 2], true, &dev), seq(&[2], false, &dev));
        let loss = a.mul(&b)?.sum_all()?;
        bump(&b);
        expect_err(&loss, &modified(&b, "", 1, 0), "mul");
    }
    Ok(())
}

#[test]
fn div_output_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let (a, b) = (seq(&[3], true, &dev), seq(&[3], true, &dev));
        let y = a.div(&b)?;
        let loss = y.sum_all()?;
        y.detach().mul_(&y.detach())?;
        let origin = ", which is output 0 of divBackward,";
        expect_err(&loss, &modified(&y, origin, 1, 0), "div");
    }
    Ok(())
}

#[test]
fn where_condition_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let (a, b) = (seq(&[4], true, &dev), seq(&[4], true, &dev));
        let cond = a.gt_scalar(0.25)?;
        let loss = Tensor::where_cond(&cond, &a, &b)?.sum_all()?;
        cond.copy_(&cond.logical_and(&a.gt_scalar(10.0)?)?)?;
        expect_err(&loss, &modified(&cond, "", 1, 0), "where");
    }
    Ok(())
}

#[test]
fn matmul_operand_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let (a, b) = (seq(&[2, 3], true, &dev), seq(&[3, 2], true, &dev));
        let loss = a.matmul(&b)?.sum_all()?;
        bump(&b);
        let m = expect_version_err(&loss, 1, 0);
        assert!(m.contains("saved for bmmBackward"), "{m}");
        // bmm, directly: the saved operand is the tensor itself.
        let (a, b) = (seq(&[2, 2, 3], true, &dev), seq(&[2, 3, 2], true, &dev));
        let loss = a.bmm(&b)?.sum_all()?;
        bump(&a);
        expect_err(&loss, &modified(&a, "", 1, 0), "bmm");
    }
    Ok(())
}

#[test]
fn linear_weight_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let lin = Linear::new(3, 2, &dev)?;
        let x = seq(&[4, 3], true, &dev);
        let loss = lin.forward(&x)?.sum_all()?;
        bump(&lin.weight);
        let m = expect_version_err(&loss, 2, 1);
        assert!(m.contains("saved for bmmBackward"), "{m}");
        // With an input that needs no gradient the weight is never read (PyTorch saves it only
        // for the input's gradient): no error, and the weight's gradient is right.
        let x = seq(&[4, 3], false, &dev);
        let loss = lin.forward(&x)?.sum_all()?;
        bump(&lin.weight);
        loss.backward()?;
        common::assert_close(
            "linear weight grad",
            &common::vals(&lin.weight.grad().unwrap()),
            &[2.2, 2.6, 3.0, 2.2, 2.6, 3.0],
            1e-5,
            1e-5,
        );
    }
    Ok(())
}

#[test]
fn einsum_operand_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let (a, b) = (seq(&[2, 3], true, &dev), seq(&[3, 4], true, &dev));
        let loss = Tensor::einsum("ij,jk->ik", &[a.clone(), b.clone()])?.sum_all()?;
        bump(&a);
        expect_version_err(&loss, 1, 0);
    }
    Ok(())
}

#[test]
fn max_pool2d_input_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let x = seq(&[1, 2, 4, 4], true, &dev);
        let loss = F::max_pool2d(&x, [2, 2])?.sum_all()?;
        bump(&x);
        expect_err(&loss, &modified(&x, "", 1, 0), "max_pool2d");
    }
    Ok(())
}

#[test]
fn reduction_inputs_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let x = seq(&[2, 3], true, &dev);
        let loss = x.amax([1], false)?.sum_all()?;
        bump(&x);
        expect_err(&loss, &modified(&x, "", 1, 0), "amax");

        let x = seq(&[2, 3], true, &dev);
        let loss = x.prod_dim(1, false)?.sum_all()?;
        bump(&x);
        expect_err(&loss, &modified(&x, "", 1, 0), "prod");

        // max(dim)'s indices are returned to the caller: changing them must not reroute the
        // gradient.
        let x = seq(&[2, 3], true, &dev);
        let (vals, ind) = x.max_dim(1, true)?;
        let loss = vals.sum_all()?;
        ind.copy_(&ind.zeros_like()?)?;
        expect_err(&loss, &modified(&ind, "", 1, 0), "amax");

        // sum and mean read no values.
        let x = seq(&[2, 3], true, &dev);
        let loss = x.sum_all()?.add(&x.mean_all()?)?;
        bump(&x);
        loss.backward()?;
        common::assert_close(
            "sum+mean",
            &common::vals(&x.grad().unwrap()),
            &[7.0 / 6.0; 6],
            1e-6,
            1e-6,
        );
    }
    Ok(())
}

#[test]
fn norm_weights_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let x = seq(&[2, 3, 2, 2], true, &dev);
        let (w, b) = (seq(&[3], true, &dev), seq(&[3], true, &dev));
        let loss = F::batch_norm_with(
            &x,
            None,
            None,
            F::BatchNormFuncOptions {
                weight: Some(&w),
                bias: Some(&b),
                training: true,
                momentum: 0.1,
                eps: 1e-5,
            },
        )?
        .sum_all()?;
        bump(&w);
        expect_version_err(&loss, 1, 0); // batch_norm

        let x = seq(&[2, 4], true, &dev);
        let (w, b) = (seq(&[4], true, &dev), seq(&[4], true, &dev));
        let loss = F::layer_norm_with(
            &x,
            &[4],
            F::LayerNormFuncOptions {
                weight: Some(&w),
                bias: Some(&b),
                eps: 1e-5,
            },
        )?
        .sum_all()?;
        bump(&w);
        expect_version_err(&loss, 1, 0); // layer_norm
    }
    Ok(())
}

#[test]
fn loss_input_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let x = seq(&[2, 3], true, &dev);
        let t = Tensor::from_slice(&[1.0f32, 0.0, 1.0, 0.0, 0.0, 1.0], [2, 3], &dev)?;
        let loss = F::binary_cross_entropy_with_logits(&x, &t)?;
        bump(&x);
        let m = loss.backward().unwrap_err().to_string();
        assert!(m.contains(&modified(&x, "", 1, 0)), "{m}");
    }
    Ok(())
}

#[test]
fn loss_targets_changed_in_place_keep_the_gradient() -> Result<()> {
    // cross_entropy and mse_loss are composites whose rules read values derived from the target
    // at forward time: the gradient stays the forward pass's (never the new target's).
    for dev in common::devices() {
        let run = |change: bool| -> Result<Vec<f32>> {
            let x = seq(&[3, 4], true, &dev);
            let target = idx(&[0, 3, 1], &[3], &dev);
            let soft = seq(&[3, 4], false, &dev);
            let ce = F::cross_entropy(&x, &target)?;
            let loss = ce.add(&F::mse_loss_with(
                &x,
                &soft,
                F::MseLossOptions {
                    reduction: F::Reduction::Sum,
                    ..Default::default()
                },
            )?)?;
            if change {
                target.copy_(&idx(&[2, 2, 2], &[3], &dev))?;
                bump(&soft);
            }
            loss.backward()?;
            Ok(grad(&x))
        };
        assert_eq!(run(true)?, run(false)?);
    }
    Ok(())
}

#[test]
fn index_tensor_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        let x = seq(&[3, 4], true, &dev);
        let zeros = |shape: &[usize]| idx(&vec![0; shape.iter().product()], shape, &dev);

        let i = idx(&[0, 2, 1, 3, 3, 2], &[3, 2], &dev);
        let loss = x.gather(1, &i)?.sum_all()?;
        i.copy_(&zeros(&[3, 2]))?;
        expect_err(&loss, &modified(&i, "", 1, 0), "gather");

        let src = seq(&[3, 2], true, &dev);
        let i = idx(&[0, 2, 1, 3, 3, 2], &[3, 2], &dev);
        let loss = x.scatter_add(1, &i, &src)?.sum_all()?;
        i.copy_(&zeros(&[3, 2]))?;
        expect_err(&loss, &modified(&i, "", 1, 0), "scatter_add");

        // index_select and embedding save a view of the caller's index (shared version).
        let i = idx(&[2, 0], &[2], &dev);
        let loss = x.index_select(0, &i)?.sum_all()?;
        i.copy_(&zeros(&[2]))?;
        let m = loss.backward().unwrap_err().to_string();
        assert!(
            m.contains("IntTensor") && m.contains("is at version 1; expected version 0 instead"),
            "index_select: {m}"
        );
        let i = idx(&[2, 0, 1], &[3], &dev);
        let loss = i.embedding(&x)?.sum_all()?;
        i.copy_(&zeros(&[3]))?;
        let m = loss.backward().unwrap_err().to_string();
        assert!(
            m.contains("IntTensor") && m.contains("is at version 1; expected version 0 instead"),
            "embedding: {m}"
        );

        // gather reads only the index: changing its input is harmless (as in PyTorch).
        let x = seq(&[3, 4], true, &dev);
        let i = idx(&[0, 0, 1, 3, 3, 2], &[3, 2], &dev);
        let loss = x.gather(1, &i)?.sum_all()?;
        bump(&x);
        loss.backward()?;
        let want = [2., 0., 0., 0., 0., 1., 0., 1., 0., 0., 1., 1.];
        assert_eq!(grad(&x), want);
    }
    Ok(())
}

/// Rows longer than the GPU's fused softmax takes (8,192): there it is a composite.
const COMPOSITE_ROW: usize = 9000;

#[test]
fn softmax_output_changed_in_place() -> Result<()> {
    for dev in common::devices() {
        // Short rows: every backend's fused softmax saves its output, as PyTorch's
        // SoftmaxBackward does. Long rows on a GPU: the composite saves it in its final division.
        let mut cases = vec![(3, "softmax")];
        if dev.is_gpu() {
            cases.push((COMPOSITE_ROW, "div"));
        }
        for (n, op) in cases {
            let x = seq(&[2, n], true, &dev);
            let y = x.softmax(1)?;
            let loss = y.sum_all()?;
            y.detach().mul_(&y.detach())?;
            let origin = format!(", which is output 0 of {op}Backward,");
            expect_err(&loss, &modified(&y, &origin, 1, 0), op);
        }
    }
    Ok(())
}

#[test]
fn log_softmax_output_changed_in_place_is_refused_or_keeps_its_gradient() -> Result<()> {
    // Short rows: every backend's fused log_softmax saves its output, as PyTorch's
    // LogSoftmaxBackward does, so changing it in place is reported. Long rows on a GPU: a
    // composite whose last op (a subtraction) reads nothing, so the gradient comes from the forward
    // pass's intermediates and stays right (never the new values'). Either way, no wrong number.
    for dev in common::devices() {
        let run = |n: usize, change: bool| -> Result<Vec<f32>> {
            let x = seq(&[2, n], true, &dev);
            let y = x.log_softmax(1)?;
            let loss = y.narrow(1, 0, 2)?.sum_all()?;
            if change {
                y.detach().mul_(&y.detach())?;
            }
            loss.backward()?;
            Ok(grad(&x))
        };
        let m = run(3, true)
            .expect_err("the saved output was changed")
            .to_string();
        assert!(
            m.contains("output 0 of log_softmaxBackward, is at version 1"),
            "{m}"
        );
        run(3, false)?;
        if dev.is_gpu() {
            assert_eq!(run(COMPOSITE_ROW, true)?, run(COMPOSITE_ROW, false)?);
        }
    }
    Ok(())
}

#[test]
fn ordinary_training_is_unaffected() -> Result<()> {
    // Parameters change in place between iterations (after backward): each forward saves the new
    // versions, so nothing is reported, and the loss goes down.
    for dev in common::devices() {
        wgtorch::manual_seed(0);
        let conv = Conv2d::with_options(
            1,
            2,
            3,
            Conv2dOptions {
                padding: 1.into(),
                ..Default::default()
            },
            &dev,
        )?;
        let lin = Linear::new(2 * 2 * 2, 3, &dev)?;
        let mut params = conv.parameters();
        params.extend(lin.parameters());
        let mut opt = Sgd::new(params, 0.1)?;
        let x = Tensor::randn([4, 1, 4, 4], &dev)?;
        let target = idx(&[0, 1, 2, 1], &[4], &dev);
        let mut losses = Vec::new();
        for _ in 0..5 {
            opt.zero_grad();
            let h = F::max_pool2d(&conv.forward(&x)?.relu()?, [2, 2])?;
            let logits = lin.forward(&h.reshape([4, -1])?)?.tanh()?.exp()?;
            let loss = F::cross_entropy(&logits, &target)?;
            loss.backward_with(None, true, false)?;
            loss.backward()?; // the retained graph still sees the same versions
            losses.push(loss.item()?);
            opt.step()?;
        }
        assert!(losses[4] < losses[0], "{losses:?}");
    }
    Ok(())
}

#[test]
fn saved_outputs_do_not_keep_their_node_alive() -> Result<()> {
    // An op's rule that reads its own output saves it without the autograd link: no cycle
    // node -> rule -> output -> node, so dropping the output frees the node (and the storage).
    for dev in common::devices() {
        let x = seq(&[3], true, &dev);
        for y in [x.exp()?, x.div(&x.add_scalar(1.0)?)?, x.amax([0], true)?] {
            let node = std::sync::Arc::downgrade(y.grad_fn().expect("a node"));
            drop(y);
            assert!(node.upgrade().is_none(), "the node outlived its output");
        }
    }
    Ok(())
}
