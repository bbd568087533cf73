//! DType::I64: PyTorch's index dtype. On the CPU a real i64 storage (wrapping arithmetic, exact
//! past 2^53); on a GPU held as int32, with values outside int32 refused (never wrapped).

mod common;

use common::devices;
use std::sync::Arc;
use wgtorch::data::{DataLoader, Dataset, Sample};
use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Error, Result, Tensor};

fn long(v: &[i64], dev: &Device) -> Tensor {
    Tensor::from_slice(v, [v.len()], dev).unwrap()
}

fn err_text<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn creation_and_readback() {
    for dev in devices() {
        let t = long(&[0, -1, i32::MAX as i64, i32::MIN as i64], &dev);
        assert_eq!(t.dtype(), DType::I64, "{dev}");
        assert_eq!(
            t.to_vec::<i64>().unwrap(),
            vec![0, -1, i32::MAX as i64, i32::MIN as i64],
            "{dev}"
        );
        assert!(format!("{t:?}").contains("dtype=int64"), "{dev}");
        assert_eq!(Tensor::scalar(-7i64, &dev).unwrap().item_i64().unwrap(), -7);
        assert_eq!(Tensor::scalar(5i64, &dev).unwrap().item().unwrap(), 5.0);
        let a = Tensor::arange_dtype(0.0, 4.0, 1.0, DType::I64, &dev).unwrap();
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3], "{dev}");
        let z = Tensor::full_dtype([2], -3.0, DType::I64, &dev).unwrap();
        assert_eq!(z.to_vec::<i64>().unwrap(), vec![-3, -3], "{dev}");
        // Reading as another element type is refused.
        assert!(matches!(
            t.to_vec::<i32>(),
            Err(Error::DTypeMismatch { .. })
        ));
    }
}

#[test]
fn cpu_values_beyond_int32_are_exact_and_wrap_like_pytorch() {
    let dev = Device::Cpu;
    let big = (1i64 << 53) + 1; // not representable in f64
    let t = long(&[i64::MAX, i64::MIN, big, 3_000_000_000], &dev);
    assert_eq!(
        t.to_vec::<i64>().unwrap(),
        vec![i64::MAX, i64::MIN, big, 3_000_000_000]
    );
    assert_eq!(Tensor::scalar(big, &dev).unwrap().item_i64().unwrap(), big);
    // Two's complement, as PyTorch's int64.
    let one = long(&[1, 1, 1, 1], &dev);
    assert_eq!(
        t.add(&one).unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MIN, i64::MIN + 1, big + 1, 3_000_000_001]
    );
    assert_eq!(
        t.mul_scalar(2).unwrap().to_vec::<i64>().unwrap(),
        vec![-2, 0, 2 * big, 6_000_000_000]
    );
    assert_eq!(
        t.neg().unwrap().to_vec::<i64>().unwrap(),
        vec![-i64::MAX, i64::MIN, -big, -3_000_000_000]
    );
    // Comparisons, max and argmax are exact where f64 would tie.
    let a = long(&[big - 1, big], &dev);
    let b = long(&[big, big], &dev);
    assert_eq!(
        a.lt(&b).unwrap().to_vec::<bool>().unwrap(),
        vec![true, false]
    );
    assert_eq!(
        a.eq(&b).unwrap().to_vec::<bool>().unwrap(),
        vec![false, true]
    );
    assert_eq!(a.argmax(None, false).unwrap().item_i64().unwrap(), 1);
    assert_eq!(a.amax([], false).unwrap().item_i64().unwrap(), big);
    assert_eq!(a.sum_all().unwrap().item_i64().unwrap(), 2 * big - 1);
    assert_eq!(
        a.cumsum(0).unwrap().to_vec::<i64>().unwrap(),
        vec![big - 1, 2 * big - 1]
    );
    assert_eq!(
        a.eq_scalar(big).unwrap().to_vec::<bool>().unwrap(),
        vec![false, true]
    );
    assert_eq!(
        a.clamp(None, Some(big - 1))
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![big - 1, big - 1]
    );
    assert_eq!(
        a.add_scalar(1i64 << 40).unwrap().to_vec::<i64>().unwrap(),
        vec![big - 1 + (1 << 40), big + (1 << 40)]
    );
    // The int64 sum of int32 values does not wrap at int32.
    let i = Tensor::from_vec(vec![i32::MAX, i32::MAX], [2], &dev).unwrap();
    assert_eq!(
        i.sum_all().unwrap().item_i64().unwrap(),
        2 * i32::MAX as i64
    );
    // The int64 product wraps as PyTorch's: 2^62 * 4 = 0.
    let p = long(&[1 << 62, 4], &dev);
    assert_eq!(p.prod_dim(0, false).unwrap().item_i64().unwrap(), 0);
}

