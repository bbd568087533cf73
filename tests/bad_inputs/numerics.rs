//! Integer and half-precision numerics (issue #11, defect 4): integer arithmetic wraps, scalar
//! operands promote as PyTorch's do, NaN propagates through clamp and the extreme reductions,
//! half sums accumulate in f32, and empty or degenerate variances give NaN. Each test runs on
//! every device; the expected values are PyTorch's (in the comments).

use crate::common::{devices, vals};
use half::{bf16, f16};
use wgtorch::{DType, Device, Tensor};

fn i32s(v: &[i32], d: &Device) -> Tensor {
    Tensor::from_slice(v, [v.len()], d).unwrap()
}
fn f32s(v: &[f32], d: &Device) -> Tensor {
    Tensor::from_slice(v, [v.len()], d).unwrap()
}
/// The values of an int32 or int64 tensor (int64 ones inside int32's range) as i32.
fn ints(t: &Tensor) -> Vec<i32> {
    match t.dtype() {
        DType::I64 => t
            .to_vec::<i64>()
            .unwrap()
            .into_iter()
            .map(|v| i32::try_from(v).unwrap())
            .collect(),
        _ => t.to_vec::<i32>().unwrap(),
    }
}
/// NaN-aware equality of f64 vectors.
fn same(what: &str, a: &[f64], b: &[f64]) {
    let eq = a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.is_nan() && y.is_nan()) || x == y);
    assert!(eq, "{what}: {a:?} vs {b:?}");
}

#[test]
fn int32_add_sub_mul_wrap() {
    for d in devices() {
        let a = i32s(&[i32::MAX, i32::MIN, 65536, 123_456_789, -7], &d);
        let b = i32s(&[1, 1, 65536, 987_654_321, 3], &d);
        // torch.int32: [-2147483648, -2147483647, 131072, 1111111110, -4]
        assert_eq!(
            ints(&a.add(&b).unwrap()),
            [i32::MIN, i32::MIN + 1, 131072, 1_111_111_110, -4],
            "{d}"
        );
        // [2147483646, 2147483647, 0, -864197532, -10]
        assert_eq!(
            ints(&a.sub(&b).unwrap()),
            [i32::MAX - 1, i32::MAX, 0, -864_197_532, -10],
            "{d}"
        );
        // [2147483647, -2147483648, 0, 259106859, -21] (two's complement)
        let prod: Vec<i32> = [
            (i32::MAX, 1),
            (i32::MIN, 1),
            (65536, 65536),
            (123_456_789, 987_654_321),
            (-7, 3),
        ]
        .iter()
        .map(|&(x, y): &(i32, i32)| x.wrapping_mul(y))
        .collect();
        assert_eq!(ints(&a.mul(&b).unwrap()), prod, "{d}");
        // Unary integer ops are exact past 2^24 and wrap: -(-2^31) == -2^31, abs likewise.
        let x = i32s(&[16_777_217, i32::MIN, -5], &d);
        assert_eq!(ints(&x.neg().unwrap()), [-16_777_217, i32::MIN, 5], "{d}");
        assert_eq!(ints(&x.abs().unwrap()), [16_777_217, i32::MIN, 5], "{d}");
        assert_eq!(ints(&x.sign().unwrap()), [1, -1, -1], "{d}");
        assert_eq!(
            ints(&i32s(&[46341, -3], &d).square().unwrap()),
            [46341i32.wrapping_mul(46341), 9],
            "{d}"
        );
        // The sum and cumsum of int32 are int64 (PyTorch's): no wrap at int32 on the CPU; on
        // a GPU (int64 held as int32) a result past int32 is an error, never wrapped.
        let s = i32s(&[i32::MAX, 1], &d).sum_all();
        let c = i32s(&[i32::MAX, 1, 1], &d).cumsum(0);
        if d.is_gpu() {
            assert!(s.unwrap_err().to_string().contains("2147483648"), "{d}");
            assert!(c.is_err(), "{d}");
        } else {
            let s = s.unwrap();
            assert_eq!(s.dtype(), DType::I64);
            assert_eq!(s.to_vec::<i64>().unwrap(), [1i64 << 31], "{d}");
            let c = c.unwrap().to_vec::<i64>().unwrap();
            assert_eq!(c, [i32::MAX as i64, 1 << 31, (1 << 31) + 1], "{d}");
        }
    }
}

