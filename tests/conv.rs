//! conv2d's primitive (per-sample GEMM on the CPU, implicit GEMM on the GPU) against the
//! differentiable im2col formulation, finite differences in f64, and the GPU against the CPU:
//! stride, padding, dilation, non-square kernels, 1×1 (the no-unfold path), strides and
//! dilations that split the CPU's input into phases, a padding wider than the image, a batch large enough
//! to split the GPU's weight gradient, bias and no bias, and the CPU's input gradient as a
//! convolution of its own (16 channels or more at stride 1).

mod common;

use common::{assert_close, vals};
use wgtorch::autograd::gradcheck;
use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Result, Tensor};

/// (N, C, H, W, O, kh, kw, stride, padding, dilation, bias)
type Geom = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    [usize; 2],
    [usize; 2],
    [usize; 2],
    bool,
);

const GEOMS: &[Geom] = &[
    (2, 3, 8, 8, 4, 3, 3, [1, 1], [1, 1], [1, 1], true),
    (3, 2, 9, 7, 5, 3, 2, [2, 1], [0, 1], [1, 1], false),
    (2, 4, 10, 10, 3, 3, 3, [1, 2], [2, 2], [2, 2], true),
    (2, 6, 5, 4, 7, 1, 1, [1, 1], [0, 0], [1, 1], true),
    (37, 3, 6, 6, 4, 3, 3, [1, 1], [1, 1], [1, 1], true),
    (1, 1, 3, 3, 2, 3, 3, [2, 2], [1, 1], [1, 1], false),
    // The CPU's strided layouts: a 7×7 stride-2 stem, stride and dilation mixing phases, and a
    // padding larger than the image (which takes the plain unfold instead).
    (1, 3, 16, 15, 4, 7, 7, [2, 2], [3, 3], [1, 1], true),
    (1, 2, 11, 10, 3, 3, 3, [2, 3], [1, 2], [3, 2], true),
    (2, 2, 1, 1, 3, 1, 1, [1, 1], [3, 3], [1, 1], true),
    // 16 channels or more at stride 1: the CPU's input gradient runs as a convolution of the
    // padded dY with the flipped weight (dilated, non-square, no padding on one side), and a
    // padding past the kernel's reach folds back instead.
    (2, 16, 6, 5, 3, 3, 3, [1, 1], [1, 1], [1, 1], false),
    (2, 17, 7, 6, 4, 3, 2, [1, 1], [2, 0], [2, 1], true),
    (1, 16, 4, 4, 2, 3, 3, [1, 1], [3, 3], [1, 1], false),
    // ... and one whose padded dY is too sparse for the phase layout (the plain unfold).
    (1, 16, 2, 2, 2, 2, 2, [1, 1], [2, 2], [5, 5], false),
];

/// Output, input grad, weight grad, bias grad of `sum(conv(x) * r)` for a fixed random `r`.
fn run(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    r: &Tensor,
    g: &Geom,
    create_graph: bool,
) -> Result<Vec<Tensor>> {
    let leaf = |t: &Tensor| t.detach().requires_grad_(true);
    let (x, w, b) = (leaf(x), leaf(w), b.map(leaf));
    let y = F::conv2d_with(
        &x,
        &w,
        b.as_ref(),
        F::Conv2dFuncOptions {
            stride: g.7.into(),
            padding: g.8.into(),
            dilation: g.9.into(),
            ..Default::default()
        },
    )?;
    y.mul(r)?
        .sum_all()?
        .backward_with(None, create_graph, create_graph)?;
    let mut out = vec![y.detach(), x.grad().unwrap(), w.grad().unwrap()];
    out.extend(b.map(|b| b.grad().unwrap()));
    Ok(out)
}

fn inputs(g: &Geom, dev: &Device, dtype: DType) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let &(n, c, h, w, o, kh, kw, ..) = g;
    let x = Tensor::randn([n, c, h, w], dev)?.to_dtype(dtype)?;
    let wt = Tensor::randn([o, c, kh, kw], dev)?.to_dtype(dtype)?;
    let b = if g.10 {
        Some(Tensor::randn([o], dev)?.to_dtype(dtype)?)
    } else {
        None
    };
    Ok((x, wt, b))
}

#[test]
fn primitive_matches_the_differentiable_formulation() -> Result<()> {
    let _seed = common::seed_lock();
    wgtorch::manual_seed(5);
    for g in GEOMS {
        let (x, w, b) = inputs(g, &Device::Cpu, DType::F64)?;
        let y = F::conv2d_with(
            &x,
            &w,
            b.as_ref(),
            F::Conv2dFuncOptions {
                stride: g.7.into(),
                padding: g.8.into(),
                dilation: g.9.into(),
                ..Default::default()
            },
        )?;
        let r = Tensor::randn(y.shape(), &Device::Cpu)?.to_dtype(DType::F64)?;
        // create_graph takes the composite (im2col + matmul) backward; plain backward the
        // primitive pair.
        let fast = run(&x, &w, b.as_ref(), &r, g, false)?;
        let slow = run(&x, &w, b.as_ref(), &r, g, true)?;
        for (i, (f, s)) in fast.iter().zip(&slow).enumerate() {
            assert_eq!(f.shape(), s.shape());
            assert_close(&format!("{g:?} #{i}"), &vals(f), &vals(s), 1e-10, 1e-10);
        }
    }
    Ok(())
}