#[test]
fn gpu_refuses_values_beyond_int32_never_wraps() {
    let Some(gpu) = common::gpu() else { return };
    // Upload.
    let r = Tensor::from_vec(vec![1i64, 3_000_000_000], [2], &gpu);
    let msg = err_text(r);
    assert!(
        msg.contains("3000000000") && msg.contains("2147483647") && msg.contains("to"),
        "{msg}"
    );
    let host = long(&[-3_000_000_000], &Device::Cpu);
    assert!(err_text(host.to(&gpu)).contains("-3000000000"));
    let big = Tensor::full_dtype([1], 4e9, DType::I64, &gpu);
    assert!(err_text(big).contains("full"));
    // Arithmetic whose result leaves int32: an error naming the op.
    let m = long(&[i32::MAX as i64, 5], &gpu);
    let msg = err_text(m.add_scalar(1));
    assert!(msg.contains("add") && msg.contains("2147483648"), "{msg}");
    let msg = err_text(m.mul(&m));
    assert!(msg.contains("mul"), "{msg}");
    let msg = err_text(long(&[i32::MIN as i64], &gpu).sub_scalar(1));
    assert!(msg.contains("sub") && msg.contains("-2147483649"), "{msg}");
    let msg = err_text(long(&[i32::MIN as i64], &gpu).neg());
    assert!(msg.contains("2147483648"), "{msg}");
    let msg = err_text(m.sum_all());
    assert!(msg.contains("sum"), "{msg}");
    let i = Tensor::from_vec(vec![i32::MAX, 1], [2], &gpu).unwrap();
    assert!(err_text(i.sum_all()).contains("sum"));
    assert!(err_text(i.cumsum(0)).contains("cumsum"));
    // Casts from floating point past int32.
    let f = Tensor::from_vec(vec![3e9f32], [1], &gpu).unwrap();
    assert!(err_text(f.to_dtype(DType::I64)).contains("3000000000"));
    // Results inside int32 are exact, even when a partial sum leaves it.
    let s = long(&[i32::MAX as i64, 1, -1], &gpu);
    assert_eq!(s.sum_all().unwrap().item_i64().unwrap(), i32::MAX as i64);
    // Its cumulative sum passes int32 at the second element: refused.
    assert!(err_text(s.cumsum(0)).contains("cumsum"));
}

#[test]
fn gpu_matches_cpu_inside_int32() {
    let v = [7i64, -3, 0, 1 << 20, -(1 << 20), 42];
    let run = |dev: &Device| -> Vec<Vec<i64>> {
        let x = Tensor::from_slice(&v, [2, 3], dev).unwrap();
        let y = x.flip([1]).unwrap();
        vec![
            x.add(&y).unwrap().to_vec().unwrap(),
            x.sub(&y).unwrap().to_vec().unwrap(),
            x.mul_scalar(3).unwrap().to_vec().unwrap(),
            x.maximum(&y).unwrap().to_vec().unwrap(),
            x.abs().unwrap().to_vec().unwrap(),
            x.sum_dims([1], false).unwrap().to_vec().unwrap(),
            x.prod_dim(0, false).unwrap().to_vec().unwrap(),
            x.cumsum(1).unwrap().to_vec().unwrap(),
            x.argmax(Some(1), false).unwrap().to_vec().unwrap(),
            x.max_dim(0, false).unwrap().1.to_vec().unwrap(),
            x.amin([0], false).unwrap().to_vec().unwrap(),
            x.transpose(0, 1)
                .unwrap()
                .contiguous()
                .unwrap()
                .to_vec()
                .unwrap(),
            x.to_dtype(DType::I32)
                .unwrap()
                .to_dtype(DType::I64)
                .unwrap()
                .to_vec()
                .unwrap(),
        ]
    };
    let cpu = run(&Device::Cpu);
    assert_eq!(cpu[5], vec![4, 42]);
    assert_eq!(cpu[8], vec![0, 0]);
    for dev in devices() {
        assert_eq!(run(&dev), cpu, "{dev}");
    }
}

