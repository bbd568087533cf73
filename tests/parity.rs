//! The GPU against the CPU on the same inputs: random shapes, non-contiguous, broadcast, zero-size
//! and 0-d tensors.

mod common;
#[path = "parity/fused.rs"]
mod fused;
#[path = "parity/fuzz.rs"]
mod fuzz;

use common::{assert_close, vals};
use wgtorch::nn::functional as F;
use wgtorch::profiler::{profile, ProfileOptions, ProfilerActivity};
use wgtorch::{Device, Result, Tensor};

fn both(shape: &[usize], gpu: &Device) -> Result<(Tensor, Tensor)> {
    let c = Tensor::randn(shape, &Device::Cpu)?;
    let g = c.to(gpu)?;
    Ok((c, g))
}

fn same(what: &str, c: &Tensor, g: &Tensor, tol: f64) {
    assert_eq!(c.shape(), g.shape(), "{what}: shapes");
    assert_eq!(c.dtype(), g.dtype(), "{what}: dtypes");
    assert_close(what, &vals(g), &vals(c), tol, tol);
}

type Case = (&'static str, fn(&Tensor, &Tensor) -> Result<Tensor>);
type ViewCase = (&'static str, fn(&Tensor) -> Result<Tensor>);

#[test]
fn gpu_matches_cpu_on_many_shapes() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    wgtorch::manual_seed(11);
    let cases: &[Case] = &[
        ("add", |a, b| a.add(b)),
        ("mul", |a, b| a.mul(b)),
        ("div", |a, b| a.div(&b.abs()?.add_scalar(0.5)?)),
        ("maximum", |a, b| a.maximum(b)),
        ("lt", |a, b| a.lt(b)),
        ("where", |a, b| Tensor::where_cond(&a.gt(b)?, a, b)),
        ("exp", |a, _| a.exp()),
        ("gelu", |a, _| a.gelu()),
        ("sum", |a, _| a.sum_dims([-1], false)),
        ("amax", |a, _| a.amax([0], true)),
        ("softmax", |a, _| a.softmax(-1)),
        ("cumsum", |a, _| a.cumsum(0)),
        ("argmax", |a, _| a.argmax(Some(-1), false)),
        ("matmul", |a, b| a.matmul(&b.transpose(-1, -2)?)),
    ];
    // (a shape, b shape): equal, broadcast, zero-size, 0-d-ish, odd sizes past one workgroup.
    let shapes: &[(&[usize], &[usize])] = &[
        (&[3, 5], &[3, 5]),
        (&[4, 1, 6], &[3, 6]),
        (&[2, 0, 3], &[2, 0, 3]),
        (&[1], &[1]),
        (&[257, 33], &[257, 33]),
    ];
    for (sa, sb) in shapes {
        let (ac, ag) = both(sa, &gpu)?;
        let (bc, bg) = both(sb, &gpu)?;
        for (name, f) in cases {
            let c = f(&ac, &bc);
            let g = f(&ag, &bg);
            match (c, g) {
                (Ok(c), Ok(g)) => same(&format!("{name} {sa:?} {sb:?}"), &c, &g, 1e-4),
                (Err(_), Err(_)) => {}
                (c, g) => panic!(
                    "{name} {sa:?} {sb:?}: cpu {:?} vs gpu {:?}",
                    c.err(),
                    g.err()
                ),
            }
        }
    }
    Ok(())
}

#[test]
fn gpu_matches_cpu_on_views_and_scalars() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    wgtorch::manual_seed(3);
    let (c, g) = both(&[6, 8, 5], &gpu)?;
    let views: &[ViewCase] = &[
        ("permute", |t| t.permute([2, 0, 1])?.exp()),
        ("slice step", |t| t.slice(1, 1, 8, 3)?.sigmoid()),
        ("narrow+transpose", |t| {
            t.narrow(0, 2, 3)?.transpose(0, 2)?.contiguous()
        }),
        ("expand", |t| t.narrow(2, 0, 1)?.expand([6, 8, 4])?.relu()),
        ("diagonal", |t| t.diagonal(0, 1)?.square()),
        ("flip", |t| t.flip([0, 2])),
        ("repeat", |t| t.narrow(0, 0, 2)?.repeat([2, 1, 1])),
        ("cat", |t| {
            Tensor::cat(&[t.clone(), t.permute([0, 1, 2])?.narrow(0, 0, 1)?], 0)
        }),
        ("index_select", |t| {
            t.index_select(1, &Tensor::from_vec(vec![7i32, 0, 3], [3], &t.device())?)
        }),
        ("var", |t| t.var_dims([0, 2], true, false)),
        ("scalar", |t| t.sum_all()?.mul(&t.mean_all()?)),
        ("conv2d", |t| {
            let w = t
                .narrow(0, 0, 2)?
                .narrow(1, 0, 6)?
                .narrow(2, 0, 3)?
                .reshape([2, 2, 3, 3])?;
            F::conv2d_with(
                &t.reshape([2, 3, 8, 5])?.narrow(1, 0, 2)?,
                &w,
                None,
                F::Conv2dFuncOptions {
                    stride: [2, 1].into(),
                    padding: [1, 1].into(),
                    dilation: [1, 2].into(),
                    ..Default::default()
                },
            )
        }),
        ("max_pool", |t| {
            F::max_pool2d_with(
                &t.reshape([1, 3, 16, 5])?,
                [3, 2],
                F::MaxPool2dOptions {
                    stride: Some([2, 1].into()),
                    padding: [1, 0].into(),
                    ..Default::default()
                },
            )
        }),
    ];
    for (name, f) in views {
        same(name, &f(&c)?, &f(&g)?, 1e-4);
    }
    // 0-d tensors end to end.
    let s = Tensor::scalar(2.5f32, &gpu)?;
    assert_eq!(s.shape(), &[] as &[usize]);
    assert_eq!(s.exp()?.item()?, 2.5f64.exp() as f32 as f64);
    // Gradients agree too.
    let xc = c.detach().requires_grad_(true);
    let xg = g.detach().requires_grad_(true);
    for x in [&xc, &xg] {
        x.permute([1, 0, 2])?
            .softmax(-1)?
            .mul(&x.permute([1, 0, 2])?.tanh()?)?
            .sum_all()?
            .backward()?;
    }
    same(
        "softmax*tanh grad",
        &xc.grad().unwrap(),
        &xg.grad().unwrap(),
        1e-4,
    );
    Ok(())
}

