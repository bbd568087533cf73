//! The bad-input matrix: op × bad-input class × device. Every row must give an `Err` whose message
//! names the op and says what was wrong (PyTorch's words where PyTorch has them) — never `Ok`, a
//! panic or a wrong number. Device-mismatch rows run when a GPU is present (always under CI).

use crate::common;
use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Tensor};

/// What kind of bad input a row feeds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Class {
    Shape,
    DType,
    Device,
    Dim,
    Index,
    Argument,
}

/// One row: the op it calls, its class, the call (on `dev`, with `other` a second device for
/// device rows) and the text the error must hold besides the op's name.
struct Row {
    op: &'static str,
    class: Class,
    expect: &'static str,
    call: fn(&Device, &Device) -> wgtorch::Result<()>,
}

fn f32s(shape: &[usize], dev: &Device) -> wgtorch::Result<Tensor> {
    Tensor::ones(shape, dev)
}

fn idx(v: &[i32], dev: &Device) -> wgtorch::Result<Tensor> {
    Tensor::from_slice(v, [v.len()], dev)
}

macro_rules! row {
    ($op:literal, $class:ident, $expect:literal, |$d:ident, $o:ident| $body:expr) => {
        Row {
            op: $op,
            class: Class::$class,
            expect: $expect,
            call: |$d: &Device, $o: &Device| {
                let _ = ($d, $o);
                $body.map(|_| ())
            },
        }
    };
}