#[test]
fn casts_both_ways_at_the_int32_boundary() {
    for dev in devices() {
        let i = Tensor::from_vec(vec![i32::MIN, -1, i32::MAX], [3], &dev).unwrap();
        let l = i.to_dtype(DType::I64).unwrap();
        assert_eq!(l.dtype(), DType::I64);
        assert_eq!(
            l.to_vec::<i64>().unwrap(),
            vec![i32::MIN as i64, -1, i32::MAX as i64],
            "{dev}"
        );
        assert_eq!(
            l.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
            vec![i32::MIN, -1, i32::MAX],
            "{dev}"
        );
        let f = Tensor::from_vec(vec![-2.7f32, 2.7, 0.0, 2e9], [4], &dev).unwrap();
        assert_eq!(
            f.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
            vec![-2, 2, 0, 2_000_000_000],
            "{dev}: float -> int64 truncates toward zero"
        );
        // Past int32 and NaN (PyTorch leaves them undefined; x86 gives i32::MIN for all): Rust's
        // `as` on every device, saturating, NaN 0 (a GPU clamped to 2147483520 and gave i32::MIN
        // for NaN).
        let wide = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            3e9,
            -3e9,
            2147483520.0,
            2147483648.0,
            -2147483648.0,
            -2147483904.0,
        ];
        let f = Tensor::from_vec(wide.to_vec(), [9], &dev).unwrap();
        assert_eq!(
            f.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
            wide.map(|x| x as i32),
            "{dev}"
        );
        // From halves too (the same conversion after widening): NaN, ±inf, 65504.
        let half = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 65504.0];
        for dt in [DType::F16, DType::BF16] {
            let h = Tensor::from_vec(half.to_vec(), [4], &dev).unwrap();
            let h = h.to_dtype(dt).unwrap();
            let want = h.to(&Device::Cpu).unwrap().to_dtype(DType::F32).unwrap();
            let want: Vec<i32> = want
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|&x| x as i32)
                .collect();
            assert_eq!(
                h.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
                want,
                "{dev} {dt:?}"
            );
        }
        let back = long(&[-5, 16_777_217], &dev).to_dtype(DType::F32).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), vec![-5.0, 16_777_216.0]);
        let b = Tensor::from_vec(vec![true, false], [2], &dev).unwrap();
        assert_eq!(
            b.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
            vec![1, 0]
        );
        assert_eq!(
            long(&[0, -9], &dev)
                .to_dtype(DType::Bool)
                .unwrap()
                .to_vec::<bool>()
                .unwrap(),
            vec![false, true]
        );
    }
    // Past int32 on the CPU: int64 -> int32 wraps (PyTorch's narrowing), int64 <-> f64 exact.
    let l = long(
        &[i32::MAX as i64 + 1, i32::MIN as i64 - 1, 1 << 40],
        &Device::Cpu,
    );
    assert_eq!(
        l.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        vec![i32::MIN, i32::MAX, 0]
    );
    let d = long(&[1 << 53, -(1 << 53)], &Device::Cpu)
        .to_dtype(DType::F64)
        .unwrap();
    assert_eq!(
        d.to_vec::<f64>().unwrap(),
        vec![9007199254740992.0, -9007199254740992.0]
    );
    assert_eq!(
        d.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        vec![1 << 53, -(1 << 53)]
    );
    // int64 -> f32 rounds once to nearest (2^24 + 1 -> 2^24, 2^31 + 2^7 + 1 -> 2^31 + 2^8).
    let r = long(&[(1 << 24) + 1, (1 << 31) + (1 << 7) + 1], &Device::Cpu)
        .to_dtype(DType::F32)
        .unwrap();
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        vec![16_777_216.0, 2_147_483_904.0]
    );
}

