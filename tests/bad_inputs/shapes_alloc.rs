//! Checked shape arithmetic, fallible host allocation, 0-d tensors, overlapping copies and
//! movement-op arguments (issue #11 defects 3, 7, 8 (CPU), 9 and parts of 4). Every test runs on
//! the CPU and on the GPU when there is one; no test allocates more than a few bytes: huge sizes
//! are refused by checked arithmetic or by a reservation the allocator cannot grant.

use crate::common::{devices, vals};
use std::sync::mpsc;
use std::time::Duration;
use wgtorch::nn::functional::{conv2d_with, max_pool2d_with, Conv2dFuncOptions, MaxPool2dOptions};
use wgtorch::nn::{Linear, ModuleExt};
use wgtorch::{DType, Device, Error, Result, Tensor};

/// The error's message must contain every one of `parts`.
fn expect_err<T: std::fmt::Debug>(what: &str, r: Result<T>, parts: &[&str]) -> Error {
    let e = match r {
        Ok(v) => panic!("{what}: expected an error, got Ok({v:?})"),
        Err(e) => e,
    };
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "{what}: {msg:?} does not mention {p:?}");
    }
    e
}

/// Run `f` on another thread and fail (instead of hanging the suite) if it takes over a minute.
fn within_a_minute(what: &str, f: impl FnOnce() -> Result<()> + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(r) => r.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => panic!("{what}: did not finish within a minute (deadlock?)"),
    }
}

/// A tensor of `shape` that costs one element of memory (an expanded scalar).
fn huge_view(shape: &[usize], dev: &Device) -> Result<Tensor> {
    Tensor::zeros(vec![1; shape.len()], dev)?.expand(shape)
}

const TOO_MANY: &str = "has too many elements";

// ---- defect 3: shape arithmetic never wraps ----

#[test]
fn zeros_past_usize_elements_is_an_error() {
    for dev in devices() {
        let shape = [1usize << 32, 1 << 32];
        expect_err(
            "zeros",
            Tensor::zeros(shape, &dev),
            &[TOO_MANY, "4294967296"],
        );
        expect_err("ones", Tensor::ones(shape, &dev), &[TOO_MANY]);
        expect_err("rand", Tensor::rand(shape, &dev), &[TOO_MANY]);
        expect_err("randn", Tensor::randn(shape, &dev), &[TOO_MANY]);
        expect_err(
            "full_dtype i32",
            Tensor::full_dtype(shape, 1.0, DType::I32, &dev),
            &[TOO_MANY],
        );
        // A zero size does not excuse strides that overflow.
        expect_err(
            "zeros [0, 2^40, 2^40]",
            Tensor::zeros([0, 1usize << 40, 1 << 40], &dev),
            &[TOO_MANY],
        );
        // The product used to wrap to 0 and match an empty vector.
        expect_err(
            "from_vec",
            Tensor::from_vec(Vec::<f32>::new(), shape, &dev),
            &[TOO_MANY],
        );
        // Sizes that fit still work, including empty ones.
        assert_eq!(Tensor::zeros([0, 1usize << 40], &dev).unwrap().numel(), 0);
    }
}

#[test]
fn bmm_with_wrapped_inner_size_is_an_error() {
    // 3k = 2^64 + 2: the element count of [1, 3, k] used to wrap to 2 and bmm read past it.
    let k = (u64::MAX / 3 + 1) as usize;
    assert_eq!(3 * k as u128, (1u128 << 64) + 2);
    for dev in devices() {
        expect_err("zeros [1,3,k]", Tensor::zeros([1, 3, k], &dev), &[TOO_MANY]);
        expect_err("zeros [1,k,3]", Tensor::zeros([1, k, 3], &dev), &[TOO_MANY]);
        // Valid operands whose product has too many elements.
        let a = huge_view(&[1, 1 << 33, 1], &dev).unwrap();
        let b = huge_view(&[1, 1, 1 << 33], &dev).unwrap();
        expect_err("bmm", a.bmm(&b), &["bmm", TOO_MANY]);
        let a2 = huge_view(&[1 << 33, 1], &dev).unwrap();
        let b2 = huge_view(&[1, 1 << 33], &dev).unwrap();
        expect_err("matmul", a2.matmul(&b2), &["matmul", TOO_MANY]);
        // A normal product still works.
        let x = Tensor::ones([1, 3, 4], &dev).unwrap();
        let y = Tensor::ones([1, 4, 3], &dev).unwrap();
        assert_eq!(vals(&x.bmm(&y).unwrap()), vec![4.0; 9]);
    }
}

