//! PyTorch-shaped lines compile and mean what they mean in PyTorch: scalar operators with
//! PyTorch's result types, one shape-argument type (`[-1, 5]`, `&[-1, 5]`, `Vec`s, `x.shape()`,
//! `-1`, `[]`) with PyTorch's errors, the prelude, and `Error` constructors for user code.

// The borrowed forms (`&[-1, 5]`) are what these tests check.
#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{devices, vals};
use wgtorch::prelude::*;

/// The message a panicking operator gives.
fn panic_message(f: impl FnOnce() -> Tensor) -> String {
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .expect_err("the operator should panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn check(t: &Tensor, dtype: DType, want: &[f64]) {
    assert_eq!(t.dtype(), dtype, "dtype of {:?}", vals(t));
    common::assert_close(&format!("{dtype}"), &vals(t), want, 0.0, 0.0);
}

#[test]
fn scalar_operators_on_float_tensors() -> Result<()> {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1f32, 2.0, 4.0], [3], &dev)?;
        check(&(&x * 0.5), DType::F32, &[0.5, 1.0, 2.0]);
        check(&(0.5 * &x), DType::F32, &[0.5, 1.0, 2.0]);
        check(&(&x + 1.0), DType::F32, &[2.0, 3.0, 5.0]);
        check(&(1.0 + &x), DType::F32, &[2.0, 3.0, 5.0]);
        check(&(&x - 1.0), DType::F32, &[0.0, 1.0, 3.0]);
        check(&(1.0 - &x), DType::F32, &[0.0, -1.0, -3.0]);
        check(&(&x / 4.0), DType::F32, &[0.25, 0.5, 1.0]);
        // `c / x` is a true division in f32, not `c * (1 / x)`.
        let y = 2.0 / &Tensor::from_vec(vec![3f32, 7.0], [2], &dev)?;
        check(&y, DType::F32, &[(2f32 / 3.0) as f64, (2f32 / 7.0) as f64]);
        // Integer and f32 scalars, owned tensors.
        check(&(&x * 2), DType::F32, &[2.0, 4.0, 8.0]);
        check(&(2 * &x), DType::F32, &[2.0, 4.0, 8.0]);
        check(&(x.clone() * 2.0), DType::F32, &[2.0, 4.0, 8.0]);
        check(&(3 - x.clone()), DType::F32, &[2.0, 1.0, -1.0]);
        check(&(x.clone() + 1), DType::F32, &[2.0, 3.0, 5.0]);
        // Chains read like Python, and methods apply to an operator's result directly.
        check(&(&x * 2.0).sum_all()?, DType::F32, &[14.0]);
        check(&(0.5 * &x + 1).abs()?, DType::F32, &[1.5, 2.0, 3.0]);
        check(&(&x * 2.0 + 1.0), DType::F32, &[3.0, 5.0, 9.0]);
        check(&((&x - 1.0) / 2 * -1.0), DType::F32, &[0.0, -0.5, -1.5]);
        // Tensor-tensor operators on every ownership combination.
        check(&(&x + &x), DType::F32, &[2.0, 4.0, 8.0]);
        check(&(x.clone() - &x), DType::F32, &[0.0, 0.0, 0.0]);
        check(&(&x * x.clone()), DType::F32, &[1.0, 4.0, 16.0]);
        check(&(x.clone() / x.clone()), DType::F32, &[1.0, 1.0, 1.0]);
        check(&(-x.clone()), DType::F32, &[-1.0, -2.0, -4.0]);
        // Half precision stays half precision, with the scalar on either side.
        let h = x.to_dtype(DType::F16)?;
        check(&(&h / 2.0), DType::F16, &[0.5, 1.0, 2.0]);
        check(&(h.div_scalar(2.0)?), DType::F16, &[0.5, 1.0, 2.0]);
        check(&(4.0 / &h), DType::F16, &[4.0, 2.0, 1.0]);
        check(&(1.0 - &h), DType::F16, &[0.0, -1.0, -3.0]);
        check(&(&h * 2), DType::F16, &[2.0, 4.0, 8.0]);
    }
    Ok(())
}