#[test]
fn gradients_match_finite_differences() -> Result<()> {
    let _seed = common::seed_lock();
    wgtorch::manual_seed(6);
    for g in GEOMS.iter().filter(|g| g.0 < 10) {
        let (x, w, b) = inputs(g, &Device::Cpu, DType::F64)?;
        let mut ins = vec![x, w];
        ins.extend(b);
        let geom = *g;
        gradcheck(
            move |v: &[Tensor]| {
                F::conv2d_with(
                    &v[0],
                    &v[1],
                    v.get(2),
                    F::Conv2dFuncOptions {
                        stride: geom.7.into(),
                        padding: geom.8.into(),
                        dilation: geom.9.into(),
                        ..Default::default()
                    },
                )
            },
            &ins,
            1e-6,
            1e-5,
            1e-4,
        )?;
    }
    Ok(())
}

#[test]
fn gpu_matches_cpu() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let _seed = common::seed_lock();
    wgtorch::manual_seed(7);
    for g in GEOMS {
        let (x, w, b) = inputs(g, &Device::Cpu, DType::F32)?;
        let y = F::conv2d_with(
            &x,
            &w,
            b.as_ref(),
            F::Conv2dFuncOptions {
                stride: g.7.into(),
                padding: g.8.into(),
                dilation: g.9.into(),
                ..Default::default()
            },
        )?;
        let r = Tensor::randn(y.shape(), &Device::Cpu)?;
        let cpu = run(&x, &w, b.as_ref(), &r, g, false)?;
        let on = |t: &Tensor| t.to(&gpu);
        let dev = run(
            &on(&x)?,
            &on(&w)?,
            b.as_ref().map(on).transpose()?.as_ref(),
            &on(&r)?,
            g,
            false,
        )?;
        for (i, (c, d)) in cpu.iter().zip(&dev).enumerate() {
            assert_eq!(d.device(), gpu);
            assert_close(&format!("{g:?} #{i}"), &vals(d), &vals(c), 1e-4, 1e-4);
        }
    }
    Ok(())
}

#[test]
fn half_precision_on_both_backends() -> Result<()> {
    let _seed = common::seed_lock();
    wgtorch::manual_seed(8);
    let g = &GEOMS[0];
    for dev in common::devices() {
        for dt in [DType::F16, DType::BF16] {
            let (x, w, b) = inputs(g, &Device::Cpu, DType::F32)?;
            let want = F::conv2d_with(
                &x,
                &w,
                b.as_ref(),
                F::Conv2dFuncOptions {
                    stride: g.7.into(),
                    padding: g.8.into(),
                    dilation: g.9.into(),
                    ..Default::default()
                },
            )?;
            let h = |t: &Tensor| t.to_dtype(dt)?.to(&dev);
            let got = F::conv2d_with(
                &h(&x)?,
                &h(&w)?,
                b.as_ref().map(h).transpose()?.as_ref(),
                F::Conv2dFuncOptions {
                    stride: g.7.into(),
                    padding: g.8.into(),
                    dilation: g.9.into(),
                    ..Default::default()
                },
            )?;
            assert_eq!(got.dtype(), dt);
            assert_close(
                &format!("{dev:?} {dt:?}"),
                &vals(&got),
                &vals(&want),
                0.05,
                0.1,
            );
        }
    }
    Ok(())
}

#[test]
fn mismatched_dtypes_are_an_error() {
    let x = Tensor::zeros([1, 2, 4, 4], &Device::Cpu).unwrap();
    let w = Tensor::zeros([3, 2, 3, 3], &Device::Cpu)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap();
    let e = F::conv2d(&x, &w, None).unwrap_err();
    assert!(
        e.to_string().contains("conv2d") && e.to_string().contains("float64"),
        "{e}"
    );
    let b = Tensor::zeros([4], &Device::Cpu).unwrap();
    let w = Tensor::zeros([3, 2, 3, 3], &Device::Cpu).unwrap();
    let e = F::conv2d(&x, &w, Some(&b)).unwrap_err();
    assert!(e.to_string().contains("bias"), "{e}");
}