#[test]
fn view_and_reshape_products_never_wrap() {
    for dev in devices() {
        let e = Tensor::zeros([0], &dev).unwrap();
        expect_err("view", e.view([1usize << 32, 1 << 32]), &[TOO_MANY]);
        expect_err(
            "reshape -1",
            e.reshape([-1, 1isize << 32, 1 << 32]),
            &[TOO_MANY],
        );
        expect_err(
            "view zero first",
            e.view([0, 1usize << 40, 1 << 40]),
            &[TOO_MANY],
        );
        let x = Tensor::zeros([4], &dev).unwrap();
        expect_err("view -1 wrap", x.view([-1, 1isize << 62, 8]), &[TOO_MANY]);
        assert_eq!(x.view([2, -1]).unwrap().shape(), &[2, 2]);
    }
}

#[test]
fn expand_broadcast_repeat_cat_past_max_elements() {
    for dev in devices() {
        expect_err(
            "expand",
            huge_view(&[1 << 32, 1 << 32], &dev),
            &["expand", TOO_MANY],
        );
        let a = huge_view(&[1 << 32, 1], &dev).unwrap();
        let b = huge_view(&[1, 1 << 32], &dev).unwrap();
        expect_err("add broadcast", a.add(&b), &[TOO_MANY]);
        expect_err("where broadcast", a.gt(&b), &[TOO_MANY]);
        let two = Tensor::zeros([2], &dev).unwrap();
        expect_err("repeat", two.repeat([1usize << 62]), &[TOO_MANY]);
        expect_err("repeat wrap", two.repeat([1usize << 63, 2]), &[TOO_MANY]);
        let big = huge_view(&[1 << 62], &dev).unwrap();
        expect_err(
            "cat",
            Tensor::cat(&[big.clone(), big], 0),
            &["cat", TOO_MANY],
        );
        let x = huge_view(&[1 << 33], &dev).unwrap();
        expect_err(
            "einsum outer",
            Tensor::einsum("i,j->ij", &[x.clone(), x]),
            &[TOO_MANY],
        );
    }
}

#[test]
fn conv_window_arithmetic_never_wraps() {
    for dev in devices() {
        let x = Tensor::zeros([1, 1, 4, 4], &dev).unwrap();
        let w = Tensor::zeros([1, 1, 1, 1], &dev).unwrap();
        let huge = usize::MAX / 2 + 1;
        expect_err(
            "conv2d padding",
            conv2d_with(
                &x,
                &w,
                None,
                Conv2dFuncOptions {
                    padding: [huge, 0].into(),
                    ..Default::default()
                },
            ),
            &["conv2d"],
        );
        let w3 = Tensor::zeros([1, 1, 3, 3], &dev).unwrap();
        expect_err(
            "conv2d dilation",
            conv2d_with(
                &x,
                &w3,
                None,
                Conv2dFuncOptions {
                    dilation: [huge, 1].into(),
                    ..Default::default()
                },
            ),
            &["conv2d"],
        );
        // Padding that fits the arithmetic but whose output has too many elements.
        expect_err(
            "conv2d output",
            conv2d_with(
                &x,
                &w,
                None,
                Conv2dFuncOptions {
                    padding: [1 << 40, 1 << 40].into(),
                    ..Default::default()
                },
            ),
            &["conv2d", TOO_MANY],
        );
        expect_err(
            "max_pool2d",
            max_pool2d_with(
                &x,
                [2, 2],
                MaxPool2dOptions {
                    stride: Some([1, 1].into()),
                    padding: [huge, 0].into(),
                    ..Default::default()
                },
            ),
            &["max_pool2d"],
        );
    }
}