#[test]
fn int32_division_is_true_division() {
    for d in devices() {
        let a = i32s(&[7, -7, 1, -1, 0], &d);
        let b = i32s(&[2, 2, 0, 0, 0], &d);
        let q = a.div(&b).unwrap();
        // torch.tensor([7,-7,1,-1,0]) / torch.tensor([2,2,0,0,0]): float32 [3.5, -3.5, inf, -inf, nan]
        assert_eq!(q.dtype(), DType::F32);
        same(
            &format!("{d}"),
            &vals(&q),
            &[3.5, -3.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN],
        );
        // x / 2 (an int scalar) is true division too: float32 [3.5, -3.5, 0.5, -0.5, 0.0]
        let h = a.div_scalar(2).unwrap();
        assert_eq!(h.dtype(), DType::F32);
        same(&format!("{d}"), &vals(&h), &[3.5, -3.5, 0.5, -0.5, 0.0]);
    }
}

#[test]
fn int_tensor_with_float_scalar_promotes() {
    for d in devices() {
        let x = i32s(&[1, 2], &d);
        // torch.tensor([1,2], dtype=torch.int32) * 1.0 -> float32 [1., 2.]
        let y = x.mul_scalar(1.0).unwrap();
        assert_eq!(y.dtype(), DType::F32, "{d}");
        // * 2 (an int scalar) stays int32: [2, 4]
        let y = x.mul_scalar(2).unwrap();
        assert_eq!((y.dtype(), ints(&y)), (DType::I32, vec![2, 4]), "{d}");
        // + 0.5 -> float32 [1.5, 2.5]; - 1 -> int32 [0, 1]
        assert_eq!(vals(&x.add_scalar(0.5).unwrap()), [1.5, 2.5], "{d}");
        let y = x.sub_scalar(1).unwrap();
        assert_eq!((y.dtype(), ints(&y)), (DType::I32, vec![0, 1]), "{d}");
        // ** 2 -> int32 [1, 4]; ** 0.5 -> float32 [1, 1.4142]; ** -1 -> error
        let y = x.pow_scalar(2).unwrap();
        assert_eq!((y.dtype(), ints(&y)), (DType::I32, vec![1, 4]), "{d}");
        assert_eq!(x.pow_scalar(0.5).unwrap().dtype(), DType::F32, "{d}");
        let e = x.pow_scalar(-1).unwrap_err().to_string();
        assert!(e.contains("negative integer powers"), "{d}: {e}");
        // Integer scalars are exact past 2^24: 16777217 + 1 == 16777218 (int32)
        assert_eq!(
            ints(&i32s(&[16_777_217], &d).add_scalar(1).unwrap()),
            [16_777_218],
            "{d}"
        );
        // clamp with int bounds stays int32, with float bounds gives float32
        let y = i32s(&[-5, 3, 9], &d).clamp(Some(0), Some(4)).unwrap();
        assert_eq!((y.dtype(), ints(&y)), (DType::I32, vec![0, 3, 4]), "{d}");
        let y = i32s(&[-5, 3, 9], &d).clamp(Some(0.5), None).unwrap();
        assert_eq!(
            (y.dtype(), vals(&y)),
            (DType::F32, vec![0.5, 3.0, 9.0]),
            "{d}"
        );
        // Comparisons with a float scalar compare in float: torch.tensor([1]) == 1.5 -> False
        assert_eq!(
            vals(&i32s(&[1, 2], &d).eq_scalar(1.5).unwrap()),
            [0.0, 0.0],
            "{d}"
        );
        assert_eq!(
            vals(&i32s(&[1, 2], &d).gt_scalar(1.5).unwrap()),
            [0.0, 1.0],
            "{d}"
        );
        // A float tensor keeps its dtype: float16 * 2.0 -> float16
        let h = f32s(&[1.5], &d).to_dtype(DType::F16).unwrap();
        assert_eq!(h.mul_scalar(2.0).unwrap().dtype(), DType::F16, "{d}");
        // bool + 1 -> integer [2, 1]; bool * 0.5 -> float32 [0.5, 0.]
        let m = f32s(&[1.0, 0.0], &d).gt_scalar(0.5).unwrap();
        let y = m.add_scalar(1).unwrap();
        assert_eq!((y.dtype(), ints(&y)), (DType::I64, vec![2, 1]), "{d}");
        assert_eq!(vals(&m.mul_scalar(0.5).unwrap()), [0.5, 0.0], "{d}");
        // exp of an int tensor is float32: torch.exp(torch.tensor([0])) -> tensor([1.])
        let y = i32s(&[0], &d).exp().unwrap();
        assert_eq!((y.dtype(), vals(&y)), (DType::F32, vec![1.0]), "{d}");
    }
}

