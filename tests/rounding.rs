//! floor/ceil/round/trunc and remainder/fmod beyond the goldens (tests/golden/ops_d.json): integer
//! division by zero (PyTorch's ZeroDivisionError, on the CPU at once and on a GPU at the next
//! readback, leaving the device usable), refused bool inputs, the GPU's fmod bit for bit equal to
//! the CPU's over the whole float range, int64 past int32, and finite-difference gradients.

mod common;

use common::{devices, gpu};
use wgtorch::autograd::gradcheck;
use wgtorch::{DType, Device, Result, Tensor};

fn msg<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn integer_division_by_zero_is_an_error_on_every_device() {
    for dev in devices() {
        for dt in [DType::I32, DType::I64] {
            let a = Tensor::from_f64(&[7.0, -7.0, 3.0, 4.0], [2, 2], dt, &dev).unwrap();
            let b = Tensor::from_f64(&[2.0, 0.0], [2], dt, &dev).unwrap();
            let ok = Tensor::from_f64(&[2.0, -3.0], [2], dt, &dev).unwrap();
            type Op = fn(&Tensor, &Tensor) -> Result<Tensor>;
            let cases: [(&str, Op); 4] = [
                ("remainder", |a, b| a.remainder(b)),
                ("fmod", |a, b| a.fmod(b)),
                // A zero that only broadcasting reaches, and a zero in a view.
                ("remainder", |a, b| a.remainder(&b.narrow(0, 1, 1)?)),
                ("fmod", |a, b| a.fmod(&b.flip([0])?)),
            ];
            for (name, f) in cases {
                // On a GPU the divisor is checked on the device: the error comes with the read.
                let e = msg(f(&a, &b).and_then(|t| t.to_f64_vec()));
                assert_eq!(e, format!("{name}: ZeroDivisionError"), "{dev} {dt}");
                // The device stays usable and later results are right.
                let r = a.remainder(&ok).unwrap().to_f64_vec().unwrap();
                assert_eq!(r, vec![1.0, -1.0, 1.0, -2.0], "{dev} {dt}");
            }
            // Like an out-of-range index, a failure on a GPU is reported once, by the first
            // read after it, whichever tensor that reads.
            let bad = a.fmod(&b);
            let e = msg(bad.and_then(|_| ok.to_f64_vec()));
            assert_eq!(e, "fmod: ZeroDivisionError", "{dev} {dt}");
            assert_eq!(ok.to_f64_vec().unwrap(), vec![2.0, -3.0], "{dev} {dt}");
            assert_eq!(
                msg(a.remainder_scalar(0)),
                "remainder: ZeroDivisionError",
                "{dev} {dt}"
            );
            assert_eq!(
                msg(a.fmod_scalar(0)),
                "fmod: ZeroDivisionError",
                "{dev} {dt}"
            );
            // Empty tensors divide by nothing.
            let e = Tensor::from_f64(&[], [0], dt, &dev).unwrap();
            assert_eq!(e.remainder(&e).unwrap().numel(), 0, "{dev} {dt}");
        }
        // Float division by zero is NaN, as in PyTorch.
        let x = Tensor::from_vec(vec![1.0f32, -2.0], [2], &dev).unwrap();
        let z = x.zeros_like().unwrap();
        for v in x.remainder(&z).unwrap().to_vec::<f32>().unwrap() {
            assert!(v.is_nan(), "{dev}");
        }
        assert!(x.fmod_scalar(0.0).unwrap().to_vec::<f32>().unwrap()[0].is_nan());
    }
}

#[test]
fn bool_inputs_are_refused() {
    let b = Tensor::from_vec(vec![true, false], [2], &Device::Cpu).unwrap();
    let e = msg(b.remainder(&b));
    assert!(
        e.starts_with("remainder: not implemented for dtype bool"),
        "{e}"
    );
    assert!(msg(b.fmod(&b)).starts_with("fmod: not implemented for dtype bool"));
    assert!(msg(b.floor()).starts_with("floor: not implemented for dtype bool"));
    // With an integer scalar, bool is int64 (PyTorch's promotion).
    let r = b.remainder_scalar(2).unwrap();
    assert_eq!(r.dtype(), DType::I64);
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 0]);
}