// ---- defect 8 (CPU): allocation failure is an error, not an abort ----

#[test]
fn cpu_allocation_failure_is_out_of_memory() {
    let cpu = Device::Cpu;
    // 2^48 f32 = 1 PiB: past the address space, so the reservation is refused (nothing is touched).
    let n = 1usize << 48;
    for (what, r) in [
        ("zeros", Tensor::zeros([n], &cpu)),
        ("full i32", Tensor::full_dtype([n], 7.0, DType::I32, &cpu)),
        ("rand", Tensor::rand([n], &cpu)),
        ("randn", Tensor::randn([n], &cpu)),
        ("eye", Tensor::eye(1 << 24, &cpu)),
        ("arange", Tensor::arange(0.0, n as f64, 1.0, &cpu)),
    ] {
        let e = expect_err(what, r, &["out of memory", "1125899906842624 bytes"]);
        assert!(
            matches!(e, Error::OutOfMemory { device: Device::Cpu, bytes, .. } if bytes == 1 << 50),
            "{what}: {e:?}"
        );
    }
    // f64: 2^61 elements are 2^64 bytes, more than a Vec may hold ("capacity overflow" before).
    expect_err(
        "full f64",
        Tensor::full_dtype([1usize << 61], 0.0, DType::F64, &cpu),
        &["out of memory"],
    );
}

#[test]
fn cpu_kernel_output_beyond_memory_is_out_of_memory() {
    let cpu = Device::Cpu;
    // Inputs of one element each whose results would need 2^50 bytes.
    let col = huge_view(&[1 << 24, 1], &cpu).unwrap();
    let row = huge_view(&[1, 1 << 24], &cpu).unwrap();
    let flat = huge_view(&[1 << 48], &cpu).unwrap();
    let idx = Tensor::zeros([1], &cpu)
        .unwrap()
        .to_dtype(DType::I32)
        .unwrap()
        .expand([1usize << 48])
        .unwrap();
    let one = Tensor::ones([1], &cpu).unwrap();
    for (what, r) in [
        ("add", col.add(&row)),
        ("mul", col.mul(&row)),
        ("matmul", col.matmul(&row)),
        ("exp", flat.exp()),
        ("contiguous", flat.contiguous()),
        ("to_dtype", flat.to_dtype(DType::F16)),
        ("index_select", one.index_select(0, &idx)),
    ] {
        let e = expect_err(what, r, &["out of memory"]);
        assert!(
            matches!(
                e,
                Error::OutOfMemory {
                    device: Device::Cpu,
                    ..
                }
            ),
            "{what}: {e:?}"
        );
    }
    let e = expect_err(
        "gt",
        col.gt(&row),
        &["out of memory", "281474976710656 bytes"],
    );
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e:?}");
}

#[test]
fn huge_creation_is_refused_before_host_allocation() {
    for dev in devices() {
        expect_err(
            "arange 1e20",
            Tensor::arange(0.0, 1e20, 1.0, &dev),
            &["arange", "invalid size"],
        );
        expect_err("eye 2^32", Tensor::eye(1 << 32, &dev), &["eye", TOO_MANY]);
        // On a GPU, 2^48 elements fail the adapter's limit before any host buffer exists.
        for (what, r) in [
            ("rand", Tensor::rand([1usize << 48], &dev)),
            ("randn", Tensor::randn([1usize << 48], &dev)),
            ("eye", Tensor::eye(1 << 24, &dev)),
        ] {
            let e = expect_err(what, r, &[what]);
            if dev.is_gpu() {
                assert!(
                    !matches!(
                        e,
                        Error::OutOfMemory {
                            device: Device::Cpu,
                            ..
                        }
                    ),
                    "{what}: {e}"
                );
            }
        }
    }
}

// ---- defect 7: overlapping copies ----