#[test]
fn more_than_65535_workgroups_fold_into_2d() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    // 2^24 + 3 elements need 65,537 workgroups of 256.
    let n = (1usize << 24) + 3;
    let x = Tensor::ones([n], &gpu)?;
    let y = x.mul_scalar(2.0)?.sum_all()?;
    let want = 2.0 * n as f64;
    assert!(
        (y.item()? - want).abs() <= 1e-6 * want,
        "{} vs {want}",
        y.item()?
    );
    Ok(())
}

/// The vec4 matmul kernels of CPU adapters (matmul_vec4.wgsl): every layout pair, edge rows and
/// columns, K that is and is not a multiple of 4 (the latter must fall back), offset views and a
/// broadcast batch, against the CPU. (tests/tiled_matmul.rs runs the same on the tiled kernels.)
#[test]
fn vec4_matmul_layouts_match_cpu() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let _seed = common::seed_lock();
    common::check_matmul_layouts(&gpu)
}

/// `pow` at NaN, infinities, zeros and negative bases gives the CPU's (C's, PyTorch's) special
/// values on the GPU, through the strided and the vec4 kernels and `pow_scalar`: llvmpipe's
/// `pow` gave pow(NaN, 2) = 0, pow(0, -1) = 0 and pow(1, inf) = NaN. Finite non-zero results
/// may differ in the last bits (the GPU's `pow` is not correctly rounded).
#[test]
fn pow_of_special_values_matches_the_cpu() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let specials = [
        nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0,
    ];
    let n = specials.len();
    let base: Vec<f32> = (0..n * n).map(|i| specials[i / n]).collect();
    let expo: Vec<f32> = (0..n * n).map(|i| specials[i % n]).collect();
    // `label(i)` is element i's (base, exponent).
    let check = |what: &str, got: &Tensor, want: &Tensor, label: &dyn Fn(usize) -> (f32, f32)| {
        let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
        for (i, (g, w)) in g.iter().zip(&w).enumerate() {
            let ok = if w.is_nan() {
                g.is_nan()
            } else if w.is_finite() && *w != 0.0 {
                (g - w).abs() <= 1e-6 * w.abs()
            } else {
                g.to_bits() == w.to_bits()
            };
            let (x, e) = label(i);
            assert!(
                ok,
                "{what}: pow({x:?}, {e:?}) = {g:?} on the GPU, {w:?} on the CPU"
            );
        }
    };
    let pairs = |i: usize| (specials[i / n], specials[i % n]);
    let (b, e) = (
        Tensor::from_vec(base, [n * n], &Device::Cpu)?,
        Tensor::from_vec(expo, [n * n], &Device::Cpu)?,
    );
    let want = b.pow(&e)?;
    let (bg, eg) = (b.to(&gpu)?, e.to(&gpu)?);
    check("contiguous", &bg.pow(&eg)?, &want, &pairs);
    let strided = |t: &Tensor| t.reshape([n, n])?.t();
    let got = strided(&bg)?.pow(&strided(&eg)?)?.t()?.reshape([n * n])?;
    check("strided", &got, &want, &pairs);
    let bases = Tensor::from_vec(specials.to_vec(), [n], &Device::Cpu)?;
    for &x in &specials {
        let want = bases.pow_scalar(x as f64)?;
        let got = bases.to(&gpu)?.pow_scalar(x as f64)?;
        check("pow_scalar", &got, &want, &|i| (specials[i], x));
    }
    Ok(())
}