#[test]
fn promotion_table() {
    use DType::*;
    for (a, b, want) in [
        (I32, I64, I64),
        (I64, I32, I64),
        (Bool, I64, I64),
        (I64, I64, I64),
        (I64, F16, F16),
        (BF16, I64, BF16),
        (I64, F32, F32),
        (F64, I64, F64),
    ] {
        assert_eq!(DType::promote(a, b), want, "{a} with {b}");
    }
    assert!(DType::can_cast(I64, I32) && DType::can_cast(I32, I64));
    assert!(DType::can_cast(Bool, I64) && !DType::can_cast(F32, I64));
    assert!(!DType::can_cast(I64, Bool));
    assert_eq!(DType::I64.name(), "int64");
    assert_eq!(DType::I64.size_in_bytes(), 8);
    assert!(DType::I64.is_int() && !DType::I64.is_float());
    assert_eq!(DType::INDEX, I64);
    for dev in devices() {
        let l = long(&[1, 2], &dev);
        let i = Tensor::from_vec(vec![3i32, 4], [2], &dev).unwrap();
        let b = Tensor::from_vec(vec![true, false], [2], &dev).unwrap();
        let f = Tensor::from_vec(vec![0.5f32, 0.5], [2], &dev).unwrap();
        assert_eq!(l.add(&i).unwrap().dtype(), I64);
        assert_eq!(i.mul(&l).unwrap().to_vec::<i64>().unwrap(), vec![3, 8]);
        assert_eq!(b.add(&l).unwrap().dtype(), I64);
        assert_eq!(l.add(&f).unwrap().to_vec::<f32>().unwrap(), vec![1.5, 2.5]);
        assert_eq!(l.mul_scalar(2).unwrap().dtype(), I64);
        assert_eq!(l.mul_scalar(2.0).unwrap().dtype(), F32);
        assert_eq!(l.div(&l).unwrap().dtype(), F32);
        assert_eq!(b.add_scalar(1).unwrap().dtype(), I64, "bool + int is int64");
        assert_eq!(l.exp().unwrap().dtype(), F32);
        assert_eq!(l.lt(&i).unwrap().dtype(), Bool);
        assert_eq!(b.square().unwrap().dtype(), I64);
        let w = Tensor::where_cond(&b, &l, &i).unwrap();
        assert_eq!(w.to_vec::<i64>().unwrap(), vec![1, 4], "{dev}");
        // An integer tensor against an integer beyond int32 compares exactly.
        assert_eq!(
            i.lt_scalar(1i64 << 40).unwrap().to_vec::<bool>().unwrap(),
            vec![true, true],
            "{dev}"
        );
        assert_eq!(
            i.eq_scalar(1i64 << 32).unwrap().to_vec::<bool>().unwrap(),
            vec![false, false],
            "{dev}"
        );
    }
}

#[test]
fn reductions_give_pytorch_dtypes() {
    for dev in devices() {
        let i = Tensor::from_vec(vec![1i32, 5, 3, 2], [2, 2], &dev).unwrap();
        let b = Tensor::from_vec(vec![true, true, false, true], [2, 2], &dev).unwrap();
        let f = Tensor::from_vec(vec![1f32, 5.0, 3.0, 2.0], [2, 2], &dev).unwrap();
        let l = i.to_dtype(DType::I64).unwrap();
        // torch.sum of int32 / bool / int64 is int64; of float32 float32.
        assert_eq!(i.sum_all().unwrap().dtype(), DType::I64, "{dev}");
        assert_eq!(i.sum_all().unwrap().item_i64().unwrap(), 11);
        let bs = b.sum_dims([1], false).unwrap();
        assert_eq!(bs.dtype(), DType::I64, "{dev}");
        assert_eq!(bs.to_vec::<i64>().unwrap(), vec![2, 1], "{dev}");
        assert_eq!(b.sum_all().unwrap().item_i64().unwrap(), 3, "{dev}");
        assert_eq!(l.sum_all().unwrap().dtype(), DType::I64);
        assert_eq!(f.sum_all().unwrap().dtype(), DType::F32);
        assert_eq!(i.prod_dim(1, false).unwrap().dtype(), DType::I64);
        assert_eq!(
            i.prod_dim(1, false).unwrap().to_vec::<i64>().unwrap(),
            vec![5, 6]
        );
        assert_eq!(i.cumsum(0).unwrap().dtype(), DType::I64);
        assert_eq!(
            b.cumsum(1).unwrap().to_vec::<i64>().unwrap(),
            vec![1, 2, 0, 1]
        );
        // Indices are int64.
        for t in [&i, &f, &l] {
            let a = t.argmax(Some(1), false).unwrap();
            assert_eq!(a.dtype(), DType::INDEX, "{dev}");
            assert_eq!(a.to_vec::<i64>().unwrap(), vec![1, 0], "{dev}");
            assert_eq!(t.argmin(None, false).unwrap().item_i64().unwrap(), 0);
            let (v, idx) = t.max_dim(0, false).unwrap();
            assert_eq!(idx.dtype(), DType::I64);
            assert_eq!(idx.to_vec::<i64>().unwrap(), vec![1, 0]);
            assert_eq!(v.dtype(), t.dtype());
        }
        let labels = long(&[2, 0], &dev);
        let oh = labels.one_hot(3).unwrap();
        assert_eq!(oh.dtype(), DType::I64);
        assert_eq!(oh.to_vec::<i64>().unwrap(), vec![0, 0, 1, 1, 0, 0]);
        // Accuracy as PyTorch code writes it: (pred == target).sum().item().
        let correct = f
            .argmax(Some(1), false)
            .unwrap()
            .eq(&labels)
            .unwrap()
            .sum_all()
            .unwrap();
        assert_eq!(correct.dtype(), DType::I64);
        assert_eq!(correct.item().unwrap(), 1.0);
        // mean of an integer tensor is refused, as in PyTorch.
        assert!(matches!(
            l.mean_all(),
            Err(Error::UnsupportedDType { op: "mean", .. })
        ));
    }
}