#[test]
fn copy_from_itself_does_not_deadlock() {
    for dev in devices() {
        within_a_minute("copy_ self", move || {
            let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2], &dev)?;
            t.copy_(&t)?;
            assert_eq!(vals(&t), vec![1., 2., 3., 4.]);
            // Transposed view of itself: the values from before the copy.
            t.copy_(&t.t()?)?;
            assert_eq!(vals(&t), vec![1., 3., 2., 4.]);
            // Overlapping shifted windows (memmove semantics).
            let r = Tensor::arange(0.0, 6.0, 1.0, &dev)?;
            r.narrow(0, 1, 5)?.copy_(&r.narrow(0, 0, 5)?)?;
            assert_eq!(vals(&r), vec![0., 0., 1., 2., 3., 4.]);
            let r = Tensor::arange(0.0, 6.0, 1.0, &dev)?;
            r.narrow(0, 0, 5)?.copy_(&r.narrow(0, 1, 5)?)?;
            assert_eq!(vals(&r), vec![1., 2., 3., 4., 5., 5.]);
            // A broadcast source from the same storage.
            let r = Tensor::arange(0.0, 4.0, 1.0, &dev)?.reshape([2, 2])?;
            r.copy_(&r.narrow(0, 1, 1)?)?;
            assert_eq!(vals(&r), vec![2., 3., 2., 3.]);
            // A dtype conversion of itself.
            let i = Tensor::from_vec(vec![1i32, 2], [2], &dev)?;
            i.copy_(&i.to_dtype(DType::F32)?.mul_scalar(2.0)?)?;
            assert_eq!(vals(&i), vec![2., 4.]);
            Ok(())
        });
    }
}

#[test]
fn load_state_dict_of_own_state_does_not_deadlock() {
    for dev in devices() {
        within_a_minute("load_state_dict", move || {
            let mut m = Linear::new(3, 2, &dev)?;
            let before: Vec<Vec<f64>> = m.state_dict().iter().map(|(_, t)| vals(t)).collect();
            let state = m.state_dict();
            m.load_state_dict(&state, true)?;
            let after: Vec<Vec<f64>> = m.state_dict().iter().map(|(_, t)| vals(t)).collect();
            assert_eq!(before, after);
            Ok(())
        });
    }
}

#[test]
fn inplace_ops_with_an_aliased_operand() {
    for dev in devices() {
        within_a_minute("aliased in-place", move || {
            let x = || Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2], &dev);
            let t = x()?;
            t.add_(&t)?;
            assert_eq!(vals(&t), vec![2., 4., 6., 8.]);
            let t = x()?;
            t.mul_(&t.t()?)?;
            assert_eq!(vals(&t), vec![1., 6., 6., 16.]);
            let t = x()?;
            t.sub_(&t.t()?)?;
            assert_eq!(vals(&t), vec![0., -1., 1., 0.]);
            let t = x()?;
            t.div_(&t)?;
            assert_eq!(vals(&t), vec![1.; 4]);
            let t = x()?;
            t.masked_fill_(&t.gt_scalar(2.0)?, 0.0)?;
            assert_eq!(vals(&t), vec![1., 2., 0., 0.]);
            let t = x()?;
            t.narrow(0, 1, 1)?.add_(&t.narrow(0, 0, 1)?)?;
            assert_eq!(vals(&t), vec![1., 2., 4., 6.]);
            Ok(())
        });
    }
}

// ---- defect 9: 0-d tensors ----

#[test]
fn cat_of_zero_dim_tensors_is_an_error() {
    for dev in devices() {
        let s = Tensor::scalar(1f32, &dev).unwrap();
        expect_err(
            "cat 0-d",
            Tensor::cat(&[s.clone(), s.clone()], 0),
            &["zero-dimensional tensor (at position 0) cannot be concatenated"],
        );
        let v = Tensor::ones([2], &dev).unwrap();
        expect_err(
            "cat 0-d second",
            Tensor::cat(&[v, s.clone()], 0),
            &["(at position 1)"],
        );
        // stack of 0-d tensors is fine (PyTorch: shape [2]).
        assert_eq!(
            vals(&Tensor::stack(&[s.clone(), s], 0).unwrap()),
            vec![1., 1.]
        );
    }
}

