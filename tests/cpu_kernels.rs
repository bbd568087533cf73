//! The CPU's fast paths against the general ones they shortcut: the fused softmax / log_softmax
//! (last dim; on a GPU too, for the rows its one-invocation-per-row kernel takes) against the
//! composite (any other dim), forward, backward and double backward; the row loops of strided
//! and broadcast elementwise ops against values computed on the host; the lane-wise max/min
//! reductions with NaN and infinities. On a GPU the other comparisons check the composites. The vectorisable f32 math (`exp`, `tanh`, `sigmoid`, `erf`, the normal CDF and
//! density) against f64 references, in ulps, on every instruction set the CPU has, and the fused
//! gradient ops (sigmoid, tanh, GELU) against their composites, with double backward. Half-type
//! max pooling and the bulk f32 <-> half casts against the f32 pooling and the strided casts.

mod common;
use common::{assert_close, devices, vals};
use wgtorch::backend::cpu::vmath;
use wgtorch::{DType, Device, Result, Tensor};

/// Softmax (or log-softmax) of `x` `[R, N]` along dim 1 (the fused kernel on the CPU) and the
/// same through the transpose along dim 0 (the composite), with their input gradients for the
/// upstream gradient `g`.
fn both_ways(x: &Tensor, g: &Tensor, log: bool) -> Result<[Vec<f64>; 4]> {
    let sm = |t: &Tensor, d: isize| if log { t.log_softmax(d) } else { t.softmax(d) };
    let a = x.detach().requires_grad_(true);
    let ya = sm(&a, 1)?;
    ya.backward_with(Some(g), false, false)?;
    let b = x.detach().requires_grad_(true);
    let yb = sm(&b.t()?, 0)?.t()?;
    yb.backward_with(Some(g), false, false)?;
    let grad = |t: &Tensor| t.grad().map(|g| vals(&g)).unwrap_or_default();
    Ok([vals(&ya), vals(&yb), grad(&a), grad(&b)])
}

#[test]
fn fused_softmax_matches_the_composite() -> Result<()> {
    for dev in devices() {
        wgtorch::manual_seed(3);
        // Rows shorter and longer than the 16 lanes, with remainders; one wide enough to run
        // several rows per task and one long row. On a GPU: rows over several workgroups, and
        // the longest rows the fused kernels take (8,192: three passes within llvmpipe's loop
        // cap, which counts all of an invocation's loops) and past them.
        let cases: &[(usize, usize)] = if dev.is_gpu() {
            &[
                (3, 5),
                (7, 37),
                (64, 300),
                (2, 600),
                (300, 10),
                (16, 8192),
                (16, 30_000),
            ]
        } else {
            &[(3, 5), (7, 37), (64, 300), (2, 20_000)]
        };
        for &(r, n) in cases {
            for dtype in [DType::F32, DType::F64] {
                if dev.is_gpu() && dtype == DType::F64 {
                    continue; // no f64 on WebGPU
                }
                let x = Tensor::randn([r, n], &dev)?
                    .mul_scalar(4.0)?
                    .to_dtype(dtype)?;
                let g = Tensor::randn([r, n], &dev)?.to_dtype(dtype)?;
                for log in [false, true] {
                    let [ya, yb, ga, gb] = both_ways(&x, &g, log)?;
                    let what = format!("{dev:?} {dtype:?} [{r}, {n}] log={log}");
                    assert_close(&format!("{what} forward"), &ya, &yb, 1e-5, 1e-6);
                    assert_close(&format!("{what} gradient"), &ga, &gb, 1e-4, 1e-5);
                }
            }
        }
    }
    Ok(())
}

#[test]
fn fused_softmax_keeps_the_composites_nan_and_inf_rules() -> Result<()> {
    let (ninf, nan, inf) = (f32::NEG_INFINITY, f32::NAN, f32::INFINITY);
    for dev in devices() {
        // A masked row (attention), a NaN row, an all -inf row, a +inf row; 20 wide so that the
        // lanes and the remainder both see the specials.
        let mut v = Vec::new();
        for row in 0..4 {
            for j in 0..20 {
                v.push(match (row, j) {
                    (0, j) if j > 3 => ninf,
                    (1, 17) => nan,
                    (2, _) => ninf,
                    (3, 2) => inf,
                    _ => j as f32 * 0.25,
                });
            }
        }
        let x = Tensor::from_vec(v, [4, 20], &dev)?;
        let g = Tensor::ones([4, 20], &dev)?;
        for log in [false, true] {
            let [ya, yb, ga, gb] = both_ways(&x, &g, log)?;
            let what = format!("{dev:?} log={log}");
            assert_close(&format!("{what} forward"), &ya, &yb, 1e-6, 1e-7);
            assert_close(&format!("{what} gradient"), &ga, &gb, 1e-6, 1e-7);
            // Masked positions get exactly zero probability.
            if !log {
                assert!(ya[4..20].iter().all(|&p| p == 0.0), "{what}: {ya:?}");
            }
        }
    }
    Ok(())
}