#[test]
fn indexing_with_int64_indices() {
    for dev in devices() {
        let x = Tensor::from_vec((0..6).map(|v| v as f32).collect(), [2, 3], &dev).unwrap();
        let idx = Tensor::from_vec(vec![2i64, 0, 1, 1], [2, 2], &dev).unwrap();
        let idx32 = idx.to_dtype(DType::I32).unwrap();
        let g = x.gather(1, &idx).unwrap();
        assert_eq!(
            g.to_vec::<f32>().unwrap(),
            vec![2.0, 0.0, 4.0, 4.0],
            "{dev}"
        );
        assert_eq!(
            x.gather(1, &idx32).unwrap().to_vec::<f32>().unwrap(),
            g.to_vec::<f32>().unwrap()
        );
        let rows = long(&[1, 0, 1], &dev);
        assert_eq!(
            x.index_select(0, &rows).unwrap().to_vec::<f32>().unwrap(),
            vec![3.0, 4.0, 5.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            "{dev}"
        );
        let z = Tensor::zeros([2, 3], &dev).unwrap();
        let src = Tensor::ones([2, 2], &dev).unwrap();
        assert_eq!(
            z.scatter_add(1, &idx, &src)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            vec![1.0, 0.0, 1.0, 0.0, 2.0, 0.0],
            "{dev}"
        );
        // scatter_add into int64 (on a GPU computed in i64 and range-checked).
        let zl = Tensor::full_dtype([2, 3], 0.0, DType::I64, &dev).unwrap();
        let sl = Tensor::full_dtype([2, 2], 5.0, DType::I64, &dev).unwrap();
        assert_eq!(
            zl.scatter_add(1, &idx, &sl)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![5, 0, 5, 0, 10, 0],
            "{dev}"
        );
        let words = Tensor::from_vec(vec![2i64, 0], [2], &dev).unwrap();
        let e = words
            .embedding(&x.transpose(0, 1).unwrap().contiguous().unwrap())
            .unwrap();
        assert_eq!(
            e.to_vec::<f32>().unwrap(),
            vec![2.0, 5.0, 0.0, 3.0],
            "{dev}"
        );
        // Losses take int64 targets (PyTorch's) and agree with int32 ones.
        let logits =
            Tensor::from_vec(vec![0.1f32, 2.0, -1.0, 0.5, 0.2, 0.3], [2, 3], &dev).unwrap();
        let t64 = long(&[1, -100], &dev);
        let t32 = t64.to_dtype(DType::I32).unwrap();
        let a = F::cross_entropy(&logits, &t64).unwrap();
        let b = F::cross_entropy(&logits, &t32).unwrap();
        assert_eq!(a.item().unwrap(), b.item().unwrap(), "{dev}");
        let logp = logits.log_softmax(1).unwrap();
        let n = F::nll_loss_with(
            &logp,
            &long(&[2, 0], &dev),
            F::NllLossOptions {
                reduction: F::Reduction::Sum,
                ..Default::default()
            },
        )
        .unwrap();
        let want = -(logp.to_vec::<f32>().unwrap()[2] + logp.to_vec::<f32>().unwrap()[3]);
        assert!((n.item().unwrap() as f32 - want).abs() < 1e-6, "{dev}");
        // Out of range int64 indices are errors (on a GPU at the next readback).
        let bad = long(&[3], &dev);
        let r = x.index_select(1, &bad).and_then(|t| t.to_vec::<f32>());
        assert!(
            matches!(r, Err(Error::IndexOutOfRange { index: 3, .. })),
            "{dev}: {r:?}"
        );
    }
    // An int64 index past int32 on the CPU is reported exactly, not truncated.
    let x = Tensor::zeros([4], &Device::Cpu).unwrap();
    let r = x.index_select(0, &long(&[1 << 32], &Device::Cpu));
    assert!(
        matches!(
            r,
            Err(Error::IndexOutOfRange {
                index: 4294967296,
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn safetensors_round_trip() {
    let dir = std::env::temp_dir().join(format!("wgtorch-int64-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.safetensors");
    let big = long(&[i64::MIN, -1, 0, 3_000_000_000, i64::MAX], &Device::Cpu);
    let small = long(&[7, -7], &Device::Cpu);
    wgtorch::io::save(
        &path,
        &[
            ("big".to_string(), big.clone()),
            ("small".to_string(), small),
        ],
    )
    .unwrap();
    let loaded = wgtorch::io::load(&path, &Device::Cpu).unwrap();
    assert_eq!(loaded[0].0, "big");
    assert_eq!(loaded[0].1.dtype(), DType::I64);
    assert_eq!(
        loaded[0].1.to_vec::<i64>().unwrap(),
        big.to_vec::<i64>().unwrap()
    );
    // The file's dtype is I64 (PyTorch reads torch.int64).
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.tensor("big").unwrap().dtype(), safetensors::Dtype::I64);
    if let Some(gpu) = common::gpu() {
        // On a GPU, the value past int32 is refused, naming it.
        let msg = err_text(wgtorch::io::load(&path, &gpu));
        assert!(msg.contains("9223372036854775808"), "{msg}");
        // Values inside int32 load as int64 and save back as int64.
        let p2 = dir.join("s.safetensors");
        let s = long(&[7, -7], &gpu);
        wgtorch::io::save(&p2, &[("s".to_string(), s)]).unwrap();
        let l = wgtorch::io::load(&p2, &gpu).unwrap();
        assert_eq!(l[0].1.dtype(), DType::I64);
        assert_eq!(l[0].1.to_vec::<i64>().unwrap(), vec![7, -7]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

struct Two;
impl Dataset for Two {
    fn len(&self) -> usize {
        2
    }
    fn get(&self, i: usize) -> Result<Sample> {
        Ok((Tensor::full([1], i as f64, &Device::Cpu)?, i as i32 + 5))
    }
}

#[test]
fn dataloader_labels_are_int64() {
    for dev in devices() {
        let loader = DataLoader::new(Arc::new(Two), 2, &dev).unwrap();
        let (_, y) = loader.epoch(0).next().unwrap().unwrap();
        assert_eq!(y.dtype(), DType::I64, "{dev}");
        assert_eq!(y.to_vec::<i64>().unwrap(), vec![5, 6]);
    }
}

#[test]
fn bad_inputs() {
    for dev in devices() {
        let x = Tensor::zeros([2, 3], &dev).unwrap();
        let fidx = Tensor::zeros([2, 1], &dev).unwrap();
        let r = x.gather(1, &fidx);
        assert!(
            matches!(
                r,
                Err(Error::DTypeMismatch {
                    op: "gather",
                    expected: DType::I64,
                    found: DType::F32
                })
            ),
            "{r:?}"
        );
        let r = F::cross_entropy(&x, &Tensor::zeros([2], &dev).unwrap());
        assert!(
            matches!(
                r,
                Err(Error::DTypeMismatch {
                    expected: DType::I64,
                    ..
                })
            ),
            "{r:?}"
        );
        assert!(matches!(
            Tensor::scalar(1.5f32, &dev).unwrap().item_i64(),
            Err(Error::UnsupportedDType { op: "item_i64", .. })
        ));
        assert!(long(&[1, 2], &dev).item_i64().is_err());
        // Arithmetic with an int32 scalar that overflows int32 on an int32 tensor is PyTorch's
        // overflow error; on an int64 tensor it is fine.
        let i = Tensor::from_vec(vec![1i32], [1], &dev).unwrap();
        assert!(err_text(i.add_scalar(1i64 << 40)).contains("int32"));
        assert!(long(&[1, 2], &dev).relu().is_err());
    }
    // U64 values past int64 are refused at load, never wrapped.
    let data: Vec<u8> = u64::MAX.to_le_bytes().to_vec();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::U64, vec![1], &data).unwrap();
    let bytes = safetensors::serialize(vec![("u", view)], None).unwrap();
    let msg = err_text(wgtorch::io::from_safetensors_bytes(
        std::path::Path::new("mem"),
        &bytes,
        &Device::Cpu,
    ));
    assert!(
        msg.contains("18446744073709551615") && msg.contains("int64"),
        "{msg}"
    );
}