#[test]
fn max_dim_of_zero_dim_tensor() {
    for dev in devices() {
        let s = Tensor::scalar(3f32, &dev).unwrap().requires_grad_(true);
        for dim in [0, -1] {
            for keepdim in [false, true] {
                let (v, i) = s.max_dim(dim, keepdim).unwrap();
                assert_eq!((v.shape(), i.shape()), (&[][..], &[][..]));
                assert_eq!((v.item().unwrap(), i.item().unwrap()), (3.0, 0.0));
                let (v, i) = s.min_dim(dim, keepdim).unwrap();
                assert_eq!((v.item().unwrap(), i.item().unwrap()), (3.0, 0.0));
            }
        }
        expect_err(
            "max_dim 1",
            s.max_dim(1, false),
            &["Dimension out of range"],
        );
        let (v, _) = s.max_dim(0, false).unwrap();
        v.backward().unwrap();
        assert_eq!(vals(&s.grad().unwrap()), vec![1.0]);
        assert_eq!(s.grad().unwrap().shape(), &[] as &[usize]);
        assert_eq!(s.argmax(Some(0), false).unwrap().item().unwrap(), 0.0);
        assert_eq!(s.argmin(Some(-1), true).unwrap().item().unwrap(), 0.0);
        let p = s.prod_dim(0, false).unwrap();
        assert_eq!(p.item().unwrap(), 3.0);
        assert_eq!(p.shape(), &[] as &[usize]);
    }
}

#[test]
fn narrow_slice_split_of_zero_dim_tensor_is_an_error() {
    for dev in devices() {
        let s = Tensor::scalar(1f32, &dev).unwrap();
        expect_err(
            "narrow",
            s.narrow(0, 0, 1),
            &["narrow() cannot be applied to a 0-dim tensor"],
        );
        expect_err("slice", s.slice(0, 0, 1, 1), &["0-dim"]);
        expect_err("split", s.split(1, 0), &["0-dim"]);
        expect_err("chunk", s.chunk(1, 0), &["no dimensions"]);
        expect_err("dim_size", s.dim_size(0), &["no dimensions"]);
    }
}

#[test]
fn transpose_and_other_dim_ops_of_zero_dim_tensor() {
    for dev in devices() {
        let s = Tensor::scalar(2f32, &dev).unwrap();
        let scalar: &[usize] = &[];
        for (a, b) in [(0, 0), (-1, 0), (0, -1), (-1, -1)] {
            let t = s.transpose(a, b).unwrap();
            assert_eq!((t.shape(), t.item().unwrap()), (scalar, 2.0));
        }
        expect_err(
            "transpose 1",
            s.transpose(0, 1),
            &["Dimension out of range"],
        );
        assert_eq!(s.sum_dims([0], false).unwrap().item().unwrap(), 2.0);
        assert_eq!(s.softmax(0).unwrap().item().unwrap(), 1.0);
        assert_eq!(s.log_softmax(-1).unwrap().item().unwrap(), 0.0);
        assert_eq!(s.cumsum(0).unwrap().item().unwrap(), 2.0);
        assert_eq!(s.amax([0], false).unwrap().item().unwrap(), 2.0);
        let f = s.flip([0]).unwrap();
        assert_eq!((f.shape(), f.item().unwrap()), (scalar, 2.0));
        assert_eq!(s.unsqueeze(0).unwrap().shape(), &[1]);
        assert_eq!(s.unsqueeze(-1).unwrap().shape(), &[1]);
        assert_eq!(s.squeeze_dim(0).unwrap().shape(), scalar);
        let i0 = Tensor::from_vec(vec![0i32], [1], &dev).unwrap();
        assert_eq!(s.index_select(0, &i0).unwrap().item().unwrap(), 2.0);
        assert_eq!(s.permute([]).unwrap().shape(), scalar);
        assert_eq!(s.flatten(0, -1).unwrap().shape(), &[1]);
    }
}