#[test]
fn fused_softmax_double_backward_matches_the_composite() -> Result<()> {
    for dev in devices() {
        wgtorch::manual_seed(5);
        let x = Tensor::randn([4, 9], &dev)?;
        let w = Tensor::randn([4, 9], &dev)?;
        for log in [false, true] {
            let sm = |t: &Tensor, d: isize| if log { t.log_softmax(d) } else { t.softmax(d) };
            let mut out = Vec::new();
            for fused in [true, false] {
                let a = x.detach().requires_grad_(true);
                let y = if fused {
                    sm(&a, 1)?
                } else {
                    sm(&a.t()?, 0)?.t()?
                };
                // d/dx of sum(w * y), kept in the graph, then differentiated again.
                y.mul(&w)?.sum_all()?.backward_with(None, false, true)?;
                let g1 = a.grad().expect("first gradient");
                a.set_grad(None);
                g1.square()?.sum_all()?.backward()?;
                out.push((vals(&g1), vals(&a.grad().expect("second gradient"))));
            }
            let what = format!("{dev:?} log={log}");
            assert_close(&format!("{what} first"), &out[0].0, &out[1].0, 1e-5, 1e-6);
            assert_close(&format!("{what} second"), &out[0].1, &out[1].1, 1e-4, 1e-5);
        }
    }
    Ok(())
}

#[test]
fn fused_softmax_rules_and_errors() -> Result<()> {
    for dev in devices() {
        let x = Tensor::randn([2, 3], &dev)?;
        // Out-of-range dims are the composite's error, naming the op.
        let e = x.log_softmax(2).unwrap_err().to_string();
        assert!(e.contains("log_softmax"), "{e}");
        let e = x.softmax(-3).unwrap_err().to_string();
        assert!(e.contains("softmax"), "{e}");
        // In-place change of the output before backward is refused.
        for log in [false, true] {
            let a = x.detach().requires_grad_(true);
            let y = if log {
                a.log_softmax(1)?
            } else {
                a.softmax(1)?
            };
            {
                let _g = wgtorch::no_grad();
                y.add_(&Tensor::ones([2, 3], &dev)?)?;
            }
            let e = y.sum_all()?.backward().unwrap_err().to_string();
            assert!(
                e.contains("modified by an inplace operation"),
                "{dev:?}: {e}"
            );
        }
        // Empty tensors normalise to themselves (as PyTorch); a 0-d tensor takes the composite.
        assert_eq!(
            Tensor::zeros([3, 0], &dev)?.log_softmax(1)?.shape(),
            &[3, 0]
        );
        assert_eq!(Tensor::zeros([0, 4], &dev)?.softmax(0)?.shape(), &[0, 4]);
        assert_eq!(vals(&Tensor::ones([], &dev)?.softmax(0)?), vec![1.0]);
        // A non-contiguous input (a transpose's rows) and a single column.
        let t = Tensor::randn([5, 4], &dev)?.t()?;
        let host = t.to(&Device::Cpu)?;
        assert_close(
            &format!("{dev:?} transposed"),
            &vals(&t.log_softmax(1)?),
            &vals(&host.log_softmax(1)?),
            1e-6,
            1e-6,
        );
        assert_eq!(
            vals(&Tensor::randn([3, 1], &dev)?.softmax(1)?),
            vec![1.0; 3]
        );
    }
    Ok(())
}