#[test]
fn scalar_operators_on_int_and_bool_tensors_promote_as_pytorch() -> Result<()> {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1i32, 2, 4], [3], &dev)?;
        // int tensor * int scalar stays int; with a float scalar it is float32.
        check(&(&x * 2), DType::I32, &[2.0, 4.0, 8.0]);
        check(&(2 * &x), DType::I32, &[2.0, 4.0, 8.0]);
        check(&(&x + 1), DType::I32, &[2.0, 3.0, 5.0]);
        check(&x.add_scalar(1i64)?, DType::I32, &[2.0, 3.0, 5.0]);
        check(&(10 - &x), DType::I32, &[9.0, 8.0, 6.0]);
        check(&(&x - 1), DType::I32, &[0.0, 1.0, 3.0]);
        check(&(&x * 0.5), DType::F32, &[0.5, 1.0, 2.0]);
        check(&(0.5 * &x), DType::F32, &[0.5, 1.0, 2.0]);
        check(&(2.5 - &x), DType::F32, &[1.5, 0.5, -1.5]);
        // Division is true division: float32 even for two integers.
        check(&(&x / 2), DType::F32, &[0.5, 1.0, 2.0]);
        check(&(4 / &x), DType::F32, &[4.0, 2.0, 1.0]);
        // `c - x` converts before negating: no wrap at int32's minimum with a float scalar.
        let m = Tensor::from_vec(vec![i32::MIN], [1], &dev)?;
        check(&(0.5 - &m), DType::F32, &[(0.5f32 + 2147483648f32) as f64]);
        // Integer arithmetic wraps as PyTorch's int32 does.
        check(&(0 - &m), DType::I32, &[i32::MIN as f64]);
        // An integer scalar past int32 is refused, not truncated.
        let e = x.mul_scalar(1i64 << 40).unwrap_err().to_string();
        assert!(e.contains("cannot be converted to type int32"), "{e}");

        let b = Tensor::from_vec(vec![true, false], [2], &dev)?;
        check(&(&b + 1), DType::I64, &[2.0, 1.0]); // bool + int scalar is int64, as in PyTorch
        check(&(&b * 2.5), DType::F32, &[2.5, 0.0]);
        // `-` with a bool tensor is refused, as in PyTorch, on either side.
        for err in [b.sub_scalar(1).unwrap_err(), b.rsub_scalar(1).unwrap_err()] {
            assert!(
                err.to_string()
                    .contains("Subtraction, the `-` operator, with a bool tensor is not supported"),
                "{err}"
            );
        }
        assert!(panic_message(|| 1 - &b).contains("with a bool tensor is not supported"));
        assert!(panic_message(|| &b - 1.0).contains("with a bool tensor is not supported"));
    }
    Ok(())
}

#[test]
fn operators_panic_with_the_methods_message() -> Result<()> {
    for dev in devices() {
        let a = Tensor::zeros([2, 3], &dev)?;
        let b = Tensor::zeros([4], &dev)?;
        let want = a.add(&b).unwrap_err().to_string();
        assert!(want.contains("must match the size"), "{want}");
        assert_eq!(panic_message(|| &a + &b), want);
        assert_eq!(panic_message(|| a.clone() + b.clone()), want);
        assert_eq!(
            panic_message(|| &a * &b),
            a.mul(&b).unwrap_err().to_string()
        );
    }
    Ok(())
}

#[test]
fn scalar_operators_are_differentiable() -> Result<()> {
    for dev in devices() {
        let w = Tensor::from_vec(vec![1f32, 2.0, 4.0], [3], &dev)?.requires_grad_(true);
        // y = (1 - w) * 2 + 2 / w + w / 4 - 3  ->  dy/dw = -2 - 2 / w^2 + 1 / 4
        let y = (1.0 - &w) * 2 + 2.0 / &w + &w / 4 - 3.0;
        y.sum_all()?.backward()?;
        let g = vals(&w.grad().expect("grad"));
        let want: Vec<f64> = [1.0, 2.0, 4.0]
            .iter()
            .map(|w: &f64| -2.0 - 2.0 / (w * w) + 0.25)
            .collect();
        common::assert_close("grad", &g, &want, 1e-6, 1e-6);
    }
    Ok(())
}