fn rows() -> Vec<Row> {
    vec![
        // Shapes that do not agree.
        row!("add", Shape, "must match the size", |d, o| f32s(
            &[2, 3],
            d
        )?
        .add(&f32s(&[4], d)?)),
        row!("matmul", Shape, "cannot be multiplied", |d, o| f32s(
            &[2, 3],
            d
        )?
        .matmul(&f32s(&[2, 3], d)?)),
        row!("bmm", Shape, "", |d, o| f32s(&[2, 3, 4], d)?
            .bmm(&f32s(&[3, 4, 5], d)?)),
        row!("linear", Shape, "", |d, o| f32s(&[2, 3], d)?
            .linear(&f32s(&[4, 5], d)?, None)),
        row!("conv2d", Shape, "to have 2 channels", |d, o| F::conv2d(
            &f32s(&[2, 3, 8, 8], d)?,
            &f32s(&[4, 2, 3, 3], d)?,
            None
        )),
        row!("conv2d", Shape, "Kernel size can't be greater", |d, o| {
            F::conv2d(&f32s(&[1, 1, 2, 2], d)?, &f32s(&[1, 1, 3, 3], d)?, None)
        }),
        row!("max_pool2d", Shape, "", |d, o| F::max_pool2d(
            &f32s(&[4], d)?,
            [2, 2]
        )),
        row!("cat", Shape, "Sizes of tensors must match", |d, o| {
            Tensor::cat(&[f32s(&[2, 3], d)?, f32s(&[2, 4], d)?], 0)
        }),
        row!("stack", Shape, "", |d, o| Tensor::stack(
            &[f32s(&[2, 3], d)?, f32s(&[3, 2], d)?],
            0
        )),
        row!(
            "reshape",
            Shape,
            "is invalid for input of size 6",
            |d, o| f32s(&[2, 3], d)?.reshape([4, 2])
        ),
        row!("view", Shape, "Use .reshape(...) instead", |d, o| f32s(
            &[2, 3],
            d
        )?
        .t()?
        .view([6])),
        row!("expand", Shape, "", |d, o| f32s(&[2, 3], d)?.expand([2, 4])),
        row!("where", Shape, "must match the size", |d, o| {
            Tensor::where_cond(
                &f32s(&[2], d)?.gt_scalar(0.0)?,
                &f32s(&[3], d)?,
                &f32s(&[3], d)?,
            )
        }),
        row!("cross_entropy", Shape, "", |d, o| F::cross_entropy(
            &f32s(&[2, 3], d)?,
            &idx(&[0, 1, 2], d)?,
        )),
        row!("mse_loss", Shape, "must match", |d, o| F::mse_loss(
            &f32s(&[2, 3], d)?,
            &f32s(&[4], d)?
        )),
        row!("layer_norm", Shape, "", |d, o| F::layer_norm_with(
            &f32s(&[2, 3], d)?,
            &[4],
            F::LayerNormFuncOptions {
                weight: None,
                bias: None,
                eps: 1e-5
            }
        )),
        row!("batch_norm", Shape, "", |d, o| F::batch_norm_with(
            &f32s(&[3], d)?,
            None,
            None,
            F::BatchNormFuncOptions {
                weight: None,
                bias: None,
                training: true,
                momentum: 0.1,
                eps: 1e-5
            }
        )),
        row!("einsum", Shape, "", |d, o| Tensor::einsum(
            "ij,jk->ik",
            &[f32s(&[2, 3], d)?, f32s(&[4, 5], d)?]
        )),
        row!("einsum", Argument, "", |d, o| Tensor::einsum(
            "ij,jk->iz",
            &[f32s(&[2, 3], d)?, f32s(&[3, 5], d)?]
        )),
        row!("copy_", Shape, "", |d, o| f32s(&[2, 3], d)?
            .copy_(&f32s(&[4], d)?)),
        row!("masked_fill", Shape, "", |d, o| f32s(&[2, 3], d)?
            .masked_fill(&f32s(&[4], d)?.gt_scalar(0.0)?, 1.0)),
        // Dtypes an op does not take.
        row!("matmul", DType, "int32", |d, o| f32s(&[2, 2], d)?
            .matmul(&f32s(&[2, 2], d)?.to_dtype(DType::I32)?)),
        row!("index_select", DType, "int64", |d, o| f32s(&[3], d)?
            .index_select(0, &f32s(&[2], d)?)),
        row!("gather", DType, "int64", |d, o| f32s(&[3], d)?
            .gather(0, &f32s(&[2], d)?)),
        row!("cross_entropy", DType, "", |d, o| F::cross_entropy(
            &f32s(&[2, 3], d)?,
            &f32s(&[2], d)?,
        )),
        row!("where", DType, "", |d, o| Tensor::where_cond(
            &f32s(&[2], d)?,
            &f32s(&[2], d)?,
            &f32s(&[2], d)?
        )),
        // Tensors on two devices.
        row!(
            "add",
            Device,
            "Expected all tensors to be on the same device",
            |d, o| { f32s(&[2], d)?.add(&f32s(&[2], o)?) }
        ),
        row!(
            "matmul",
            Device,
            "Expected all tensors to be on the same device",
            |d, o| { f32s(&[2, 2], d)?.matmul(&f32s(&[2, 2], o)?) }
        ),
        row!(
            "conv2d",
            Device,
            "Expected all tensors to be on the same device",
            |d, o| { F::conv2d(&f32s(&[1, 1, 4, 4], d)?, &f32s(&[1, 1, 3, 3], o)?, None) }
        ),
        row!(
            "cat",
            Device,
            "Expected all tensors to be on the same device",
            |d, o| { Tensor::cat(&[f32s(&[2], d)?, f32s(&[2], o)?], 0) }
        ),
        row!(
            "index_select",
            Device,
            "Expected all tensors to be on the same device",
            |d, o| { f32s(&[3], d)?.index_select(0, &idx(&[0], o)?) }
        ),
        row!("copy_", Device, "", |d, o| {
            // copy_ across devices is allowed, as in PyTorch; across unbroadcastable shapes it is not.
            f32s(&[2], d)?.copy_(&f32s(&[3], o)?)
        }),
        // Dims out of range.
        row!("sum", Dim, "Dimension out of range", |d, o| f32s(
            &[2, 3],
            d
        )?
        .sum_dims([2], false)),
        row!("softmax", Dim, "Dimension out of range", |d, o| f32s(
            &[2, 3],
            d
        )?
        .softmax(5)),
        row!("cumsum", Dim, "Dimension out of range", |d, o| f32s(
            &[2, 3],
            d
        )?
        .cumsum(-3)),
        row!("transpose", Dim, "Dimension out of range", |d, o| f32s(
            &[2, 3],
            d
        )?
        .transpose(0, 2)),
        row!("permute", Dim, "", |d, o| f32s(&[2, 3], d)?.permute([0, 0])),
        row!("unsqueeze", Dim, "Dimension out of range", |d, o| f32s(
            &[2, 3],
            d
        )?
        .unsqueeze(4)),
        row!("max", Dim, "Dimension out of range", |d, o| f32s(
            &[2, 3],
            d
        )?
        .max_dim(2, false)),
        row!("flip", Dim, "appears multiple times", |d, o| f32s(
            &[2, 3],
            d
        )?
        .flip([0, 0])),
        row!("cat", Dim, "zero-dimensional tensor", |d, o| {
            let s = Tensor::scalar(1.0f32, d)?;
            Tensor::cat(&[s.clone(), s], 0)
        }),
        row!("narrow", Dim, "", |d, o| Tensor::scalar(1.0f32, d)?
            .narrow(0, 0, 1)),
        // Indices out of range (checked on the device for GPU tensors).
        row!("index_select", Index, "out of", |d, o| f32s(&[3], d)?
            .index_select(0, &idx(&[0, 5], d)?)),
        row!("index_select", Index, "out of", |d, o| f32s(&[0, 4], d)?
            .index_select(0, &idx(&[0], d)?)),
        row!("gather", Index, "out of", |d, o| f32s(&[2, 3], d)?
            .gather(1, &Tensor::from_slice(&[0i32, 3], [2, 1], d)?)),
        row!("scatter_add", Index, "out of", |d, o| f32s(&[3], d)?
            .scatter_add(0, &idx(&[0, 5], d)?, &f32s(&[2], d)?)),
        row!("one_hot", Index, "", |d, o| idx(&[0, 5], d)?.one_hot(3)),
        row!("one_hot", Index, "", |d, o| idx(&[0, -1], d)?.one_hot(3)),
        row!("embedding", Index, "out of", |d, o| idx(&[0, 4], d)?
            .embedding(&f32s(&[4, 2], d)?)),
        row!("cross_entropy", Index, "out of", |d, o| F::cross_entropy(
            &f32s(&[2, 3], d)?,
            &idx(&[0, 3], d)?,
        )),
        row!("nll_loss", Index, "out of", |d, o| F::nll_loss(
            &f32s(&[2, 3], d)?,
            &idx(&[0, -2], d)?
        )),
        // Argument values no op can honour.
        row!("narrow", Argument, "", |d, o| f32s(&[4], d)?.narrow(
            0,
            usize::MAX,
            2
        )),
        row!("narrow", Argument, "", |d, o| f32s(&[4], d)?
            .narrow(0, 3, 2)),
        row!("slice", Argument, "", |d, o| f32s(&[4], d)?
            .slice(0, 0, 4, 0)),
        row!("arange", Argument, "", |d, o| Tensor::arange(
            0.0,
            f64::NAN,
            1.0,
            d
        )),
        row!("arange", Argument, "", |d, o| Tensor::arange(
            0.0, 4.0, 0.0, d
        )),
        row!("arange", Argument, "", |d, o| Tensor::arange(
            0.0, 4.0, -1.0, d
        )),
        row!(
            "zeros",
            Argument,
            "too many elements",
            |d, o| Tensor::zeros([1usize << 32, 1 << 32], d)
        ),
        row!("conv2d", Argument, "", |d, o| F::conv2d_with(
            &f32s(&[1, 1, 4, 4], d)?,
            &f32s(&[1, 1, 3, 3], d)?,
            None,
            F::Conv2dFuncOptions {
                stride: [0, 1].into(),
                ..Default::default()
            }
        )),
        row!(
            "max_pool2d",
            Argument,
            "pad should be at most half",
            |d, o| {
                F::max_pool2d_with(
                    &f32s(&[1, 1, 4, 4], d)?,
                    [2, 2],
                    F::MaxPool2dOptions {
                        padding: [2, 2].into(),
                        ..Default::default()
                    },
                )
            }
        ),
        row!("cross_entropy", Argument, "label_smoothing", |d, o| {
            F::cross_entropy_with(
                &f32s(&[2, 3], d)?,
                &idx(&[0, 1], d)?,
                F::CrossEntropyOptions {
                    label_smoothing: 1.5,
                    ..Default::default()
                },
            )
        }),
        row!("split", Argument, "", |d, o| f32s(&[4], d)?.split(0, 0)),
        row!("chunk", Argument, "", |d, o| f32s(&[4], d)?.chunk(0, 0)),
    ]
}