#[test]
fn max_pool_picks_the_first_maximum_and_propagates_nan() -> Result<()> {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    // 2x2 windows over one 2x8 plane: ties, NaN after a larger value, NaN first, only -inf.
    #[rustfmt::skip]
    let v = vec![
        1.0, 3.0, 5.0, 9.0, nan, 1.0, -inf, -inf,
        3.0, 2.0, nan, 1.0, 7.0, nan, -inf, -inf,
    ];
    for dev in common::devices() {
        let x = Tensor::from_vec(v.clone(), [1, 1, 2, 8], &dev)?.requires_grad_(true);
        let y = F::max_pool2d(&x, [2, 2])?;
        let got = y.to_vec::<f32>()?;
        assert_eq!(got[0], 3.0, "{dev:?}");
        assert!(got[1].is_nan() && got[2].is_nan(), "{dev:?}: {got:?}");
        assert_eq!(got[3], -inf, "{dev:?}");
        y.backward_with(Some(&Tensor::ones([1, 1, 1, 4], &dev)?), false, false)?;
        // The gradient lands on the first maximum of each window (row-major order).
        let g = x.grad().unwrap().to_vec::<f32>()?;
        let hit: Vec<usize> = (0..16).filter(|&i| g[i] != 0.0).collect();
        assert_eq!(hit, vec![1, 4, 6, 10], "{dev:?}");
    }
    Ok(())
}

#[test]
fn max_pool_matches_a_reference_with_ties_nan_and_padding() -> Result<()> {
    use wgtorch::nn::functional::MaxPool2dOptions;
    // Values from a small set (ties), with -inf among them and NaN in one of the two inputs,
    // over odd sizes; 2×2 and 3×3 windows, strides 1-3, padding 0-1 and dilation 1-2 (windows
    // inside the row and windows over the padding): every device against a
    // plain reference (first maximum in row-major order, the first NaN winning), values and the
    // positions the gradient reaches.
    let (h, w) = (7usize, 9usize);
    let mut g = wgtorch::Generator::new(11);
    for with_nan in [true, false] {
        let v: Vec<f32> = (0..2 * h * w)
            .map(|_| match g.below(12) {
                0 => f32::NEG_INFINITY,
                1 if with_nan => f32::NAN,
                k => (k % 4) as f32,
            })
            .collect();
        // (kernel, stride, padding, dilation)
        let cases = [
            (2, 2, 0, 1),
            (2, 1, 0, 1),
            (2, 3, 1, 1),
            (2, 2, 1, 1),
            (3, 2, 1, 1),
            (3, 1, 1, 1),
            (3, 2, 0, 1),
            (2, 1, 1, 2),
            (3, 2, 1, 2),
        ];
        for (dev, (k, stride, pad, dil)) in common::devices()
            .into_iter()
            .flat_map(|d| cases.map(|c| (d, c)))
        {
            let x = Tensor::from_vec(v.clone(), [1, 2, h, w], &dev)?.requires_grad_(true);
            let opts = MaxPool2dOptions {
                stride: Some(stride.into()),
                padding: pad.into(),
                dilation: dil.into(),
            };
            let y = F::max_pool2d_with(&x, k, opts)?;
            let span = dil * (k - 1) + 1;
            let (ho, wo) = (
                (h + 2 * pad - span) / stride + 1,
                (w + 2 * pad - span) / stride + 1,
            );
            let case =
                format!("nan {with_nan} k {k} stride {stride} pad {pad} dil {dil} on {dev:?}");
            assert_eq!(y.shape(), &[1, 2, ho, wo], "{case}");
            let got = y.to_vec::<f32>()?;
            // Without a backward pass the CPU computes the maxima alone: the same values.
            let plain = wgtorch::autograd::no_grad_scope(|| F::max_pool2d_with(&x, k, opts))?;
            assert!(
                plain
                    .to_vec::<f32>()?
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
                "{case}: maxima without indices differ"
            );
            let mut hits = vec![0f32; v.len()];
            for c in 0..2 {
                for oh in 0..ho {
                    for ow in 0..wo {
                        let (mut best, mut at) = (f32::NEG_INFINITY, usize::MAX);
                        for (ki, kj) in (0..k).flat_map(|ki| (0..k).map(move |kj| (ki, kj))) {
                            let (r, q) = (
                                (oh * stride + ki * dil) as isize - pad as isize,
                                (ow * stride + kj * dil) as isize - pad as isize,
                            );
                            if r < 0 || q < 0 || r >= h as isize || q >= w as isize {
                                continue;
                            }
                            let i = c * h * w + r as usize * w + q as usize;
                            if at == usize::MAX
                                || (v[i] > best && !best.is_nan())
                                || (v[i].is_nan() && !best.is_nan())
                            {
                                (best, at) = (v[i], i);
                            }
                        }
                        let o = got[(c * ho + oh) * wo + ow];
                        assert!(
                            o == best || (o.is_nan() && best.is_nan()),
                            "{case} at {c},{oh},{ow}: {o} vs {best}"
                        );
                        hits[at] += 1.0;
                    }
                }
            }
            y.backward_with(Some(&Tensor::ones([1, 2, ho, wo], &dev)?), false, false)?;
            assert_eq!(x.grad().unwrap().to_vec::<f32>()?, hits, "{case}");
        }
    }
    Ok(())
}