#[test]
fn gather_of_zero_dim_tensor() {
    for dev in devices() {
        let s = Tensor::scalar(5f32, &dev).unwrap().requires_grad_(true);
        let i = Tensor::scalar(0i32, &dev).unwrap();
        let g = s.gather(0, &i).unwrap();
        assert_eq!((g.shape(), g.item().unwrap()), (&[][..], 5.0));
        g.backward().unwrap();
        assert_eq!(vals(&s.grad().unwrap()), vec![1.0]);
        let i2 = Tensor::from_vec(vec![0i32, 0], [2], &dev).unwrap();
        assert_eq!(vals(&s.gather(-1, &i2).unwrap()), vec![5., 5.]);
        let z = Tensor::scalar(1f32, &dev).unwrap();
        let src = Tensor::scalar(2f32, &dev).unwrap();
        assert_eq!(z.scatter_add(0, &i, &src).unwrap().item().unwrap(), 3.0);
        if !dev.is_gpu() {
            let bad = Tensor::scalar(1i32, &dev).unwrap();
            expect_err("gather oob", s.gather(0, &bad), &["out of bounds"]);
        }
    }
}

// ---- defect 4 (movement ops): promotion and argument checks ----

#[test]
fn cat_promotes_dtypes() {
    for dev in devices() {
        let f = Tensor::from_vec(vec![1.5f32], [1], &dev).unwrap();
        let i = Tensor::from_vec(vec![2i32], [1], &dev).unwrap();
        let b = Tensor::from_vec(vec![true], [1], &dev).unwrap();
        let c = Tensor::cat(&[f.clone(), i.clone(), b.clone()], 0).unwrap();
        assert_eq!(c.dtype(), DType::F32);
        assert_eq!(vals(&c), vec![1.5, 2., 1.]);
        let c = Tensor::cat(&[b, i], 0).unwrap();
        assert_eq!((c.dtype(), vals(&c)), (DType::I32, vec![1., 2.]));
        // The gradient goes back to the floating-point input in its dtype.
        let f = f.requires_grad_(true);
        let i = Tensor::from_vec(vec![2i32], [1], &dev).unwrap();
        Tensor::cat(&[f.clone(), i], 0)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(vals(&f.grad().unwrap()), vec![1.0]);
    }
}

#[test]
fn arange_rejects_non_finite_and_inconsistent_ranges() {
    for dev in devices() {
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        for (s, e, st, msg) in [
            (0.0, nan, 1.0, "unsupported range"),
            (nan, 1.0, 1.0, "unsupported range"),
            (0.0, inf, 1.0, "unsupported range"),
            (-inf, 0.0, 1.0, "unsupported range"),
            (0.0, 1.0, 0.0, "step must be nonzero"),
            (0.0, 1.0, nan, "step must be nonzero"),
            (0.0, 5.0, -1.0, "inconsistent with step sign"),
            (5.0, 0.0, 1.0, "inconsistent with step sign"),
        ] {
            expect_err(
                &format!("arange({s}, {e}, {st})"),
                Tensor::arange(s, e, st, &dev),
                &["arange", msg],
            );
        }
        assert_eq!(
            vals(&Tensor::arange(2.0, 2.0, 1.0, &dev).unwrap()),
            Vec::<f64>::new()
        );
        assert_eq!(
            vals(&Tensor::arange(3.0, 0.0, -1.5, &dev).unwrap()),
            vec![3.0, 1.5]
        );
    }
}

#[test]
fn narrow_start_out_of_range() {
    for dev in devices() {
        let x = Tensor::zeros([3, 2], &dev).unwrap();
        expect_err(
            "narrow MAX",
            x.narrow(0, usize::MAX, 2),
            &["start out of range"],
        );
        expect_err("narrow 4", x.narrow(0, 4, 0), &["start out of range"]);
        expect_err(
            "narrow length MAX",
            x.narrow(0, 1, usize::MAX),
            &["exceeds dimension size (3)"],
        );
        expect_err(
            "narrow 2+2",
            x.narrow(0, 2, 2),
            &["start (2) + length (2) exceeds"],
        );
        assert_eq!(x.narrow(0, 3, 0).unwrap().shape(), &[0, 2]);
        assert_eq!(x.slice(0, 0, 3, usize::MAX).unwrap().shape(), &[1, 2]);
        expect_err(
            "split_sizes overflow",
            x.split_sizes([usize::MAX, 4], 0),
            &["split"],
        );
    }
}