#[test]
fn strided_and_broadcast_rows_match_host_values() -> Result<()> {
    for dev in devices() {
        wgtorch::manual_seed(8);
        let x = Tensor::randn([6, 40], &dev)?;
        let xv = vals(&x);
        let col = Tensor::randn([6, 1], &dev)?;
        let row = Tensor::randn([40], &dev)?;
        let (cv, rv) = (vals(&col), vals(&row));
        let at = |i: usize, j: usize| xv[i * 40 + j];
        let host = |f: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
            (0..6)
                .flat_map(|i| (0..40).map(move |j| (i, j)))
                .map(|(i, j)| f(i, j))
                .collect()
        };
        let what = format!("{dev:?}");
        // Row broadcast of a column ([6, 1] -> [6, 40]), both ways round.
        assert_close(
            &format!("{what} x - col"),
            &vals(&x.sub(&col)?),
            &host(&|i, j| at(i, j) - cv[i]),
            1e-6,
            1e-6,
        );
        assert_close(
            &format!("{what} col - x"),
            &vals(&col.sub(&x)?),
            &host(&|i, j| cv[i] - at(i, j)),
            1e-6,
            1e-6,
        );
        // A strided row view ([6, 40] -> columns 8..32) plus a broadcast bias row.
        let v = x.narrow(1, 8, 24)?;
        let want: Vec<f64> = (0..6)
            .flat_map(|i| (8..32).map(move |j| (i, j)))
            .map(|(i, j)| at(i, j) + rv[j - 8])
            .collect();
        assert_close(
            &format!("{what} view + bias"),
            &vals(&v.add(&row.narrow(0, 0, 24)?)?),
            &want,
            1e-6,
            1e-6,
        );
        // Transposed operands: rows with stride 40 (unary and binary).
        let t = x.t()?; // [40, 6]: rows shorter than the row loops' minimum
        let tt = Tensor::randn([40, 20], &dev)?.t()?; // [20, 40], strided rows
        let ttv = vals(&tt.contiguous()?);
        let sig: Vec<f64> = ttv.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
        assert_close(
            &format!("{what} sigmoid of a transpose"),
            &vals(&tt.sigmoid()?),
            &sig,
            1e-5,
            1e-6,
        );
        let prod: Vec<f64> = ttv.iter().map(|v| v * v).collect();
        assert_close(
            &format!("{what} transpose * transpose"),
            &vals(&tt.mul(&tt)?),
            &prod,
            1e-6,
            1e-6,
        );
        let tv: Vec<f64> = (0..40)
            .flat_map(|j| (0..6).map(move |i| (i, j)))
            .map(|(i, j)| at(i, j).tanh())
            .collect();
        assert_close(
            &format!("{what} tanh of a short-row transpose"),
            &vals(&t.tanh()?),
            &tv,
            1e-5,
            1e-6,
        );
        // masked_fill with a broadcast mask (causal attention's shape).
        let mask: Vec<bool> = (0..40 * 40).map(|i| i % 40 > i / 40).collect();
        let mask = Tensor::from_vec(mask, [40, 40], &dev)?;
        let s = Tensor::randn([2, 40, 40], &dev)?;
        let sv = vals(&s);
        let want: Vec<f64> = sv
            .iter()
            .enumerate()
            .map(|(k, &v)| if k % 40 > (k / 40) % 40 { -1e9 } else { v })
            .collect();
        assert_close(
            &format!("{what} masked_fill"),
            &vals(&s.masked_fill(&mask, -1e9)?),
            &want,
            1e-6,
            1e-6,
        );
        // pow(2) is x * x exactly on the CPU.
        let p = vals(&x.pow_scalar(2.0)?);
        assert!(
            dev.is_gpu()
                || p.iter()
                    .zip(&xv)
                    .all(|(p, x)| *p == ((*x as f32) * (*x as f32)) as f64),
            "{what}"
        );
    }
    Ok(())
}

#[test]
fn max_and_min_rows_propagate_nan_and_keep_infinities() -> Result<()> {
    for dev in devices() {
        let mut v: Vec<f32> = (0..3 * 37)
            .map(|i| ((i * 7919) % 101) as f32 - 50.0)
            .collect();
        v[37 + 20] = f32::NAN; // row 1: NaN inside the lanes
        v[2 * 37 + 36] = f32::INFINITY; // row 2: +inf in the remainder
        v[2 * 37 + 3] = f32::NEG_INFINITY;
        let x = Tensor::from_vec(v.clone(), [3, 37], &dev)?;
        let (mx, mn) = (vals(&x.amax([1], false)?), vals(&x.amin([1], false)?));
        let row = |r: usize| &v[r * 37..(r + 1) * 37];
        let host_max = row(0).iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let host_min = row(0).iter().fold(f32::INFINITY, |a, &b| a.min(b)) as f64;
        assert_eq!((mx[0], mn[0]), (host_max, host_min), "{dev:?}");
        assert!(mx[1].is_nan() && mn[1].is_nan(), "{dev:?}: {mx:?} {mn:?}");
        assert_eq!(
            (mx[2], mn[2]),
            (f64::INFINITY, f64::NEG_INFINITY),
            "{dev:?}"
        );
        // Integers stay exact.
        let big = Tensor::from_vec(vec![i32::MAX, -5, i32::MAX - 1, i32::MIN], [1, 4], &dev)?;
        assert_eq!(
            vals(&big.amax([1], false)?),
            vec![i32::MAX as f64],
            "{dev:?}"
        );
        assert_eq!(
            vals(&big.amin([1], false)?),
            vec![i32::MIN as f64],
            "{dev:?}"
        );
    }
    Ok(())
}

#[test]
fn embedding_rows_gather_and_accumulate_like_the_host() -> Result<()> {
    for dev in devices() {
        wgtorch::manual_seed(9);
        // Rows of 20 (the row path) with repeated indices; dims 0 and 1 of a 3-D tensor.
        let w = Tensor::randn([10, 20], &dev)?.requires_grad_(true);
        let wv = vals(&w);
        let ids = [1i32, 3, 1, 9, 0, 3];
        let idx = Tensor::from_vec(ids.to_vec(), [2, 3], &dev)?;
        let e = idx.embedding(&w)?;
        assert_eq!(e.shape(), &[2, 3, 20]);
        let want: Vec<f64> = ids
            .iter()
            .flat_map(|&i| wv[i as usize * 20..(i as usize + 1) * 20].to_vec())
            .collect();
        assert_close(&format!("{dev:?} embedding"), &vals(&e), &want, 0.0, 0.0);
        let g = Tensor::randn([2, 3, 20], &dev)?;
        let gv = vals(&g);
        e.backward_with(Some(&g), false, false)?;
        let mut gw = vec![0.0f64; 200];
        for (r, &i) in ids.iter().enumerate() {
            for j in 0..20 {
                gw[i as usize * 20 + j] += gv[r * 20 + j];
            }
        }
        let got = vals(&w.grad().expect("embedding gradient"));
        assert_close(
            &format!("{dev:?} embedding gradient"),
            &got,
            &gw,
            1e-6,
            1e-6,
        );
        let x = Tensor::randn([3, 5, 17], &dev)?;
        let xv = vals(&x);
        let sel = Tensor::from_vec(vec![4i32, 0, 4], [3], &dev)?;
        let want: Vec<f64> = (0..3)
            .flat_map(|a| [4usize, 0, 4].map(|b| (a, b)))
            .flat_map(|(a, b)| xv[(a * 5 + b) * 17..(a * 5 + b + 1) * 17].to_vec())
            .collect();
        assert_close(
            &format!("{dev:?} index_select dim 1"),
            &vals(&x.index_select(1, &sel)?),
            &want,
            0.0,
            0.0,
        );
    }
    Ok(())
}