#[test]
fn max_and_min_propagate_nan_on_every_device() -> Result<()> {
    for dev in common::devices() {
        let a = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0, -1.0], [4], &dev)?;
        let b = Tensor::from_vec(vec![f32::NAN, 2.0, 1.0, 5.0], [4], &dev)?;
        for t in [a.maximum(&b)?, a.minimum(&b)?] {
            let v = t.to_vec::<f32>()?;
            assert!(v[0].is_nan() && v[1].is_nan(), "{dev:?}: {v:?}");
        }
        assert_eq!(a.maximum(&b)?.to_vec::<f32>()?[2..], [3.0, 5.0]);
        let m = a.reshape([2, 2])?;
        for r in [m.amax([1], false)?, m.amin([1], false)?] {
            let v = r.to_vec::<f32>()?;
            assert!(v[0].is_nan() && !v[1].is_nan(), "{dev:?}: {v:?}");
        }
    }
    Ok(())
}

#[test]
fn inputs_no_window_reads_do_not_reach_the_result() -> Result<()> {
    // Stride 2 over 8 columns and 10 rows with a 3×3 kernel reads columns 0-6 and rows 0-8: an
    // infinity in column 7 (and a NaN in row 9) must not reach the output or either gradient,
    // though the CPU's phase layout holds both next to values it does read.
    let _seed = common::seed_lock();
    wgtorch::manual_seed(9);
    for dev in common::devices() {
        let mut v = Tensor::randn([2, 3, 10, 8], &Device::Cpu)?.to_vec::<f32>()?;
        for plane in 0..6 {
            for r in 0..10 {
                v[plane * 80 + r * 8 + 7] = f32::INFINITY;
            }
            v[plane * 80 + 9 * 8 + 2] = f32::NAN;
        }
        let x = Tensor::from_vec(v, [2, 3, 10, 8], &dev)?.requires_grad_(true);
        let w = Tensor::randn([4, 3, 3, 3], &dev)?.requires_grad_(true);
        let opts = F::Conv2dFuncOptions {
            stride: 2.into(),
            ..Default::default()
        };
        let y = F::conv2d_with(&x, &w, None, opts)?;
        assert_eq!(y.shape(), &[2, 4, 4, 3]);
        y.sum_all()?.backward()?;
        let finite =
            |t: &Tensor| -> Result<bool> { Ok(t.to_vec::<f32>()?.iter().all(|v| v.is_finite())) };
        assert!(finite(&y)?, "output on {dev:?}");
        assert!(finite(&w.grad().unwrap())?, "weight gradient on {dev:?}");
        let gx = x.grad().unwrap().to_vec::<f32>()?;
        assert!(
            gx.iter().all(|v| v.is_finite()),
            "input gradient on {dev:?}"
        );
    }
    Ok(())
}

#[test]
fn an_infinite_weight_reaches_only_the_input_gradients_it_multiplies() -> Result<()> {
    // With padding 1, weight tap (0, 0) multiplies dY[h + 1, w + 1] into input (h, w), so never
    // into the input's last row or column: an infinite weight there leaves them finite on the
    // CPU, as in PyTorch (f32 and f64), though a convolution of the zero-padded dY, the CPU's
    // faster path, would multiply it by a padding zero into NaN. (The GPU's implicit GEMM reads
    // such a position as a zero and gives NaN there, as its forward pass and PyTorch's f64
    // forward do at the border.)
    let _seed = common::seed_lock();
    wgtorch::manual_seed(10);
    let mut wv = Tensor::randn([4, 16, 3, 3], &Device::Cpu)?.to_vec::<f32>()?;
    wv[0] = f32::INFINITY;
    let w = Tensor::from_vec(wv, [4, 16, 3, 3], &Device::Cpu)?;
    let x = Tensor::randn([2, 16, 5, 6], &Device::Cpu)?.requires_grad_(true);
    let opts = F::Conv2dFuncOptions {
        padding: 1.into(),
        ..Default::default()
    };
    F::conv2d_with(&x, &w, None, opts)?.sum_all()?.backward()?;
    let gx = x.grad().unwrap().to_vec::<f32>()?;
    for (i, v) in gx.iter().enumerate() {
        let (plane, h, col) = (i / 30, i % 30 / 6, i % 6);
        if plane % 16 == 0 && h < 4 && col < 5 {
            assert_eq!(*v, f32::INFINITY, "gx[{i}]");
        } else {
            assert!(v.is_finite(), "gx[{i}] = {v}");
        }
    }
    Ok(())
}