#[test]
fn flip_repeated_dims_is_an_error() {
    for dev in devices() {
        let x = Tensor::arange(0.0, 4.0, 1.0, &dev)
            .unwrap()
            .reshape([2, 2])
            .unwrap();
        expect_err(
            "flip [0, 0]",
            x.flip([0, 0]),
            &["dim 0 appears multiple times in the list of dims"],
        );
        expect_err(
            "flip [1, -1]",
            x.flip([1, -1]),
            &["dim 1 appears multiple times"],
        );
        assert_eq!(vals(&x.flip([0, 1]).unwrap()), vec![3., 2., 1., 0.]);
        assert_eq!(vals(&x.flip([]).unwrap()), vec![0., 1., 2., 3.]);
    }
}

/// Zero-size views whose storage offset lies past their storage's end (PyTorch allows them:
/// `torch.empty(0, 130)[:, 100:102:2]` has offset 100 in an empty storage) or whose strides are
/// all 0, through the paths that read a view: a copy, a repeat, unary and binary ops over
/// strided and contiguous views (and a broadcast scalar), a column sum, a product with no
/// inner dimension, and back to the host. Each once panicked on the CPU with an index out of
/// range, or failed the GPU's readback (a copy of 400 bytes from a buffer of 256), as a
/// differential fuzz against lavapipe (and a review of its fixes) found.
#[test]
fn zero_size_views_past_their_storage() {
    for dev in devices() {
        let empty = Tensor::zeros([0, 130], &dev).unwrap();
        let v = empty.slice(1, 100, 102, 2).unwrap();
        assert_eq!((v.shape(), v.storage_offset()), (&[0usize, 1][..], 100));
        let w = v.unsqueeze(2).unwrap().expand([0, 1, 3]).unwrap();
        for (what, r) in [
            ("contiguous", w.contiguous()),
            ("repeat", w.repeat([2, 1, 1])),
            ("to the CPU", w.to(&Device::Cpu)),
            ("exp", w.exp()),
            ("add", w.add(&w)),
            ("mul_scalar", w.mul_scalar(2.0)),
            ("sum over dim 0", w.sum_dims([0], false)),
        ] {
            let r = r.unwrap_or_else(|e| panic!("{what} on {dev:?}: {e}"));
            let want: &[usize] = if what == "sum over dim 0" {
                &[1, 3]
            } else {
                &[0, 1, 3]
            };
            assert_eq!(r.shape(), want, "{what} on {dev:?}");
            let zeros = vec![0.0; r.numel()];
            assert_eq!(vals(&r), zeros, "{what} on {dev:?}");
        }
        assert_eq!(vals(&w), Vec::<f64>::new());
        // Contiguous views at that offset: the direct loops, a column sum over 0 rows, and a
        // product whose inner dimension is 0 (zeros, reading neither operand).
        let c = v.reshape([2, 0]).unwrap();
        assert_eq!((c.is_contiguous(), c.storage_offset()), (true, 100));
        for (what, r, want) in [
            ("exp", c.exp(), vec![]),
            ("add", c.add(&c), vec![]),
            ("mul_scalar", c.mul_scalar(2.0), vec![]),
            (
                "sum over dim 0",
                c.t().unwrap().sum_dims([0], false),
                vec![0.0; 2],
            ),
            (
                "matmul",
                c.matmul(&Tensor::ones([0, 3], &dev).unwrap()),
                vec![0.0; 6],
            ),
        ] {
            let r = r.unwrap_or_else(|e| panic!("{what} on {dev:?}: {e}"));
            assert_eq!(vals(&r), want, "{what} on {dev:?}");
        }
        // int64 whose elementwise result has no storage (the second operand of remainder).
        let i = Tensor::zeros([300, 16, 0], &dev)
            .unwrap()
            .to_dtype(DType::I64)
            .unwrap();
        let r = i
            .remainder(&i.abs().unwrap().add_scalar(1).unwrap())
            .unwrap();
        assert_eq!((r.shape(), r.dtype()), (&[300usize, 16, 0][..], DType::I64));
    }
}