#[test]
fn int_scalar_out_of_int32_range_is_an_error() {
    for d in devices() {
        let x = i32s(&[1], &d);
        // torch: RuntimeError: value cannot be converted to type int32_t without overflow
        let e = x.add_scalar(1i64 << 40).unwrap_err().to_string();
        assert!(
            e.contains("without overflow") && e.contains("int32"),
            "{d}: {e}"
        );
        let e = x
            .clamp(Some(0i64), Some(1i64 << 33))
            .unwrap_err()
            .to_string();
        assert!(e.contains("without overflow"), "{d}: {e}");
    }
}

#[test]
fn bool_add_mul_follow_pytorch() {
    for d in devices() {
        let a = f32s(&[1.0, 1.0, 0.0, 0.0], &d).gt_scalar(0.5).unwrap();
        let b = f32s(&[1.0, 0.0, 1.0, 0.0], &d).gt_scalar(0.5).unwrap();
        // bool + bool -> bool [True, True, True, False]; bool * bool -> [True, False, False, False]
        let s = a.add(&b).unwrap();
        assert_eq!(
            (s.dtype(), vals(&s)),
            (DType::Bool, vec![1.0, 1.0, 1.0, 0.0]),
            "{d}"
        );
        let p = a.mul(&b).unwrap();
        assert_eq!(
            (p.dtype(), vals(&p)),
            (DType::Bool, vec![1.0, 0.0, 0.0, 0.0]),
            "{d}"
        );
        // bool - bool: RuntimeError: Subtraction, the `-` operator, with two bool tensors is
        // not supported. Use the `^` or `logical_xor()` operator instead.
        let e = a.sub(&b).unwrap_err().to_string();
        assert!(e.contains("Subtraction"), "{d}: {e}");
        // -bool: RuntimeError: Negation, the `-` operator, on a bool tensor is not supported.
        let e = a.neg().unwrap_err().to_string();
        assert!(e.contains("Negation"), "{d}: {e}");
    }
}

#[test]
fn clamp_propagates_nan() {
    for d in devices() {
        let nan = f32::NAN;
        // torch.tensor([nan, 1, -1, 0.25]).clamp(0, 0.5) -> [nan, 0.5, 0., 0.25]
        let x = f32s(&[nan, 1.0, -1.0, 0.25], &d);
        let want = [f64::NAN, 0.5, 0.0, 0.25];
        same(
            &format!("{d}"),
            &vals(&x.clamp(Some(0.0), Some(0.5)).unwrap()),
            &want,
        );
        // A strided view takes the general kernel.
        let xs = Tensor::from_slice(&[nan, 9.0, 1.0, 9.0, -1.0, 9.0, 0.25, 9.0], [4, 2], &d)
            .unwrap()
            .narrow(1, 0, 1)
            .unwrap()
            .reshape([4])
            .unwrap();
        same(
            &format!("{d} strided"),
            &vals(&xs.clamp(Some(0.0), Some(0.5)).unwrap()),
            &want,
        );
        // clamp(x, min=nan) and clamp(x, max=nan) -> nan everywhere
        let all_nan = [f64::NAN; 4];
        same(
            &format!("{d}"),
            &vals(&x.clamp(Some(f64::NAN), None).unwrap()),
            &all_nan,
        );
        same(
            &format!("{d}"),
            &vals(&x.clamp(None, Some(f64::NAN)).unwrap()),
            &all_nan,
        );
        // half precision too
        for dt in [DType::F16, DType::BF16] {
            let h = x.to_dtype(dt).unwrap();
            let y = h.clamp(Some(0.0), Some(0.5)).unwrap();
            same(&format!("{d} {dt}"), &vals(&y), &want);
        }
    }
}