#[test]
fn shape_arguments_take_every_form() -> Result<()> {
    for dev in devices() {
        let x = Tensor::arange(0.0, 10.0, 1.0, &dev)?;
        let n: usize = 5;
        let sizes: Vec<usize> = vec![2, 5];
        let signed: Vec<isize> = vec![-1, 5];
        let long: Vec<i64> = vec![5, -1];
        let forms = [
            x.view([-1, 5])?,
            x.view(&[-1, 5])?,
            x.view([2usize, 5])?,
            x.view(&[2, n])?,
            x.view(&sizes)?,
            x.view(sizes.clone())?,
            x.view(&sizes[..])?,
            x.view(&signed)?,
            x.view(signed.as_slice())?,
            x.reshape([-1, 5])?,
            x.reshape(&[2, -1])?,
            x.reshape(vec![2, 5])?,
            x.reshape(Tensor::zeros([2, 5], &dev)?.shape())?,
        ];
        for t in &forms {
            assert_eq!(t.shape(), &[2, 5]);
            assert_eq!(vals(t), (0..10).map(f64::from).collect::<Vec<_>>());
        }
        assert_eq!(x.view(&long)?.shape(), &[5, 2]);
        // A single integer is a one-entry list; `[]` is 0-d.
        assert_eq!(forms[0].view(-1)?.shape(), &[10]);
        assert_eq!(Tensor::zeros(4, &dev)?.shape(), &[4]);
        let s = Tensor::zeros([], &dev)?;
        assert_eq!(s.ndim(), 0);
        assert_eq!(s.view([1, 1])?.view([])?.ndim(), 0);
        assert_eq!(s.reshape(&[])?.ndim(), 0);
        assert_eq!(Tensor::from_vec(vec![1f32], [], &dev)?.ndim(), 0);
        // A non-contiguous input: reshape copies, view refuses.
        let t = forms[0].t()?;
        assert_eq!(vals(&t.reshape([-1])?), vals(&t.contiguous()?.view(-1)?));
        assert!(t.view([-1]).is_err());

        // Constructors.
        assert_eq!(Tensor::ones(&sizes, &dev)?.shape(), &[2, 5]);
        assert_eq!(Tensor::full(vec![3, 1], 2.0, &dev)?.shape(), &[3, 1]);
        assert_eq!(Tensor::rand([2, 3], &dev)?.shape(), &[2, 3]);
        assert_eq!(Tensor::randn(&[2usize, 3][..], &dev)?.shape(), &[2, 3]);
        assert_eq!(
            Tensor::full_dtype([2], 1.0, DType::I32, &dev)?.dtype(),
            DType::I32
        );

        // Dim lists: negative dims wrap.
        let m = forms[0].clone(); // [[0..5], [5..10]]
        assert_eq!(m.permute([1, 0])?.shape(), &[5, 2]);
        assert_eq!(vals(&m.permute([-1, 0])?), vals(&m.t()?.contiguous()?));
        assert_eq!(vals(&m.flip(0)?)[..5], [5.0, 6.0, 7.0, 8.0, 9.0]);
        assert_eq!(vals(&m.flip([-1])?)[..5], [4.0, 3.0, 2.0, 1.0, 0.0]);
        assert_eq!(vals(&m.sum_dims(-1, false)?), [10.0, 35.0]);
        assert_eq!(vals(&m.sum_dims([0, -1], false)?), [45.0]);
        assert_eq!(vals(&m.mean_dims(&[0], true)?), [2.5, 3.5, 4.5, 5.5, 6.5]);
        assert_eq!(vals(&m.amax(vec![1], false)?), [4.0, 9.0]);
        assert_eq!(m.view([2, 5, 1])?.squeeze_dims([-1])?.shape(), &[2, 5]);
        assert_eq!(m.view([2, 5, 1])?.squeeze_dims([])?.shape(), &[2, 5, 1]);
        // Sizes: repeat, expand (-1 keeps a size), split.
        assert_eq!(m.repeat([2, 1])?.shape(), &[4, 5]);
        let col = Tensor::from_vec(vec![1f32, 2.0], [2, 1], &dev)?;
        let e = col.expand([3, -1, 4])?;
        assert_eq!(e.shape(), &[3, 2, 4]);
        assert_eq!(vals(&e.sum_all()?), [3.0 * 4.0 * 3.0]);
        assert_eq!(col.expand(&[-1, 3])?.shape(), &[2, 3]);
        let parts = x.split_sizes([3, 7], 0)?;
        assert_eq!((parts[0].numel(), parts[1].numel()), (3, 7));
    }
    Ok(())
}