#[test]
fn rounding_integers_copies_them() {
    for dev in devices() {
        let x = Tensor::from_vec(vec![-3i64, 0, 5], [3], &dev).unwrap();
        for y in [x.floor(), x.ceil(), x.round(), x.trunc()] {
            let y = y.unwrap();
            assert_eq!(y.dtype(), DType::I64);
            assert_eq!(y.to_vec::<i64>().unwrap(), vec![-3, 0, 5]);
        }
        // A copy, not an alias: writing to it leaves the input alone.
        let y = x.floor().unwrap();
        y.zero_().unwrap();
        assert_eq!(x.to_vec::<i64>().unwrap(), vec![-3, 0, 5], "{dev}");
    }
}

/// f32 values spread over the whole range: both signs, subnormals, powers of two, and values
/// near a multiple of one another (the quotients a rounded division gets wrong).
fn spread(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|i| match i % 5 {
            // Any finite bit pattern.
            0 | 1 => loop {
                let v = f32::from_bits(next() as u32);
                if v.is_finite() {
                    break v;
                }
            },
            // Moderate magnitudes.
            2 => (next() % 20_000) as f32 / 64.0 - 150.0,
            3 => f32::from_bits((next() % 0x80_0000) as u32), // subnormal
            _ => 0.1 * ((next() % 50) as f32 + 1.0),
        })
        .collect()
}

#[test]
fn gpu_fmod_and_remainder_are_bit_exact() {
    let Some(g) = gpu() else { return };
    let n = 4096;
    let (a, b) = (spread(n, 0x9e37_79b9), spread(n, 0x85eb_ca6b));
    let ta = Tensor::from_vec(a.clone(), [n], &Device::Cpu).unwrap();
    let tb = Tensor::from_vec(b.clone(), [n], &Device::Cpu).unwrap();
    let (ga, gb) = (ta.to(&g).unwrap(), tb.to(&g).unwrap());
    for rem in [false, true] {
        let f = |x: &Tensor, y: &Tensor| if rem { x.remainder(y) } else { x.fmod(y) };
        let want = f(&ta, &tb).unwrap().to_vec::<f32>().unwrap();
        // Rust's `%` is C's fmod.
        for i in 0..n {
            let m = a[i] % b[i];
            let r = if rem && m != 0.0 && ((b[i] < 0.0) != (m < 0.0)) {
                m + b[i]
            } else {
                m
            };
            assert_eq!(
                want[i].to_bits(),
                r.to_bits(),
                "cpu {rem} {} {}",
                a[i],
                b[i]
            );
        }
        // The vec4 kernel (contiguous f32) and the strided one (a reversed view).
        let got = f(&ga, &gb).unwrap().to_vec::<f32>().unwrap();
        let flipped = f(&ga.flip([0]).unwrap(), &gb.flip([0]).unwrap())
            .unwrap()
            .flip([0])
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for i in 0..n {
            let same =
                |x: f32| x.to_bits() == want[i].to_bits() || (x.is_nan() && want[i].is_nan());
            // Results a driver may flush to zero (subnormal) compare as values.
            let flushed = |x: f32| want[i].is_subnormal() && x == 0.0;
            assert!(
                same(got[i]) || flushed(got[i]),
                "vec4 {rem}: {} {} -> {}, cpu {}",
                a[i],
                b[i],
                got[i],
                want[i]
            );
            assert!(
                same(flipped[i]) || flushed(flipped[i]),
                "strided {rem}: {} {} -> {}, cpu {}",
                a[i],
                b[i],
                flipped[i],
                want[i]
            );
        }
    }
}