/// How far `got` is from the f64 reference `want`, in ulps of `want` rounded to f32 (NaN and
/// infinities must match exactly).
fn ulps(got: f32, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let w = (want as f32).abs();
    if w.is_infinite() || got.is_infinite() {
        return if got == want as f32 {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let ulp = (f32::from_bits(w.to_bits() + 1) - w) as f64;
    (got as f64 - want).abs() / ulp
}

/// The largest ulp error of `f` against `reference` over `xs`, and where.
fn worst(
    isa: vmath::Isa,
    xs: &[f32],
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f64) -> f64,
) -> (f64, f32) {
    let mut out = vec![0f32; xs.len()];
    vmath::vectorized_on(isa, || {
        for (o, &x) in out.iter_mut().zip(xs) {
            *o = f(x);
        }
    });
    let mut w = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulps(y, reference(x as f64));
        if e > w.0 || e.is_nan() {
            w = (e, x);
        }
    }
    w
}

/// Dense sweeps over each function's range (every 4096th f32 plus a linear grid), with the
/// special values, on the baseline, AVX2 and AVX-512 paths (those the CPU lacks run the baseline).
#[test]
fn vmath_accuracy() {
    let mut xs: Vec<f32> = (0..u32::MAX / 4096)
        .map(|i| f32::from_bits(i * 4096))
        .filter(|x| x.abs() < 120.0)
        .flat_map(|x| [x, -x])
        .collect();
    xs.extend((0..400_001).map(|i| -20.0 + i as f32 * 1e-4));
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        88.72,
        88.73,
        -87.34,
        -103.9,
        -104.0,
        1e-30,
        -1e-30,
    ]);
    let erf64 = |x: f64| libm::erf(x);
    let cdf64 = |x: f64| 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2);
    for isa in [vmath::Isa::Baseline, vmath::Isa::Avx2, vmath::Isa::Avx512] {
        let cases: [(&str, f64, (f64, f32)); 6] = [
            ("exp", 2.0, worst(isa, &xs, vmath::exp, f64::exp)),
            ("tanh", 2.0, worst(isa, &xs, vmath::tanh, f64::tanh)),
            (
                "sigmoid",
                3.0,
                worst(isa, &xs, vmath::sigmoid, |x| 1.0 / (1.0 + (-x).exp())),
            ),
            ("erf", 3.0, worst(isa, &xs, vmath::erf, erf64)),
            (
                "norm_cdf",
                6.0,
                worst(
                    isa,
                    &xs.iter()
                        .copied()
                        .filter(|x| *x > -13.0)
                        .collect::<Vec<_>>(),
                    vmath::norm_cdf,
                    cdf64,
                ),
            ),
            (
                "norm_pdf",
                4.0,
                worst(
                    isa,
                    &xs.iter()
                        .copied()
                        .filter(|x| x.abs() < 13.0)
                        .collect::<Vec<_>>(),
                    vmath::norm_pdf,
                    |x| (-0.5 * x * x).exp() * 0.398_942_280_401_432_7,
                ),
            ),
        ];
        for (name, bound, (err, at)) in cases {
            assert!(
                err <= bound,
                "{isa:?} {name}: {err:.2} ulp at {at:e} (bound {bound})"
            );
        }
        // The left tail of the CDF keeps its relative accuracy far past where 1 + erf cancels.
        let (mut out, tail): (Vec<f32>, Vec<f32>) = (
            Vec::new(),
            (0..2000).map(|i| -5.0 - i as f32 * 0.005).collect(),
        );
        vmath::vectorized_on(isa, || {
            out = tail.iter().map(|&x| vmath::norm_cdf(x)).collect()
        });
        for (&x, &y) in tail.iter().zip(&out) {
            let want = cdf64(x as f64);
            // Relative to the value, plus a few subnormal steps (2^-149) where it is subnormal.
            let bound = (2e-7 * (x as f64).powi(2) + 1e-6) * want + 4.0 * f32::from_bits(1) as f64;
            assert!(
                (y as f64 - want).abs() < bound,
                "{isa:?} norm_cdf({x}) = {y:e} vs {want:e}"
            );
        }
    }
}