/// Exact GELU and its gradient far out in both tails, where `x²` overflows f32 (from
/// |x| ≈ 1.8e19; the CPU's normal density gave NaN there): PyTorch's values, NaN kept.
#[test]
fn gelu_and_its_gradient_hold_past_where_x_squared_overflows() {
    let xs = [
        -1e30f32,
        -3e19,
        -1.9e19,
        -1e4,
        1e4,
        1.9e19,
        3e19,
        1e30,
        f32::NAN,
    ];
    // torch.nn.functional.gelu(x) / x (0 on the left, 1 on the right), and gelu's gradient
    // for a gradient of ones: the same.
    let want = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, f64::NAN];
    for d in devices() {
        let dtypes = if d.is_gpu() {
            &[DType::F32][..]
        } else {
            &[DType::F32, DType::F64]
        };
        for &dt in dtypes {
            let x = f32s(&xs, &d).to_dtype(dt).unwrap().requires_grad_(true);
            let y = x.gelu().unwrap();
            let ratio: Vec<f64> = vals(&y)
                .iter()
                .zip(&xs)
                .map(|(v, x)| v / *x as f64)
                .collect();
            same(&format!("{d} {dt:?} gelu(x) / x"), &ratio, &want);
            y.sum_all().unwrap().backward().unwrap();
            same(
                &format!("{d} {dt:?} gelu gradient"),
                &vals(&x.grad().unwrap()),
                &want,
            );
        }
    }
}

/// ELU's second derivative stays finite where eˣ overflows f32 (x = 100: the exponential of the
/// branch not taken would give 0 · inf = NaN): PyTorch's [0, e⁻²⁰, e^-0.5], and tanh keeps the
/// sign of a zero (torch.tanh(-0.0) is -0.0), on every device.
#[test]
fn elu_double_backward_and_tanh_of_signed_zero() {
    for d in devices() {
        let x = f32s(&[100.0, -20.0, -0.5], &d).requires_grad_(true);
        let y = x.elu(1.0).unwrap().sum_all().unwrap();
        y.backward_with(None, true, true).unwrap();
        let g = x.grad().unwrap();
        x.set_grad(None);
        g.sum_all().unwrap().backward().unwrap();
        let want = [0.0, (-20f64).exp(), (-0.5f64).exp()];
        let got = vals(&x.grad().unwrap());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-6 * w, "{d} elu'': {got:?} vs {want:?}");
        }
        let z = f32s(&[-0.0, 0.0], &d)
            .tanh()
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert!(
            z[0] == 0.0 && z[0].is_sign_negative() && z[1].is_sign_positive(),
            "{d} {z:?}"
        );
    }
}

#[test]
fn half_mean_of_many_ones_is_one() {
    for d in devices() {
        // torch.ones(100000, dtype=torch.float16).mean() -> 1.0 (accumulated in float32)
        let x = Tensor::from_vec(vec![f16::ONE; 100_000], [100_000], &d).unwrap();
        assert_eq!(x.mean_all().unwrap().dtype(), DType::F16);
        assert_eq!(vals(&x.mean_all().unwrap()), [1.0], "{d} f16");
        let x = Tensor::from_vec(vec![bf16::ONE; 100_000], [100_000], &d).unwrap();
        assert_eq!(vals(&x.mean_all().unwrap()), [1.0], "{d} bf16");
        // rows: mean over dim 1 of [4, 30000] ones
        let x = Tensor::from_vec(vec![f16::ONE; 120_000], [4, 30_000], &d).unwrap();
        assert_eq!(
            vals(&x.mean_dims([1], false).unwrap()),
            [1.0; 4],
            "{d} rows"
        );
    }
}