/// Integral exponents give the correctly rounded power on the GPU: exact where the power is
/// exact (3^13, 10^5, 2^-10; llvmpipe's `pow`, exp2(e·log2(x)), gave 1594323.8, 99999.984 and
/// 343.00003 for 7^3), within one ulp of the f64 power at large exponents (|e| up to 2^24 - 1,
/// where plain f32 squaring is off by 5e-4 at e = 10^4), through `pow` and `pow_scalar`.
#[test]
fn integral_powers_are_correctly_rounded() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let ulps = |g: f32, w: f64| (g.to_bits() as i64 - (w as f32).to_bits() as i64).abs();
    // Exact powers: every |x^e| below 2^24 with an integral x, or a power of two.
    let mut pairs = Vec::new();
    for x in [-3.0f32, -2.0, 2.0, 3.0, 5.0, 7.0, 10.0, 11.0, 0.5, 0.25] {
        for e in -12..=24 {
            let p = (x as f64).powi(e);
            let pow2 = x.abs().log2().fract() == 0.0;
            if (pow2 || (e >= 0 && p.abs() < 16_777_216.0)) && p.abs() > 1e-30 {
                pairs.push((x, e as f32));
            }
        }
    }
    // Large exponents on bases near 1 (never 1 itself, which returns early).
    for (i, e) in [1e4f32, 1e5, 1_048_577.0, -3e6, 16_777_215.0]
        .iter()
        .enumerate()
    {
        for k in 0..8 {
            pairs.push((1.0 + (k as f32 - 4.5 + i as f32 * 0.3) * 1e-7, *e));
        }
    }
    // Negative exponents of other bases, and powers at the ends of f32's range, where the
    // error terms' halves could overflow (pow(FLT_MAX, 1) was NaN, 65535.992^8 inf).
    pairs.extend([
        (3.0, -5.0),
        (7.0, -3.0),
        (10.0, -5.0),
        (1.7, -9.0),
        (-2.3, -7.0),
    ]);
    pairs.extend([
        (f32::MAX, 1.0),
        (f32::MAX, -2.0),
        (370.500_85, 15.0),
        (65_535.992, 8.0),
        (3.4025e38, -3.0),
        (1e-20, 2.0),
        (1e-38, -1.0),
        (2.5e-3, 14.0),
    ]);
    let (xs, es): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let n = xs.len();
    let x = Tensor::from_vec(xs.clone(), [n], &gpu)?;
    let got = x
        .pow(&Tensor::from_vec(es.clone(), [n], &gpu)?)?
        .to_vec::<f32>()?;
    for (i, (&x, &e)) in xs.iter().zip(&es).enumerate() {
        let want = (x as f64).powf(e as f64);
        let exact = want == want as f32 as f64;
        let tol = if exact { 0 } else { 1 };
        assert!(
            ulps(got[i], want) <= tol,
            "pow({x:?}, {e:?}) = {:?} on the GPU, want {want:?} ({} ulps)",
            got[i],
            ulps(got[i], want)
        );
    }
    for e in [4.0, 5.0, 7.0, 13.0] {
        let got = x.pow_scalar(e)?.to_vec::<f32>()?;
        for (i, &x) in xs.iter().enumerate() {
            let want = (x as f64).powf(e);
            if want.is_finite() && want as f32 as f64 == want {
                assert_eq!(got[i], want as f32, "pow_scalar({x:?}, {e:?}) on the GPU");
            }
        }
    }
    Ok(())
}