#[test]
fn bad_shape_arguments_give_pytorchs_errors() -> Result<()> {
    for dev in devices() {
        let x = Tensor::arange(0.0, 10.0, 1.0, &dev)?;
        let err = |r: Result<Tensor>| r.unwrap_err().to_string();
        let e = err(x.view([-1, -1]));
        assert!(
            e.starts_with("view: only one dimension can be inferred"),
            "{e}"
        );
        let e = err(x.view([-1, 7]));
        assert!(
            e.contains("shape '[-1, 7]' is invalid for input of size 10"),
            "{e}"
        );
        let e = err(x.reshape([3, 3]));
        assert!(
            e.starts_with("reshape: shape '[3, 3]' is invalid for input of size 10"),
            "{e}"
        );
        let e = err(x.view([-2, 5]));
        assert!(
            e.contains("invalid shape dimension -2 at index 0 of shape [-2, 5]"),
            "{e}"
        );
        let e = err(x.view(&[0, -1]));
        assert!(
            e.contains("shape '[0, -1]' is invalid for input of size 10"),
            "{e}"
        );
        let e = err(Tensor::zeros([0], &dev)?.view([0, -1]));
        assert!(
            e.contains("cannot reshape tensor of 0 elements into shape [0, -1]"),
            "{e}"
        );
        let e = err(x.view([usize::MAX]));
        assert!(
            e.contains(&format!(
                "shape [{0}] has too many elements (size {0} is more",
                usize::MAX
            )),
            "{e}"
        );

        // Creation refuses negative sizes, naming the op.
        for (op, r) in [
            ("zeros", Tensor::zeros([-1, 5], &dev)),
            ("ones", Tensor::ones([-1, 5], &dev)),
            ("rand", Tensor::rand([-1, 5], &dev)),
            ("randn", Tensor::randn([-1, 5], &dev)),
            ("full", Tensor::full([-1, 5], 1.0, &dev)),
            ("from_vec", Tensor::from_vec(vec![0f32; 5], [-1, 5], &dev)),
        ] {
            let e = err(r);
            assert_eq!(
                e,
                format!("{op}: Trying to create tensor with negative dimension -1: [-1, 5]")
            );
        }

        let col = Tensor::zeros([2], &dev)?;
        let e = err(col.expand([-1, 2]));
        assert!(
            e.contains("The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0"),
            "{e}"
        );
        let e = err(col.expand([-2]));
        assert!(
            e.contains("The expanded size of the tensor (-2) must match the existing size (2) at non-singleton dimension 0"),
            "{e}"
        );
        let e = err(Tensor::zeros([1], &dev)?.expand([-2]));
        assert!(
            e.contains("Trying to create tensor with negative dimension -2: [-2]"),
            "{e}"
        );
        let e = err(col.repeat([-1]));
        assert!(
            e.starts_with("repeat: Trying to create tensor with negative dimension"),
            "{e}"
        );
        let e = x.split_sizes([-1, 11], 0).unwrap_err().to_string();
        assert!(
            e.contains("split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=[-1, 11]"),
            "{e}"
        );
        let m = x.view([2, 5])?;
        let e = err(m.permute([0, 2]));
        assert!(e.contains("Dimension out of range"), "{e}");
        let e = err(m.sum_dims([1, -1], false));
        assert!(
            e.contains("dim 1 appears multiple times in the list of dims"),
            "{e}"
        );
        let e = err(m.flip([2]));
        assert!(e.starts_with("flip: Dimension out of range"), "{e}");
    }
    Ok(())
}