/// layer_norm by hand with tensor ops (the reference for the fused CPU kernel).
fn layer_norm_by_hand(
    x: &Tensor,
    n: usize,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
) -> Result<Tensor> {
    let rows = (x.numel() / n) as isize;
    let x2 = x.reshape([rows, n as isize])?;
    let xc = x2.sub(&x2.mean_dims([1], true)?)?;
    let var = xc.square()?.mean_dims([1], true)?;
    let mut y = xc.div(&var.add_scalar(1e-5)?.sqrt()?)?;
    if let Some(w) = w {
        y = y.mul(&w.reshape([n as isize])?)?;
    }
    if let Some(b) = b {
        y = y.add(&b.reshape([n as isize])?)?;
    }
    y.reshape(x.shape())
}

/// The fused CPU layer_norm (one kernel each way; the formula under `create_graph`) against the
/// same normalisation written with tensor ops: output, the three gradients, and a second-order
/// gradient, with and without weight and bias, over one and two normalised dims, strided input.
#[test]
fn fused_layer_norm_matches_tensor_ops() -> Result<()> {
    use wgtorch::nn::functional as F;
    let dev = Device::Cpu;
    for dtype in [DType::F32, DType::F64] {
        for (shape, norm) in [
            (vec![5usize, 3, 8], vec![8usize]),
            (vec![4, 2, 50], vec![2, 50]),
        ] {
            let n: usize = norm.iter().product();
            for (with_w, with_b) in [(true, true), (true, false), (false, true), (false, false)] {
                let leaf = |s: &[usize]| -> Result<Tensor> {
                    Ok(Tensor::randn(s, &dev)?
                        .to_dtype(dtype)?
                        .requires_grad_(true))
                };
                // A transposed (non-contiguous) input of the right shape.
                let mut ts = shape.clone();
                ts.swap(0, 1);
                let base = leaf(&ts)?;
                // A fresh view each time: each graph frees its own nodes.
                let x = || base.transpose(0, 1);
                let w = if with_w { Some(leaf(&norm)?) } else { None };
                let b = if with_b { Some(leaf(&norm)?) } else { None };
                let up = Tensor::randn(&shape, &dev)?.to_dtype(dtype)?;
                let opts = F::LayerNormFuncOptions {
                    weight: w.as_ref(),
                    bias: b.as_ref(),
                    eps: 1e-5,
                };
                let fused = F::layer_norm_with(&x()?, &norm, opts)?;
                let manual = layer_norm_by_hand(&x()?, n, w.as_ref(), b.as_ref())?;
                let tol = if dtype == DType::F32 { 2e-5 } else { 1e-11 };
                assert_close(
                    "layer_norm forward",
                    &vals(&fused),
                    &vals(&manual),
                    tol,
                    tol,
                );
                let mut leaves = vec![base.clone()];
                leaves.extend(w.clone());
                leaves.extend(b.clone());
                let grads = |y: &Tensor| -> Result<Vec<Vec<f64>>> {
                    for l in &leaves {
                        l.set_grad(None);
                    }
                    y.mul(&up)?.sum_all()?.backward()?;
                    Ok(leaves.iter().map(|l| vals(&l.grad().unwrap())).collect())
                };
                let (gf, gm) = (grads(&fused)?, grads(&manual)?);
                for (a, b) in gf.iter().zip(&gm) {
                    assert_close("layer_norm gradient", a, b, 20.0 * tol, 20.0 * tol);
                }
                // Second order: d/dx of sum(dL/dx ** 2), through the recorded formula.
                let second = |f: &dyn Fn() -> Result<Tensor>| -> Result<Vec<f64>> {
                    base.set_grad(None);
                    f()?.mul(&up)?.sum_all()?.backward_with(None, true, true)?;
                    let gx = base.grad().unwrap();
                    base.set_grad(None);
                    gx.square()?.sum_all()?.backward()?;
                    Ok(vals(&base.grad().unwrap()))
                };
                let s1 = second(&|| F::layer_norm_with(&x()?, &norm, opts))?;
                let s2 = second(&|| layer_norm_by_hand(&x()?, n, w.as_ref(), b.as_ref()))?;
                assert_close(
                    "layer_norm second order",
                    &s1,
                    &s2,
                    100.0 * tol,
                    100.0 * tol,
                );
            }
        }
    }
    Ok(())
}