/// sin and cos on the GPU at arguments of every magnitude (random bits, all finite exponents, the
/// largest f32, and as many uniform in ±4000) within a few ulps of the CPU's: the argument is
/// reduced exactly (lavapipe's builtins gave sin(1e10) = -1 and sin(-3.4e38) = 1).
#[test]
fn sin_and_cos_reduce_any_argument() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut xs = vec![
        1e10f32,
        -1e10,
        f32::MAX,
        f32::MIN,
        std::f32::consts::PI,
        std::f32::consts::FRAC_PI_2,
        1e-30,
        -0.0,
    ];
    while xs.len() < 4096 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let x = f32::from_bits((seed >> 32) as u32);
        if x.is_finite() {
            xs.push(x);
            // And as many below 4000 in magnitude, where the reduction takes its fast path.
            xs.push((seed >> 40) as f32 / (1u64 << 24) as f32 * 8000.0 - 4000.0);
        }
    }
    let x = Tensor::from_vec(xs.clone(), [xs.len()], &Device::Cpu)?;
    let xg = x.to(&gpu)?;
    for (name, want, got) in [("sin", x.sin()?, xg.sin()?), ("cos", x.cos()?, xg.cos()?)] {
        let (want, got) = (want.to_vec::<f32>()?, got.to_vec::<f32>()?);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            let ulps = (w.to_bits() as i64 - g.to_bits() as i64).abs();
            assert!(
                ulps <= 4,
                "{name}({:e}) = {g:e} on the GPU, {w:e} on the CPU ({ulps} ulps)",
                xs[i]
            );
        }
    }
    Ok(())
}

/// Row reductions on subgroup operations (where the adapter has them: lavapipe does) and on
/// workgroup memory alone, each against the CPU: every op, rows of one workgroup and of several
/// chunks, ties (the first extreme's index wins) and NaN (it wins, the first one) for the arg
/// ops, in f32, f16, bf16 and int32.
#[test]
fn reductions_match_the_cpu_with_and_without_subgroups() -> Result<()> {
    use wgtorch::DType;
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let ctx = wgtorch::backend::gpu::context(0)?;
    let had = ctx.subgroups();
    if ctx.adapter_name().contains("llvmpipe") {
        assert!(
            had,
            "lavapipe offers subgroups: the subgroup kernels go untested"
        );
    }
    let reduce = |t: &Tensor| -> Result<Vec<(&str, Tensor)>> {
        let mut v = vec![
            ("sum", t.sum_dims([1], false)?),
            ("amax", t.amax([1], false)?),
            ("amin", t.amin([1], false)?),
            ("argmax", t.argmax(Some(1), false)?),
            ("argmin", t.argmin(Some(1), false)?),
        ];
        if t.dtype() != DType::I32 {
            // Near 1, so that no order of the products overflows.
            let near_one = t.mul_scalar(1e-3)?.add_scalar(1.0)?;
            v.push(("prod", near_one.prod_dim(1, false)?));
        }
        Ok(v)
    };
    let mut tried = Vec::new();
    for want in [true, false] {
        let on = ctx.set_subgroups(want);
        if on != want {
            continue;
        }
        tried.push(on);
        for (rows, n) in [(3, 1000), (2, 70_000), (5, 257)] {
            let mut v: Vec<f32> = (0..rows * n)
                .map(|i| ((i * 7919) % 23) as f32 - 11.0)
                .collect();
            for dt in [DType::F32, DType::F16, DType::BF16, DType::I32] {
                if dt != DType::I32 {
                    v[n + 5] = f32::NAN;
                    v[n + 9] = f32::NAN;
                }
                let c = Tensor::from_vec(v.clone(), [rows, n], &Device::Cpu)?.to_dtype(dt)?;
                let g = c.to(&gpu)?;
                for ((op, c), (_, g)) in reduce(&c)?.iter().zip(reduce(&g)?) {
                    let what = format!("subgroups {on}: {op} {dt} [{rows}, {n}]");
                    let tol = if dt == DType::F32 { 1e-4 } else { 2e-2 };
                    assert_eq!(c.dtype(), g.dtype(), "{what}");
                    if op.starts_with("arg") {
                        assert_eq!(vals(c), vals(&g), "{what}");
                    } else {
                        assert_close(&what, &vals(&g), &vals(c), tol, tol);
                    }
                }
            }
        }
    }
    ctx.set_subgroups(had);
    assert!(tried.contains(&false), "the portable kernels always run");
    Ok(())
}