/// Wait for the device's queued work, surfacing any error it recorded.
fn synchronize(dev: &Device) -> wgtorch::Result<()> {
    match dev {
        Device::Cpu => Ok(()),
        Device::Gpu(n) => wgtorch::backend::gpu::context(*n)?.synchronize(),
    }
}

/// The row's verdict on one device: `None` when it gave the right error, else what went wrong.
fn check(row: &Row, dev: &Device, other: &Device) -> Option<String> {
    let what = format!("{} ({:?}) on {dev}", row.op, row.class);
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // A GPU error (e.g. a device-side index check) may surface at the next synchronisation.
        (row.call)(dev, other).and_then(|_| synchronize(dev))
    }));
    let err = match res {
        Err(_) => return Some(format!("{what}: panicked instead of returning an Err")),
        Ok(Ok(())) => return Some(format!("{what}: returned Ok for bad input")),
        Ok(Err(e)) => e.to_string(),
    };
    if !err.contains(row.op) {
        Some(format!("{what}: the error does not name the op: {err}"))
    } else if !err.contains(row.expect) {
        Some(format!("{what}: expected \"{}\" in: {err}", row.expect))
    } else {
        None
    }
}

#[test]
fn every_row_errs_naming_the_op_on_every_device() {
    let devices = common::devices();
    let mut failures = Vec::new();
    for dev in &devices {
        let other = devices.iter().find(|d| *d != dev);
        for row in rows() {
            let verdict = match (row.class, other) {
                (Class::Device, Some(o)) => check(&row, dev, o),
                (Class::Device, None) => None,
                _ => check(&row, dev, dev),
            };
            failures.extend(verdict);
        }
    }
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_matrix_covers_every_class() {
    let rows = rows();
    for class in [
        Class::Shape,
        Class::DType,
        Class::Device,
        Class::Dim,
        Class::Index,
        Class::Argument,
    ] {
        assert!(
            rows.iter().filter(|r| r.class == class).count() >= 3,
            "{class:?} has fewer than three rows"
        );
    }
}