/// A user function returning wgtorch's `Result`, with its own errors and `?` on I/O.
fn load_scale(path: &std::path::Path, x: &Tensor) -> Result<Tensor> {
    let text = std::fs::read_to_string(path)?;
    let s: f64 = text
        .trim()
        .parse()
        .map_err(|e| Error::msg(format!("bad scale {text:?}: {e}")))?;
    if s <= 0.0 {
        return Err(Error::arg(
            "load_scale",
            format!("scale must be positive, got {s}"),
        ));
    }
    if x.ndim() != 2 {
        return Err(Error::shape(
            "load_scale",
            format!("expected 2-D input, got {:?}", x.shape()),
        ));
    }
    Ok(x * s)
}

#[test]
fn user_code_builds_wgtorch_errors() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("wgtorch-ergonomics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::from)?;
    let file = dir.join("scale.txt");
    let x = Tensor::ones([2, 2], &Device::Cpu)?;

    let missing = load_scale(&dir.join("missing.txt"), &x).unwrap_err();
    assert!(matches!(missing, Error::Io { .. }), "{missing:?}");
    assert!(!missing.to_string().starts_with(':'), "{missing}");

    std::fs::write(&file, "abc").map_err(Error::from)?;
    let e = load_scale(&file, &x).unwrap_err().to_string();
    assert!(
        e.starts_with("bad scale \"abc\": invalid float literal"),
        "{e}"
    );

    std::fs::write(&file, "-1").map_err(Error::from)?;
    let e = load_scale(&file, &x).unwrap_err().to_string();
    assert_eq!(e, "load_scale: scale must be positive, got -1");

    std::fs::write(&file, "3").map_err(Error::from)?;
    let e = load_scale(&file, &Tensor::ones(3, &Device::Cpu)?).unwrap_err();
    assert_eq!(e.to_string(), "load_scale: expected 2-D input, got [3]");
    assert!(matches!(e, Error::Shape { .. }));
    assert_eq!(vals(&load_scale(&file, &x)?), [3.0; 4]);

    std::fs::remove_dir_all(&dir).map_err(Error::from)?;
    Ok(())
}

/// The prelude holds what a PyTorch program uses, under PyTorch's names.
#[test]
fn prelude_brings_pytorchs_names() -> Result<()> {
    fn takes_module<M: Module + ModuleExt>(m: &M) -> usize {
        m.parameters().len()
    }
    fn takes_optimizer(o: &mut dyn Optimizer) -> Result<()> {
        o.step()?;
        o.zero_grad();
        Ok(())
    }
    let _ = takes_module::<nn::Sequential>;
    let _: F::Reduction = F::Reduction::Mean;
    let _: Scalar = 2.into();
    for dev in devices() {
        manual_seed(0);
        let w = Tensor::randn([3], &dev)?.requires_grad_(true);
        let before = vals(&w);
        let mut opt = optim::Sgd::new(vec![w.clone()], 0.5)?;
        (&w * 2.0).sum_all()?.backward()?;
        takes_optimizer(&mut opt)?;
        let after = vals(&w);
        let want: Vec<f64> = before.iter().map(|b| b - 1.0).collect();
        common::assert_close("sgd", &after, &want, 1e-6, 1e-6);
        let _g = no_grad();
        assert!(!(&w * 1.0).requires_grad());
    }
    Ok(())
}