#[test]
fn half_sum_with_overflowing_partials() {
    for d in devices() {
        // 4096 x 16, then 4096 x -16, then 4096 x 1: the first chunk's partial (65536) is past
        // float16's max (65504) but the total, 4096, is not. torch: tensor(4096., dtype=float16)
        let mut v = vec![f16::from_f32(16.0); 4096];
        v.extend(vec![f16::from_f32(-16.0); 4096]);
        v.extend(vec![f16::ONE; 4096]);
        let x = Tensor::from_vec(v, [12_288], &d).unwrap();
        let s = x.sum_all().unwrap();
        assert_eq!((s.dtype(), vals(&s)), (DType::F16, vec![4096.0]), "{d}");
        // A short row: [60000, 60000, -60000] sums to 60000 (float32 accumulation)
        let x = Tensor::from_vec(
            [60000.0f32, 60000.0, -60000.0].map(f16::from_f32).to_vec(),
            [3],
            &d,
        )
        .unwrap();
        assert_eq!(vals(&x.sum_all().unwrap()), [60000.0], "{d}");
    }
}

#[test]
fn argmax_nan_is_the_max() {
    for d in devices() {
        let x = f32s(&[1.0, f32::NAN, 2.0], &d);
        // torch.tensor([1, nan, 2]).argmax() -> 1; argmin -> 1; max/min(dim=0) -> (nan, 1)
        assert_eq!(ints(&x.argmax(None, false).unwrap()), [1], "{d} argmax");
        assert_eq!(ints(&x.argmin(None, false).unwrap()), [1], "{d} argmin");
        for (v, i) in [x.max_dim(0, false).unwrap(), x.min_dim(0, false).unwrap()] {
            assert!(vals(&v)[0].is_nan(), "{d}");
            assert_eq!(ints(&i), [1], "{d}");
        }
        // amax / amin -> nan
        assert!(vals(&x.amax([], false).unwrap())[0].is_nan(), "{d}");
        assert!(vals(&x.amin([], false).unwrap())[0].is_nan(), "{d}");
        // Long rows (the workgroup tree on a GPU), the first NaN wins: index 500
        for n in [1000usize, 20_000] {
            let mut v: Vec<f32> = (0..n).map(|i| i as f32).collect();
            v[500] = f32::NAN;
            v[700] = f32::NAN;
            let t = f32s(&v, &d);
            assert_eq!(ints(&t.argmax(None, false).unwrap()), [500], "{d} n={n}");
            assert_eq!(ints(&t.argmin(None, false).unwrap()), [500], "{d} n={n}");
            assert!(vals(&t.amax([], false).unwrap())[0].is_nan(), "{d} n={n}");
            assert!(vals(&t.amin([], false).unwrap())[0].is_nan(), "{d} n={n}");
        }
        // Many short rows (one invocation per row), f16 too: [[nan, 5], [3, 4], ...] -> [0, 1, ...]
        let mut v = vec![0.0f32; 64];
        for r in 0..32 {
            v[2 * r] = 3.0;
            v[2 * r + 1] = 4.0;
        }
        v[0] = f32::NAN;
        for t in [
            Tensor::from_slice(&v, [32, 2], &d).unwrap(),
            Tensor::from_slice(&v, [32, 2], &d)
                .unwrap()
                .to_dtype(DType::F16)
                .unwrap(),
        ] {
            let mut want = vec![1; 32];
            want[0] = 0;
            assert_eq!(ints(&t.argmax(Some(1), false).unwrap()), want, "{d}");
            let mut want = vec![0; 32];
            want[0] = 0;
            assert_eq!(ints(&t.argmin(Some(1), false).unwrap()), want, "{d}");
        }
    }
}