/// The fused CPU LSTM layer (inside `nn::LSTM`: the whole sequence in one op, cells split over
/// threads by rows when wide) against the cell written with tensor ops from the layer's own
/// weights, forward and in reverse: outputs, final states, the gradients of input, initial
/// states and weights, and a second-order gradient (the formula recorded under
/// `create_graph`), in f64 and f32 (the vectorised f32 nonlinearities).
#[test]
fn fused_lstm_layer_matches_tensor_ops() -> Result<()> {
    use wgtorch::nn::{ModuleExt, RNNOptions, LSTM};
    let dev = Device::Cpu;
    // (steps, batch, input, hidden, bidirectional, dtype): 9 rows of 2048 gates are split
    // over two threads.
    for (t_len, b, i_sz, h_sz, bi, dt) in [
        (3, 2, 4, 5, false, DType::F64),
        (3, 2, 4, 5, true, DType::F64),
        (2, 9, 3, 512, false, DType::F64),
        (3, 2, 4, 5, true, DType::F32),
        (2, 9, 3, 512, false, DType::F32),
    ] {
        let tol = if dt == DType::F64 { 1e-10 } else { 1e-4 };
        let opts = RNNOptions {
            bidirectional: bi,
            ..Default::default()
        };
        let mut lstm = LSTM::with_options(i_sz, h_sz, opts, &dev)?;
        lstm.to_dtype(dt)?;
        let p: std::collections::HashMap<String, Tensor> =
            lstm.named_parameters().into_iter().collect();
        let dirs = if bi { 2 } else { 1 };
        let leaf = |s: &[usize]| -> Result<Tensor> {
            Ok(Tensor::randn(s, &dev)?.to_dtype(dt)?.requires_grad_(true))
        };
        let (x, h0, c0) = (
            leaf(&[t_len, b, i_sz])?,
            leaf(&[dirs, b, h_sz])?,
            leaf(&[dirs, b, h_sz])?,
        );
        let by_hand = || -> Result<(Tensor, Tensor, Tensor)> {
            let (mut outs, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
            for d in 0..dirs {
                let w =
                    |name: &str| &p[&format!("{name}_l0{}", if d == 1 { "_reverse" } else { "" })];
                let (mut h, mut c) = (h0.select(0, d as i64)?, c0.select(0, d as i64)?);
                let mut out = vec![None; t_len];
                for k in 0..t_len {
                    let s = if d == 1 { t_len - 1 - k } else { k };
                    let gates = x
                        .select(0, s as i64)?
                        .linear(w("weight_ih"), Some(w("bias_ih")))?
                        .add(&h.linear(w("weight_hh"), Some(w("bias_hh")))?)?;
                    let g = gates.chunk(4, 1)?;
                    let (i, f, gg, o) = (
                        g[0].sigmoid()?,
                        g[1].sigmoid()?,
                        g[2].tanh()?,
                        g[3].sigmoid()?,
                    );
                    c = f.mul(&c)?.add(&i.mul(&gg)?)?;
                    h = o.mul(&c.tanh()?)?;
                    out[s] = Some(h.clone());
                }
                let out: Vec<Tensor> = out.into_iter().flatten().collect();
                outs.push(Tensor::stack(&out, 0)?);
                hs.push(h);
                cs.push(c);
            }
            Ok((
                Tensor::cat(&outs, 2)?,
                Tensor::stack(&hs, 0)?,
                Tensor::stack(&cs, 0)?,
            ))
        };
        let fused = || -> Result<(Tensor, Tensor, Tensor)> {
            let (out, (h, c)) = lstm.forward_with_state(&x, Some((&h0, &c0)))?;
            Ok((out, h, c))
        };
        let mut leaves = vec![x.clone(), h0.clone(), c0.clone()];
        leaves.extend(lstm.parameters());
        let up = Tensor::randn([t_len, b, dirs * h_sz], &dev)?.to_dtype(dt)?;
        let loss = |(o, h, c): (Tensor, Tensor, Tensor)| -> Result<Tensor> {
            o.mul(&up)?
                .sum_all()?
                .add(&h.sum_all()?)?
                .add(&c.square()?.sum_all()?)
        };
        let run = |f: &dyn Fn() -> Result<(Tensor, Tensor, Tensor)>| -> Result<Vec<Vec<f64>>> {
            let (o, h, c) = f()?;
            let mut v = vec![vals(&o), vals(&h), vals(&c)];
            for l in &leaves {
                l.set_grad(None);
            }
            loss((o, h, c))?.backward()?;
            v.extend(leaves.iter().map(|l| vals(&l.grad().unwrap())));
            // Second order: d/dx of sum((dL/dx)^2).
            for l in &leaves {
                l.set_grad(None);
            }
            loss(f()?)?.backward_with(None, true, true)?;
            // The first-order gradients again, from the formula recorded under create_graph.
            v.extend(leaves.iter().map(|l| vals(&l.grad().unwrap())));
            let gx = x.grad().unwrap();
            for l in &leaves {
                l.set_grad(None);
            }
            gx.square()?.sum_all()?.backward()?;
            v.push(vals(&x.grad().unwrap()));
            Ok(v)
        };
        let (a, b2) = (run(&fused)?, run(&by_hand)?);
        for (k, (a, b2)) in a.iter().zip(&b2).enumerate() {
            assert_close(
                &format!(
                    "lstm ({t_len}, {b}, {i_sz}, {h_sz}, bidirectional {bi}, {dt:?}) result {k}"
                ),
                a,
                b2,
                tol,
                tol,
            );
        }
    }
    // Empty sequences and batches run step by step: the right shapes, and h_n = h0 when no
    // step runs.
    let lstm = LSTM::new(3, 4, &dev)?;
    for (t_len, b) in [(0, 2), (2, 0)] {
        let x = Tensor::zeros([t_len, b, 3], &dev)?;
        let (h0, c0) = (
            Tensor::randn([1, b, 4], &dev)?,
            Tensor::randn([1, b, 4], &dev)?,
        );
        let (out, (h, c)) = lstm.forward_with_state(&x, Some((&h0, &c0)))?;
        assert_eq!(
            (out.shape(), h.shape(), c.shape()),
            (&[t_len, b, 4][..], &[1, b, 4][..], &[1, b, 4][..])
        );
        if t_len == 0 {
            assert_eq!((vals(&h), vals(&c)), (vals(&h0), vals(&c0)));
        }
    }
    Ok(())
}

/// Half-type max pooling (which pools the input widened to f32) and casts between f32 and the
/// half types (in bulk for whole contiguous tensors, element by element otherwise) against the
/// f32 pooling of the same values and the strided casts: the same values, NaN and infinities
/// included, and the same gradient (the first maximum of each window).
#[test]
fn half_pooling_and_casts_match_f32() -> Result<()> {
    let dev = Device::Cpu;
    let mut v: Vec<f32> = (0..2 * 3 * 7 * 9)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    v[5] = f32::NAN;
    v[40] = f32::NEG_INFINITY;
    v[41] = f32::INFINITY;
    v[100] = 3.0; // ties with its neighbour: the first maximum takes the gradient
    v[101] = 3.0;
    let x32 = Tensor::from_vec(v, [2, 3, 7, 9], &dev)?;
    let bits = |t: &Tensor| -> Result<Vec<u32>> {
        Ok(t.to_dtype(DType::F32)?
            .to_vec::<f32>()?
            .iter()
            .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
            .collect())
    };
    for dt in [DType::F16, DType::BF16] {
        // The contiguous cast equals the transposed one (gathered, then cast) made contiguous.
        let xh = x32.to_dtype(dt)?;
        let xt = x32.transpose(2, 3)?.to_dtype(dt)?.transpose(2, 3)?;
        assert_eq!(bits(&xh)?, bits(&xt.contiguous()?)?, "{dt:?} casts");
        let back = xh.to_dtype(DType::F32)?;
        let back_t = xh.transpose(1, 3)?.to_dtype(DType::F32)?.transpose(1, 3)?;
        assert_eq!(
            bits(&back)?,
            bits(&back_t.contiguous()?)?,
            "{dt:?} widening"
        );
        // Pooling in the half type equals pooling its values in f32, forward and backward.
        let opts = || wgtorch::nn::functional::MaxPool2dOptions {
            stride: Some(2.into()),
            padding: 1.into(),
            ..Default::default()
        };
        let xh = xh.requires_grad_(true);
        let xw = back.detach().requires_grad_(true);
        let (yh, yw) = (
            wgtorch::nn::functional::max_pool2d_with(&xh, 3, opts())?,
            wgtorch::nn::functional::max_pool2d_with(&xw, 3, opts())?,
        );
        assert_eq!(yh.dtype(), dt);
        assert_eq!(bits(&yh)?, bits(&yw)?, "{dt:?} max_pool2d values");
        yh.to_dtype(DType::F32)?.sum_all()?.backward()?;
        yw.sum_all()?.backward()?;
        let (gh, gw) = (xh.grad().expect("grad"), xw.grad().expect("grad"));
        assert_eq!(bits(&gh)?, bits(&gw)?, "{dt:?} max_pool2d gradient");
        // Sums over leading dims (a bias gradient: column sums) and over the last one equal
        // those of the same values in f32, rounded once.
        for dims in [&[0, 1, 2][..], &[0][..], &[3][..]] {
            let (sh, sw) = (
                xh.detach().sum_dims(dims, false)?,
                back.sum_dims(dims, false)?,
            );
            assert_eq!(sh.dtype(), dt);
            assert_eq!(
                bits(&sh)?,
                bits(&sw.to_dtype(dt)?)?,
                "{dt:?} sum over {dims:?}"
            );
        }
    }
    Ok(())
}

/// bf16 matmuls (on AMX tiles where the CPU has them, else widened to f32) against the exact
/// sums of the same bf16 values rounded once to bf16: they may differ by the f32 rounding of
/// the sums, so by at most one bf16 step. Plain, batched with a broadcast operand, deeper than
/// the AMX kernel's depth slice (with `k` 1100), transposed operands (as a linear layer's gradients read
/// them), broadcast batches, one row, and empty depth.
#[test]
fn bf16_matmul_matches_the_exact_sum_rounded_once() -> Result<()> {
    let dev = Device::Cpu;
    eprintln!(
        "bf16 matmuls on {}",
        if wgtorch::backend::cpu::bf16_on_amx() {
            "AMX"
        } else {
            "the f32 kernels"
        }
    );
    wgtorch::manual_seed(11);
    let bf =
        |shape: &[usize]| -> Result<Tensor> { Tensor::randn(shape, &dev)?.to_dtype(DType::BF16) };
    let cases: Vec<(Tensor, Tensor)> = vec![
        (bf(&[70, 100])?, bf(&[100, 45])?),
        (bf(&[3, 40, 1100])?, bf(&[1100, 33])?),
        (bf(&[100, 70])?.t()?, bf(&[45, 100])?.t()?),
        (bf(&[2, 600, 9])?.transpose(1, 2)?, bf(&[2, 600, 40])?),
        // Batches broadcast both ways (stride 0 in each operand), one product per batch entry.
        (bf(&[2, 1, 40, 70])?, bf(&[3, 70, 33])?),
        (bf(&[1, 300])?, bf(&[300, 64])?),
        (bf(&[4, 0])?, bf(&[0, 5])?),
    ];
    for (a, b) in &cases {
        let got = a.matmul(b)?;
        assert_eq!(got.dtype(), DType::BF16);
        let exact = a
            .to_dtype(DType::F64)?
            .matmul(&b.to_dtype(DType::F64)?)?
            .to_dtype(DType::BF16)?;
        assert_eq!(got.shape(), exact.shape());
        let (g, e) = (vals(&got), vals(&exact));
        let mut same = 0;
        for (i, (x, y)) in g.iter().zip(&e).enumerate() {
            // One bf16 step at y's magnitude (8 significant bits), or the f32 rounding of a
            // sum that cancels (terms of size ~1, at most 1100 of them).
            let step = (y.abs() * 2f64.powi(-7)).max(1e-3);
            assert!(
                (x - y).abs() <= step,
                "{:?}·{:?} [{i}]: {x} vs {y}",
                a.shape(),
                b.shape()
            );
            same += usize::from(x == y);
        }
        // Most sums round to the same bf16 either way.
        assert!(same * 10 >= g.len() * 9, "{same} of {} equal", g.len());
    }
    Ok(())
}

/// 3×3 stride-1 f32 convolutions with enough channels take Winograd's F(2×2, 3×3) on the CPU:
/// forward and input gradient against f64 (the direct sums), and inputs with a non-finite or
/// huge value, which must keep the direct sum's IEEE results (the transforms would spread an
/// ∞ into its neighbours' tiles as NaN), against f64 too.
#[test]
fn winograd_convolutions_match_f64_and_keep_the_direct_sums_rules() -> Result<()> {
    use wgtorch::nn::functional as F;
    let dev = Device::Cpu;
    wgtorch::manual_seed(5);
    let opts = F::Conv2dFuncOptions {
        padding: 1.into(),
        ..Default::default()
    };
    let w = Tensor::randn([64, 64, 3, 3], &dev)?.mul_scalar(0.1)?;
    let b = Tensor::randn([64], &dev)?;
    let conv = |x: &Tensor| -> Result<(Vec<f64>, Vec<f64>)> {
        let f32 = F::conv2d_with(x, &w, Some(&b), opts)?;
        let (x64, w64, b64) = (
            x.to_dtype(DType::F64)?,
            w.to_dtype(DType::F64)?,
            b.to_dtype(DType::F64)?,
        );
        let f64 = F::conv2d_with(&x64, &w64, Some(&b64), opts)?;
        Ok((vals(&f32), vals(&f64)))
    };
    let x = Tensor::randn([2, 64, 31, 32], &dev)?;
    let (got, want) = conv(&x)?;
    assert_close("winograd conv2d", &got, &want, 1e-5, 1e-5);

    // The input gradient of a stride-1 convolution is one too.
    let gy = Tensor::randn([2, 64, 31, 32], &dev)?;
    let xg = x.detach().requires_grad_(true);
    F::conv2d_with(&xg, &w, Some(&b), opts)?
        .mul(&gy)?
        .sum_all()?
        .backward()?;
    let x64 = x.to_dtype(DType::F64)?.requires_grad_(true);
    let w64 = w.to_dtype(DType::F64)?;
    F::conv2d_with(&x64, &w64, None, opts)?
        .mul(&gy.to_dtype(DType::F64)?)?
        .sum_all()?
        .backward()?;
    assert_close(
        "winograd input gradient",
        &vals(&xg.grad().expect("a gradient")),
        &vals(&x64.grad().expect("a gradient")),
        1e-5,
        1e-5,
    );

    // Non-finite and huge inputs: the same infinities and NaNs where f64 has them.
    for (at, v) in [(1000, f32::INFINITY), (4321, f32::NAN), (777, 3.0e20)] {
        let mut data = vals(&x);
        data[at] = v as f64;
        let xb = Tensor::from_vec(
            data.iter().map(|&v| v as f32).collect::<Vec<f32>>(),
            [2, 64, 31, 32],
            &dev,
        )?;
        let (got, want) = conv(&xb)?;
        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
            let same = if e.is_finite() {
                (g - e).abs() <= 1e-5 * e.abs().max(1.0)
            } else {
                g.is_nan() == e.is_nan() && (e.is_nan() || g == e)
            };
            assert!(same, "{v} at {at}: output {i} is {g}, f64 gives {e}");
        }
    }
    Ok(())
}