/// Empty planes are refused as PyTorch refuses them, instead of pooling or convolving padding
/// alone into numbers (a max pool of an empty plane with padding gave -inf, an adaptive average
/// NaN). An empty batch gives the empty result; with no input channels a convolution gives its
/// bias (a sum of no products; PyTorch 2.15 returns an input-shaped empty tensor there instead)
/// and an adaptive pool the empty result. The messages are PyTorch's.
#[test]
fn empty_planes_are_refused_as_pytorch_does() {
    let pool = "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input";
    for dev in devices() {
        for shape in [[2usize, 3, 7, 0], [2, 3, 0, 5], [2, 0, 4, 4]] {
            let x = Tensor::zeros(shape, &dev).unwrap();
            let opts = MaxPool2dOptions {
                stride: Some(1.into()),
                padding: 1.into(),
                ..Default::default()
            };
            expect_err("max_pool2d", max_pool2d_with(&x, 2, opts), &[pool]);
            let avg = wgtorch::nn::functional::AvgPool2dOptions {
                stride: Some(1.into()),
                padding: 1.into(),
                ..Default::default()
            };
            expect_err(
                "avg_pool2d",
                wgtorch::nn::functional::avg_pool2d_with(&x, 2, avg),
                &[pool],
            );
        }
        for (shape, dim) in [([2usize, 3, 7, 0], 3), ([2, 3, 0, 5], 2)] {
            let x = Tensor::zeros(shape, &dev).unwrap();
            let w = Tensor::zeros([4, 3, 1, 1], &dev).unwrap();
            let padded = Conv2dFuncOptions {
                padding: 1.into(),
                ..Default::default()
            };
            expect_err(
                "conv2d",
                conv2d_with(&x, &w, None, padded),
                &["Only zero batch or zero channel inputs are supported"],
            );
            expect_err(
                "adaptive_avg_pool2d",
                wgtorch::nn::functional::adaptive_avg_pool2d(&x, [2, 2]),
                &[&format!("with dimension {dim} being empty")],
            );
        }
        let batch0 = Tensor::zeros([0, 3, 4, 4], &dev).unwrap();
        let opts = MaxPool2dOptions {
            padding: 1.into(),
            ..Default::default()
        };
        assert_eq!(
            max_pool2d_with(&batch0, 2, opts).unwrap().shape(),
            &[0, 3, 3, 3]
        );
        let none = Tensor::zeros([2, 0, 4, 4], &dev).unwrap();
        let pooled = wgtorch::nn::functional::adaptive_avg_pool2d(&none, [2, 2]).unwrap();
        assert_eq!(pooled.shape(), &[2, 0, 2, 2]);
        let w = Tensor::ones([4, 0, 1, 1], &dev).unwrap();
        let b = Tensor::ones([4], &dev).unwrap();
        let y = conv2d_with(&none, &w, Some(&b), Conv2dFuncOptions::default()).unwrap();
        assert_eq!(
            (y.shape(), vals(&y)),
            (&[2usize, 4, 4, 4][..], vec![1.0; 128])
        );
        // An empty plane with no samples or no channels is allowed, as in PyTorch.
        let padded = Conv2dFuncOptions {
            padding: 1.into(),
            ..Default::default()
        };
        let x = Tensor::zeros([0, 3, 0, 5], &dev).unwrap();
        let w3 = Tensor::ones([4, 3, 1, 1], &dev).unwrap();
        let y = conv2d_with(&x, &w3, None, padded).unwrap();
        assert_eq!(y.shape(), &[0, 4, 2, 7]);
        let x = Tensor::zeros([2, 0, 0, 5], &dev).unwrap();
        let y = conv2d_with(&x, &w, Some(&b), padded).unwrap();
        assert_eq!(
            (y.shape(), vals(&y)),
            (&[2usize, 4, 2, 7][..], vec![1.0; 112])
        );
    }
}