/// Max pooling both ways, against the CPU: windows that tile the planes (one invocation per
/// window in the backward pass), windows that leave rows and columns over or overlap (one per
/// input element), with ties (the first maximum takes the gradient) and NaN, in each float
/// storage.
#[test]
fn max_pool2d_matches_the_cpu_with_and_without_tiling_windows() -> Result<()> {
    use wgtorch::DType;
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    // (input [N, C, H, W], kernel, stride): the first two tile their planes.
    let cases = [
        ([2, 3, 8, 6], [2, 2], [2, 2]),
        ([1, 2, 9, 8], [3, 2], [3, 2]),
        ([2, 2, 7, 5], [2, 2], [2, 2]),
        ([1, 3, 8, 8], [3, 3], [2, 2]),
    ];
    for (shape, kernel, stride) in cases {
        let n: usize = shape.iter().product();
        // Few distinct values: windows with ties.
        let mut v: Vec<f32> = (0..n).map(|i| ((i * 37) % 5) as f32).collect();
        v[3] = f32::NAN;
        // Non-zero: a gradient routed to the wrong element shows.
        let weights: Vec<f32> = (0..n).map(|i| (i % 7) as f32 + 1.0).collect();
        let tiles = stride == kernel && shape[2] % kernel[0] == 0 && shape[3] % kernel[1] == 0;
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let run = |dev: &Device| -> Result<(Vec<f64>, Vec<f64>)> {
                let x = Tensor::from_vec(v.clone(), shape, dev)?
                    .to_dtype(dt)?
                    .requires_grad_(true);
                let opts = F::MaxPool2dOptions {
                    stride: Some(stride.into()),
                    ..Default::default()
                };
                let y = F::max_pool2d_with(&x, kernel, opts)?;
                // A different weight per output, so that a misrouted gradient shows.
                let wy: Vec<f32> = weights[..y.numel()].to_vec();
                let w = Tensor::from_vec(wy, y.shape(), dev)?.to_dtype(dt)?;
                y.mul(&w)?.sum_all()?.backward()?;
                let g = x.grad().expect("x's gradient");
                Ok((
                    vals(&y.to_dtype(DType::F32)?),
                    vals(&g.to_dtype(DType::F32)?),
                ))
            };
            let c = run(&Device::Cpu)?;
            let mut g = None;
            let prof = profile(
                ProfileOptions {
                    activities: &[ProfilerActivity::Gpu],
                    ..Default::default()
                },
                |_| {
                    g = Some(run(&gpu)?);
                    Ok(())
                },
            )?;
            let g = g.expect("ran");
            let what = format!("max_pool2d {shape:?} kernel {kernel:?} stride {stride:?} {dt}");
            // The per-window kernel ran where the windows tile the planes (where the adapter
            // times kernels; the profiler also sees the other tests' kernels, so only this way).
            if tiles && prof.gpu_time_unavailable().is_empty() {
                let ran = prof
                    .gpu_kernels()
                    .iter()
                    .any(|k| k.name.contains("backward_tiles"));
                assert!(ran, "{what}: the per-window kernel did not run");
            }
            // Exact (assert_close counts NaN against NaN as equal).
            assert_close(&format!("{what}: output"), &g.0, &c.0, 0.0, 0.0);
            assert_close(&format!("{what}: input gradient"), &g.1, &c.1, 0.0, 0.0);
        }
    }
    Ok(())
}