#[test]
fn int64_past_int32_is_exact_on_the_cpu() {
    let dev = Device::Cpu;
    let a = Tensor::from_vec(
        vec![i64::MIN, i64::MAX, -(1 << 53) - 1, 1 << 40, i64::MIN],
        [5],
        &dev,
    )
    .unwrap();
    let b = Tensor::from_vec(vec![-1i64, 1 << 33, 10, -(1 << 39) - 1, 3], [5], &dev).unwrap();
    let want_fmod: Vec<i64> = (0..5)
        .map(|i| {
            let (x, y) = (a.to_vec::<i64>().unwrap()[i], b.to_vec::<i64>().unwrap()[i]);
            x.checked_rem(y).unwrap_or(0)
        })
        .collect();
    let want_rem: Vec<i64> = (0..5)
        .map(|i| {
            let (x, y) = (a.to_vec::<i64>().unwrap()[i], b.to_vec::<i64>().unwrap()[i]);
            let r = x.checked_rem(y).unwrap_or(0);
            if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }
        })
        .collect();
    assert_eq!(a.fmod(&b).unwrap().to_vec::<i64>().unwrap(), want_fmod);
    assert_eq!(a.remainder(&b).unwrap().to_vec::<i64>().unwrap(), want_rem);
    assert_eq!(want_rem[0], 0); // i64::MIN % -1 without overflow
}

#[test]
fn gradients_match_finite_differences() -> Result<()> {
    // Quotients well away from integers, so the functions are smooth around the inputs.
    let a = Tensor::from_vec(
        vec![-7.3f64, 7.3, 5.6, -5.6, 0.4, 9.9],
        [2, 3],
        &Device::Cpu,
    )?;
    let b = Tensor::from_vec(
        vec![2.0f64, -2.0, 1.5, -1.5, 3.0, -0.7],
        [2, 3],
        &Device::Cpu,
    )?;
    type F = fn(&[Tensor]) -> Result<Tensor>;
    let fs: [(&str, F); 6] = [
        ("remainder", |v| v[0].remainder(&v[1])),
        ("fmod", |v| v[0].fmod(&v[1])),
        // Broadcast divisor.
        ("remainder_broadcast", |v| {
            v[0].remainder(&v[1].narrow(0, 0, 1)?)
        }),
        ("fmod_scalar", |v| v[0].fmod_scalar(-1.25)?.mul(&v[1])),
        ("remainder_scalar", |v| {
            v[0].remainder_scalar(0.75)?.mul(&v[1])
        }),
        // The rounding ops are flat: only the product rule's other side remains.
        ("rounding", |v| {
            let r = v[0].floor()?.add(&v[0].ceil()?)?;
            r.add(&v[0].round()?)?.add(&v[0].trunc()?)?.mul(&v[1])
        }),
    ];
    for (name, f) in fs {
        gradcheck(f, &[a.clone(), b.clone()], 1e-6, 1e-5, 1e-4)
            .map_err(|e| wgtorch::Error::Autograd(format!("{name}: {e}")))?;
    }
    Ok(())
}

#[test]
fn gradients_on_every_device() {
    for dev in devices() {
        let a = Tensor::from_vec(vec![-7.3f32, 7.3, 5.6, -5.6, 0.4, 9.9], [2, 3], &dev)
            .unwrap()
            .requires_grad_(true);
        let b = Tensor::from_vec(vec![2.0f32, -2.0, 1.5], [3], &dev)
            .unwrap()
            .requires_grad_(true);
        let y = a.remainder(&b).unwrap().add(&a.fmod(&b).unwrap()).unwrap();
        y.sum_all().unwrap().backward().unwrap();
        let ga = a.grad().unwrap().to_vec::<f32>().unwrap();
        let gb = b.grad().unwrap().to_vec::<f32>().unwrap();
        // d/da = 2; d/db = -(floor(a/b) + trunc(a/b)), summed over the broadcast rows.
        assert_eq!(ga, vec![2.0; 6], "{dev}");
        assert_eq!(gb, vec![12.0, 8.0, -18.0], "{dev}");
    }
}