#[test]
fn var_of_empty_is_nan() {
    for d in devices() {
        let e = Tensor::zeros([0], &d).unwrap();
        // torch.empty(0).var() -> nan (with a warning); std -> nan; mean -> nan; sum -> 0
        assert!(
            vals(&e.var_dims([], true, false).unwrap())[0].is_nan(),
            "{d}"
        );
        assert!(
            vals(&e.std_dims([], true, false).unwrap())[0].is_nan(),
            "{d}"
        );
        assert!(
            vals(&e.var_dims([], false, false).unwrap())[0].is_nan(),
            "{d}"
        );
        assert!(vals(&e.mean_all().unwrap())[0].is_nan(), "{d}");
        assert_eq!(vals(&e.sum_all().unwrap()), [0.0], "{d}");
        // torch.tensor([3.]).var() -> nan (correction 1 >= n); .var(correction=0) -> 0
        let one = f32s(&[3.0], &d);
        assert!(
            vals(&one.var_dims([], true, false).unwrap())[0].is_nan(),
            "{d}"
        );
        assert_eq!(vals(&one.var_dims([], false, false).unwrap()), [0.0], "{d}");
        // torch.tensor([1., 3.]).var(correction=2) -> inf; correction=3 -> inf (divides by 0)
        let two = f32s(&[1.0, 3.0], &d);
        for c in [2.0, 3.0] {
            assert_eq!(
                vals(&two.var_correction([], c, false).unwrap()),
                [f64::INFINITY],
                "{d} c={c}"
            );
        }
        assert_eq!(
            vals(&two.var_correction([], 1.0, false).unwrap()),
            [2.0],
            "{d}"
        );
        // Rows of an empty dim: torch.zeros(2, 0).var(dim=1) -> [nan, nan]
        let e2 = Tensor::zeros([2, 0], &d).unwrap();
        same(
            &format!("{d}"),
            &vals(&e2.var_dims([1], true, false).unwrap()),
            &[f64::NAN; 2],
        );
    }
}

#[test]
fn int_inplace_with_float_result_is_an_error() {
    for d in devices() {
        let x = i32s(&[7, 9], &d);
        // x = torch.tensor([7, 9], dtype=torch.int32); x.div_(2) -> RuntimeError: result type
        // Float can't be cast to the desired output type Int (x is unchanged)
        let e = x.div_(&i32s(&[2, 2], &d)).unwrap_err().to_string();
        assert!(e.contains("can't be cast"), "{d}: {e}");
        let e = x.clamp_(Some(0.5), None).unwrap_err().to_string();
        assert!(e.contains("can't be cast"), "{d}: {e}");
        assert_eq!(ints(&x), [7, 9], "{d}");
        // x.clamp_(0, 8) and x.add_(x, alpha=2) stay int32: [7, 8], then [21, 24]
        x.clamp_(Some(0), Some(8)).unwrap();
        assert_eq!(ints(&x), [7, 8], "{d}");
        assert_eq!(ints(&x.add_alpha(&x, 2).unwrap()), [21, 24], "{d}");
    }
}

#[test]
fn f64_scalar_ops_keep_f64_precision() {
    // f64 lives on the CPU only. torch.tensor([1.], dtype=torch.float64) + 0.1 -> 1.1 (the
    // double 1.0 + 0.1), * 0.1, / 3, ** 0.5 and clamp(max=0.1) likewise in double.
    let x = Tensor::from_slice(&[1.0f64], [1], &Device::Cpu).unwrap();
    assert_eq!(vals(&x.add_scalar(0.1).unwrap()), [1.0 + 0.1]);
    assert_eq!(vals(&x.sub_scalar(0.1).unwrap()), [1.0 - 0.1]);
    assert_eq!(vals(&x.mul_scalar(0.1).unwrap()), [0.1]);
    assert_eq!(vals(&x.div_scalar(3.0).unwrap()), [1.0 / 3.0]);
    let two = Tensor::from_slice(&[2.0f64], [1], &Device::Cpu).unwrap();
    assert_eq!(vals(&two.pow_scalar(0.5).unwrap()), [2f64.sqrt()]);
    assert_eq!(vals(&x.clamp(None, Some(0.1)).unwrap()), [0.1]);
}
