//! Network operators: `MatMul`, `Gemm`, `Conv` (1-D and 2-D, groups, dilations, any pads,
//! `auto_pad`), `MaxPool`/`AveragePool` (with `ceil_mode`), the global pools,
//! `BatchNormalization` (inference), `LayerNormalization`, `Softmax`, `LogSoftmax`.

use super::{broadcast, float_input, need, rank_in, same_dtype, show, Ctx, Dim, Info, OpDef};
use crate::nn::functional as F;
use crate::{DType, Result, Tensor};

/// `MatMul`: numpy's matmul (1-D operands promoted and their dim removed, batch dims broadcast).
pub(super) const MATMUL: OpDef = OpDef {
    name: "MatMul",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let dtype = same_dtype(ctx, &[Some(a), Some(b)])?;
        let (Some(sa), Some(sb)) = (&a.shape, &b.shape) else {
            return Ok(vec![Info::new(dtype, None)]);
        };
        if sa.is_empty() || sb.is_empty() {
            return Err(ctx.err("operands must have at least one dimension"));
        }
        let (ka, kb) = (
            sa[sa.len() - 1],
            if sb.len() == 1 {
                sb[0]
            } else {
                sb[sb.len() - 2]
            },
        );
        if let (Some(x), Some(y)) = (ka, kb) {
            if x != y {
                return Err(ctx.err(format!(
                    "shapes {} and {} cannot be multiplied ({x} vs {y})",
                    show(&a.shape),
                    show(&b.shape)
                )));
            }
        }
        let batch_a: Option<Vec<Dim>> = Some(sa[..sa.len().saturating_sub(2)].to_vec());
        let batch_b: Option<Vec<Dim>> = Some(sb[..sb.len().saturating_sub(2)].to_vec());
        let mut out = broadcast(ctx, &[&batch_a, &batch_b])?.expect("known ranks");
        if sa.len() >= 2 {
            out.push(sa[sa.len() - 2]);
        }
        if sb.len() >= 2 {
            out.push(sb[sb.len() - 1]);
        }
        Ok(vec![Info::new(dtype, Some(out))])
    },
    run: |ctx, xs| Ok(vec![need(ctx, xs, 0)?.matmul(need(ctx, xs, 1)?)?]),
};

/// `Gemm`: `alpha · A' B' + beta · C` for 2-D `A` and `B` (transposed by `transA`/`transB`);
/// `C` is optional and broadcasts to the result.
pub(super) const GEMM: OpDef = OpDef {
    name: "Gemm",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let dtype = same_dtype(ctx, xs)?;
        rank_in(ctx, a, "A", &[2])?;
        rank_in(ctx, b, "B", &[2])?;
        let pick =
            |x: &Info, t: bool, i: usize| x.shape.as_ref().map(|s| s[if t { 1 - i } else { i }]);
        let (ta, tb) = (ctx.i("transA", 0)? != 0, ctx.i("transB", 0)? != 0);
        let (m, k1) = (pick(a, ta, 0).flatten(), pick(a, ta, 1).flatten());
        let (k2, n) = (pick(b, tb, 0).flatten(), pick(b, tb, 1).flatten());
        if let (Some(x), Some(y)) = (k1, k2) {
            if x != y {
                return Err(ctx.err(format!(
                    "A {} and B {} (transA {}, transB {}) do not multiply: {x} vs {y}",
                    show(&a.shape),
                    show(&b.shape),
                    ta as u8,
                    tb as u8
                )));
            }
        }
        let out = Some(vec![m, n]);
        if let Some(c) = xs.get(2).copied().flatten() {
            let joined = broadcast(ctx, &[&out, &c.shape])?;
            if joined.as_ref().map(Vec::len) != Some(2) && c.shape.is_some() {
                return Err(ctx.err(format!("C {} does not broadcast to [M, N]", show(&c.shape))));
            }
        }
        Ok(vec![Info::new(dtype, out)])
    },
    run: |ctx, xs| {
        let (a, b) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let c = xs.get(2).and_then(Option::as_ref);
        let (alpha, beta) = (ctx.f("alpha", 1.0)? as f64, ctx.f("beta", 1.0)? as f64);
        let a = if ctx.i("transA", 0)? != 0 {
            a.t()?
        } else {
            a.clone()
        };
        if ctx.i("transB", 0)? != 0
            && alpha == 1.0
            && beta == 1.0
            && c.is_none_or(|c| c.ndim() == 1)
        {
            // PyTorch's nn.Linear as exported: one fused product with the bias.
            return Ok(vec![F::linear(&a, b, c)?]);
        }
        let b = if ctx.i("transB", 0)? != 0 {
            b.t()?
        } else {
            b.clone()
        };
        let mut y = a.matmul(&b)?;
        if alpha != 1.0 {
            y = y.mul_scalar(alpha)?;
        }
        if let Some(c) = c {
            y = y.add(&if beta != 1.0 {
                c.mul_scalar(beta)?
            } else {
                c.clone()
            })?;
        }
        Ok(vec![y])
    },
};

/// A pooling or convolution window: kernel, strides, dilations, pads (begin and end per
/// spatial dim), resolved from the attributes (and `auto_pad`) for known input sizes.
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    begin: Vec<usize>,
    end: Vec<usize>,
    ceil: bool,
}

impl Window {
    /// `spatial` holds the input's spatial sizes (unknown ones only allowed without `auto_pad`
    /// SAME_*); `kernel` comes from the weight for `Conv`.
    fn new(ctx: &Ctx, spatial: &[Dim], kernel: Option<Vec<usize>>) -> Result<Window> {
        let n = spatial.len();
        let pos = |name: &str, v: Option<Vec<i64>>, default: usize| -> Result<Vec<usize>> {
            let v = v.unwrap_or_else(|| vec![default as i64; n]);
            if v.len() != n || v.iter().any(|&x| x < 1) {
                return Err(ctx.err(format!("{name} {v:?} must hold {n} positive values")));
            }
            Ok(v.into_iter().map(|x| x as usize).collect())
        };
        let kernel = match (kernel, ctx.ints("kernel_shape")?) {
            (Some(k), Some(a)) if a.iter().map(|&x| x as usize).ne(k.iter().copied()) => {
                return Err(ctx.err(format!(
                    "kernel_shape {a:?} does not match the weight's {k:?}"
                )))
            }
            (Some(k), _) => k,
            (None, a) => pos(
                "kernel_shape",
                Some(a.ok_or_else(|| ctx.err("kernel_shape is required"))?),
                1,
            )?,
        };
        let strides = pos("strides", ctx.ints("strides")?, 1)?;
        let dilations = pos("dilations", ctx.ints("dilations")?, 1)?;
        let ceil = ctx.i("ceil_mode", 0)? != 0;
        let auto = ctx.s("auto_pad", "NOTSET")?;
        let (mut begin, mut end) = (vec![0; n], vec![0; n]);
        match auto.as_str() {
            "NOTSET" => {
                if let Some(p) = ctx.ints("pads")? {
                    if p.len() != 2 * n || p.iter().any(|&x| x < 0) {
                        return Err(ctx.err(format!(
                            "pads {p:?} must hold {} non-negative values",
                            2 * n
                        )));
                    }
                    begin = p[..n].iter().map(|&x| x as usize).collect();
                    end = p[n..].iter().map(|&x| x as usize).collect();
                }
            }
            "VALID" => {}
            "SAME_UPPER" | "SAME_LOWER" => {
                for i in 0..n {
                    let size = spatial[i].ok_or_else(|| {
                        ctx.err("auto_pad SAME_* needs the spatial sizes at load (they are dynamic here)")
                    })?;
                    let out = size.div_ceil(strides[i]);
                    let span = (kernel[i] - 1) * dilations[i] + 1;
                    let total = ((out - 1) * strides[i] + span).saturating_sub(size);
                    let small = total / 2;
                    (begin[i], end[i]) = if auto == "SAME_UPPER" {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                }
            }
            other => {
                return Err(ctx.err(format!(
                    "auto_pad '{other}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"
                )))
            }
        }
        if kernel.len() != n {
            return Err(ctx.err(format!("kernel {kernel:?} does not match {n} spatial dims")));
        }
        Ok(Window {
            kernel,
            strides,
            dilations,
            begin,
            end,
            ceil,
        })
    }

    /// The output size along spatial dim `i` (ONNX's formula; with `ceil_mode` the last window
    /// must start inside the input or its begin padding, as PyTorch and onnxruntime require).
    fn out(&self, ctx: &Ctx, i: usize, size: usize) -> Result<usize> {
        let span = (self.kernel[i] - 1) * self.dilations[i] + 1;
        let padded = size + self.begin[i] + self.end[i];
        if padded < span {
            return Err(ctx.err(format!(
                "the window ({span} with dilation) is larger than the padded input ({padded})"
            )));
        }
        let s = self.strides[i];
        let mut out = (padded - span) / s + 1;
        if self.ceil && !(padded - span).is_multiple_of(s) {
            out += 1;
            if (out - 1) * s >= size + self.begin[i] {
                out -= 1;
            }
        }
        Ok(out)
    }

    fn out_shape(&self, ctx: &Ctx, x: &[Dim], channels: Dim) -> Result<Vec<Dim>> {
        let mut out = vec![x[0], channels];
        for (i, d) in x[2..].iter().enumerate() {
            out.push(d.map(|d| self.out(ctx, i, d)).transpose()?);
        }
        Ok(out)
    }

    /// The end padding that makes floor mode produce `ceil_mode`'s size (0 without ceil_mode).
    fn ceil_extra(&self, ctx: &Ctx, i: usize, size: usize) -> Result<usize> {
        let out = self.out(ctx, i, size)?;
        let span = (self.kernel[i] - 1) * self.dilations[i] + 1;
        Ok(((out - 1) * self.strides[i] + span).saturating_sub(size + self.begin[i] + self.end[i]))
    }

    fn symmetric(&self) -> bool {
        self.begin == self.end
    }
}

/// Pads the trailing two dims with `value`: `pads` = [top, left, bottom, right].
fn pad2d(x: &Tensor, pads: [usize; 4], value: f64) -> Result<Tensor> {
    let [t, l, b, r] = pads;
    if pads == [0; 4] {
        return Ok(x.clone());
    }
    let mut shape = x.shape().to_vec();
    let rank = shape.len();
    let mut y = x.clone();
    for (dim, before, after) in [(rank - 2, t, b), (rank - 1, l, r)] {
        let mut parts = Vec::with_capacity(3);
        shape = y.shape().to_vec();
        if before > 0 {
            shape[dim] = before;
            parts.push(Tensor::full_dtype(&shape, value, y.dtype(), &y.device())?);
        }
        parts.push(y.clone());
        if after > 0 {
            shape[dim] = after;
            parts.push(Tensor::full_dtype(&shape, value, y.dtype(), &y.device())?);
        }
        if parts.len() > 1 {
            y = Tensor::cat(&parts, dim as isize)?;
        }
    }
    Ok(y)
}

/// Spatial rank 1 runs as 2-D with a unit height; 2 as is; others are refused.
fn as_2d(ctx: &Ctx, x: &Tensor) -> Result<(Tensor, bool)> {
    match x.ndim() {
        3 => Ok((x.unsqueeze(2)?, true)),
        4 => Ok((x.clone(), false)),
        r => Err(ctx.err(format!(
            "{}-D inputs are not supported (1-D and 2-D spatial only), got rank {r}",
            r.saturating_sub(2)
        ))),
    }
}

fn window_2d(ctx: &Ctx, x: &Tensor, one_d: bool, kernel: Option<Vec<usize>>) -> Result<Window> {
    let spatial: Vec<Dim> = x.shape()[if one_d { 3 } else { 2 }..]
        .iter()
        .map(|&d| Some(d))
        .collect();
    let w = Window::new(ctx, &spatial, kernel)?;
    if !one_d {
        return Ok(w);
    }
    let lift = |v: &Vec<usize>, unit: usize| vec![unit, v[0]];
    Ok(Window {
        kernel: lift(&w.kernel, 1),
        strides: lift(&w.strides, 1),
        dilations: lift(&w.dilations, 1),
        begin: lift(&w.begin, 0),
        end: lift(&w.end, 0),
        ceil: w.ceil,
    })
}

fn restore(y: Tensor, one_d: bool) -> Result<Tensor> {
    if one_d {
        y.squeeze_dim(2)
    } else {
        Ok(y)
    }
}

fn infer_window(
    ctx: &Ctx,
    x: &Info,
    kernel: Option<Vec<usize>>,
    channels: Option<Dim>,
) -> Result<Info> {
    float_input(ctx, x)?;
    let Some(shape) = &x.shape else {
        return Ok(Info::new(x.dtype, None));
    };
    if !(3..=4).contains(&shape.len()) {
        return Err(ctx.err(format!(
            "expects [N, C, W] or [N, C, H, W], got {}",
            show(&x.shape)
        )));
    }
    let w = Window::new(ctx, &shape[2..], kernel)?;
    Ok(Info::new(
        x.dtype,
        Some(w.out_shape(ctx, shape, channels.unwrap_or(shape[1]))?),
    ))
}

/// `Conv` with any pads (asymmetric ones pad explicitly), groups, dilations and `auto_pad`.
pub(super) const CONV: OpDef = OpDef {
    name: "Conv",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (x, w) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        same_dtype(ctx, xs)?;
        let groups = ctx.i("group", 1)?;
        if groups < 1 {
            return Err(ctx.err(format!("group must be positive, got {groups}")));
        }
        let (kernel, m) = match &w.shape {
            Some(ws) => {
                if ws.len() < 3 {
                    return Err(ctx.err(format!(
                        "weight {} must be [M, C/group, k...]",
                        show(&w.shape)
                    )));
                }
                (
                    ws[2..].iter().copied().collect::<Option<Vec<usize>>>(),
                    ws[0],
                )
            }
            None => (None, None),
        };
        if let (Some(xs_), Some(ws)) = (&x.shape, &w.shape) {
            if xs_.len() != ws.len() {
                return Err(ctx.err(format!(
                    "input {} and weight {} differ in rank",
                    show(&x.shape),
                    show(&w.shape)
                )));
            }
            if let (Some(c), Some(cg)) = (xs_[1], ws[1]) {
                if c != cg * groups as usize {
                    return Err(ctx.err(format!(
                        "input has {c} channels, weight {} expects {} ({} per group × {groups} groups)",
                        show(&w.shape),
                        cg * groups as usize,
                        cg
                    )));
                }
            }
        }
        Ok(vec![infer_window(ctx, x, kernel, Some(m))?])
    },
    run: |ctx, xs| conv(ctx, xs, None, false),
};

/// A `Conv` with the `Add` of a residual (input 3, optional) and the `Relu` that followed it in
/// the file, fused at load (`Graph::fuse_conv_epilogues`); not an ONNX operator of its own.
pub(crate) const CONV_RELU: OpDef = OpDef {
    name: "Conv",
    host_inputs: &[],
    infer: CONV.infer,
    run: |ctx, xs| conv(ctx, xs, xs.get(3).and_then(Option::as_ref), true),
};

/// `Conv`'s output, then `+ residual` and `relu` when asked ([`crate::ops::conv2d_fused`]).
fn conv(
    ctx: &Ctx,
    xs: &[Option<Tensor>],
    residual: Option<&Tensor>,
    relu: bool,
) -> Result<Vec<Tensor>> {
    {
        let (x, w) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let bias = xs.get(2).and_then(Option::as_ref);
        let (x, one_d) = as_2d(ctx, x)?;
        let w = if one_d { w.unsqueeze(2)? } else { w.clone() };
        let win = window_2d(
            ctx,
            &x,
            one_d,
            Some(w.shape()[if one_d { 3 } else { 2 }..].to_vec()),
        )?;
        let (x, padding) = if win.symmetric() {
            (x, [win.begin[0], win.begin[1]])
        } else {
            (
                pad2d(
                    &x,
                    [win.begin[0], win.begin[1], win.end[0], win.end[1]],
                    0.0,
                )?,
                [0, 0],
            )
        };
        let opts = F::Conv2dFuncOptions {
            stride: [win.strides[0], win.strides[1]].into(),
            padding: padding.into(),
            dilation: [win.dilations[0], win.dilations[1]].into(),
            groups: ctx.i("group", 1)? as usize,
        };
        let y = match (residual, relu) {
            (None, false) => F::conv2d_with(&x, &w, bias, opts)?,
            _ if one_d => {
                return Err(ctx.err("internal: a 1-D convolution is never fused"));
            }
            _ => crate::ops::conv2d_fused(&x, &w, bias, opts, residual, relu)?,
        };
        Ok(vec![restore(y, one_d)?])
    }
}

/// `MaxPool` (the `Indices` output is not supported; `ceil_mode` pads the end with -inf).
pub(super) const MAX_POOL: OpDef = OpDef {
    name: "MaxPool",
    host_inputs: &[],
    infer: |ctx, xs| {
        if ctx.node.outputs.get(1).is_some_and(Option::is_some) {
            return Err(ctx.err("the Indices output is not supported"));
        }
        if ctx.i("storage_order", 0)? != 0 {
            return Err(ctx.err("storage_order = 1 is not supported"));
        }
        Ok(vec![infer_window(ctx, need(ctx, xs, 0)?, None, None)?])
    },
    run: |ctx, xs| {
        let (x, one_d) = as_2d(ctx, need(ctx, xs, 0)?)?;
        let win = window_2d(ctx, &x, one_d, None)?;
        let (h, w) = (x.shape()[2], x.shape()[3]);
        let extra = [win.ceil_extra(ctx, 0, h)?, win.ceil_extra(ctx, 1, w)?];
        let fits =
            win.symmetric() && extra == [0, 0] && (0..2).all(|i| win.begin[i] * 2 <= win.kernel[i]);
        let (x, padding) = if fits {
            (x, [win.begin[0], win.begin[1]])
        } else {
            let pads = [
                win.begin[0],
                win.begin[1],
                win.end[0] + extra[0],
                win.end[1] + extra[1],
            ];
            (pad2d(&x, pads, f64::NEG_INFINITY)?, [0, 0])
        };
        let opts = F::MaxPool2dOptions {
            stride: Some([win.strides[0], win.strides[1]].into()),
            padding: padding.into(),
            dilation: [win.dilations[0], win.dilations[1]].into(),
        };
        Ok(vec![restore(
            F::max_pool2d_with(&x, [win.kernel[0], win.kernel[1]], opts)?,
            one_d,
        )?])
    },
};

/// `AveragePool`: `count_include_pad` either way, any pads, `ceil_mode` (whose extra end
/// windows divide by the elements inside the padded input, as PyTorch and onnxruntime do).
pub(super) const AVERAGE_POOL: OpDef = OpDef {
    name: "AveragePool",
    host_inputs: &[],
    infer: |ctx, xs| {
        if ctx
            .ints("dilations")?
            .is_some_and(|d| d.iter().any(|&x| x != 1))
        {
            return Err(ctx.err("dilations other than 1 are not supported"));
        }
        Ok(vec![infer_window(ctx, need(ctx, xs, 0)?, None, None)?])
    },
    run: |ctx, xs| {
        let (x, one_d) = as_2d(ctx, need(ctx, xs, 0)?)?;
        let win = window_2d(ctx, &x, one_d, None)?;
        let (h, w) = (x.shape()[2], x.shape()[3]);
        let extra = [win.ceil_extra(ctx, 0, h)?, win.ceil_extra(ctx, 1, w)?];
        let include = ctx.i("count_include_pad", 0)? != 0;
        let kernel = [win.kernel[0], win.kernel[1]];
        let stride = Some([win.strides[0], win.strides[1]].into());
        let fits =
            win.symmetric() && extra == [0, 0] && (0..2).all(|i| win.begin[i] * 2 <= win.kernel[i]);
        let y = if fits {
            let opts = F::AvgPool2dOptions {
                stride,
                padding: [win.begin[0], win.begin[1]].into(),
                count_include_pad: include,
                divisor_override: None,
            };
            F::avg_pool2d_with(&x, kernel, opts)?
        } else {
            // Sum over count, both as means over the same zero-padded windows. The count covers
            // the padded input with count_include_pad, the real input without; never the end
            // padding that only ceil_mode adds (PyTorch's and onnxruntime's divisor).
            let (b, e) = (&win.begin, &win.end);
            let all = [b[0], b[1], e[0] + extra[0], e[1] + extra[1]];
            let opts = F::AvgPool2dOptions {
                stride,
                ..Default::default()
            };
            let sum = F::avg_pool2d_with(&pad2d(&x, all, 0.0)?, kernel, opts)?;
            let mask = if include {
                let ones = Tensor::full_dtype(
                    [1, 1, h + b[0] + e[0], w + b[1] + e[1]],
                    1.0,
                    x.dtype(),
                    &x.device(),
                )?;
                pad2d(&ones, [0, 0, extra[0], extra[1]], 0.0)?
            } else {
                let ones = Tensor::full_dtype([1, 1, h, w], 1.0, x.dtype(), &x.device())?;
                pad2d(&ones, all, 0.0)?
            };
            sum.div(&F::avg_pool2d_with(&mask, kernel, opts)?)?
        };
        Ok(vec![restore(y, one_d)?])
    },
};

fn infer_global(ctx: &Ctx, xs: &[Option<&Info>]) -> Result<Vec<Info>> {
    let x = need(ctx, xs, 0)?;
    float_input(ctx, x)?;
    let shape = x.shape.as_ref().map(|s| {
        s.iter()
            .enumerate()
            .map(|(i, &d)| if i < 2 { d } else { Some(1) })
            .collect()
    });
    if x.rank().is_some_and(|r| r < 3) {
        return Err(ctx.err(format!("expects [N, C, ...], got {}", show(&x.shape))));
    }
    Ok(vec![Info::new(x.dtype, shape)])
}

fn spatial_dims(x: &Tensor) -> Vec<isize> {
    (2..x.ndim() as isize).collect()
}

/// `GlobalAveragePool`: the mean over the spatial dims, kept as size 1.
pub(super) const GLOBAL_AVERAGE_POOL: OpDef = OpDef {
    name: "GlobalAveragePool",
    host_inputs: &[],
    infer: infer_global,
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        Ok(vec![x.mean_dims(spatial_dims(x), true)?])
    },
};

/// `GlobalMaxPool`: the maximum over the spatial dims, kept as size 1.
pub(super) const GLOBAL_MAX_POOL: OpDef = OpDef {
    name: "GlobalMaxPool",
    host_inputs: &[],
    infer: infer_global,
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        Ok(vec![x.amax(spatial_dims(x), true)?])
    },
};

/// Per-channel vector `[C]` reshaped to broadcast over `[N, C, ...]` of rank `rank`.
fn per_channel(v: &Tensor, rank: usize) -> Result<Tensor> {
    let mut shape = vec![1usize; rank.max(2)];
    shape[1] = v.numel();
    v.reshape(&shape)
}

/// `BatchNormalization` at inference: `(x − mean) / sqrt(var + ε) · scale + B` as one scale
/// and one shift per channel.
pub(super) const BATCH_NORMALIZATION: OpDef = OpDef {
    name: "BatchNormalization",
    host_inputs: &[],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        float_input(ctx, x)?;
        if ctx.i("training_mode", 0)? != 0 || ctx.node.outputs.iter().skip(1).any(Option::is_some) {
            return Err(ctx.err("training mode (running statistics as outputs) is not supported"));
        }
        let c = x.shape.as_ref().and_then(|s| s.get(1).copied().flatten());
        for (i, what) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
            let p = need(ctx, xs, i)?;
            if let (Some(c), Some(s)) = (c, &p.shape) {
                if s.len() != 1 || s[0].is_some_and(|n| n != c) {
                    return Err(ctx.err(format!(
                        "{what} {} must be [{c}] (the input's channels)",
                        show(&p.shape)
                    )));
                }
            }
        }
        Ok(vec![Info::new(x.dtype, x.shape.clone())])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let [scale, b, mean, var] = [1, 2, 3, 4].map(|i| need(ctx, xs, i));
        let eps = ctx.f("epsilon", 1e-5)? as f64;
        let a = scale?.mul(&var?.add_scalar(eps)?.rsqrt()?)?;
        let shift = b?.sub(&mean?.mul(&a)?)?;
        let r = x.ndim();
        Ok(vec![x
            .mul(&per_channel(&a, r)?)?
            .add(&per_channel(&shift, r)?)?])
    },
};

/// `LayerNormalization` over the dims from `axis` on (with the optional `Mean` and
/// `InvStdDev` outputs).
pub(super) const LAYER_NORMALIZATION: OpDef = OpDef {
    name: "LayerNormalization",
    host_inputs: &[],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        float_input(ctx, x)?;
        let mut outs = vec![Info::new(x.dtype, x.shape.clone())];
        if let Some(s) = &x.shape {
            let axis = ctx.axis(ctx.i("axis", -1)?, s.len())?;
            let stats: Vec<Dim> = s
                .iter()
                .enumerate()
                .map(|(i, &d)| if i < axis { d } else { Some(1) })
                .collect();
            outs.push(Info::new(DType::F32, Some(stats.clone())));
            outs.push(Info::new(DType::F32, Some(stats)));
            let normalized = Some(s[axis..].to_vec());
            for i in [1, 2] {
                if let Some(p) = xs.get(i).copied().flatten() {
                    if broadcast(ctx, &[&normalized, &p.shape])? != normalized {
                        return Err(ctx.err(format!(
                            "{} {} does not broadcast to the normalized shape {}",
                            if i == 1 { "Scale" } else { "B" },
                            show(&p.shape),
                            show(&normalized)
                        )));
                    }
                }
            }
        } else {
            outs.push(Info::new(DType::F32, None));
            outs.push(Info::new(DType::F32, None));
        }
        Ok(outs)
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let axis = ctx.axis(ctx.i("axis", -1)?, x.ndim())?;
        let eps = ctx.f("epsilon", 1e-5)? as f64;
        let normalized = x.shape()[axis..].to_vec();
        let full = |p: Option<&Tensor>| p.map(|p| p.expand(&normalized)).transpose();
        let (w, b) = (
            full(xs.get(1).and_then(Option::as_ref))?,
            full(xs.get(2).and_then(Option::as_ref))?,
        );
        let y = F::layer_norm_with(
            x,
            &normalized,
            F::LayerNormFuncOptions {
                weight: w.as_ref(),
                bias: b.as_ref(),
                eps,
            },
        )?;
        let mut outs = vec![y];
        if ctx.node.outputs.iter().skip(1).any(Option::is_some) {
            let dims: Vec<isize> = (axis as isize..x.ndim() as isize).collect();
            let xf = x.to_dtype(DType::F32)?;
            let mean = xf.mean_dims(&dims, true)?;
            let var = xf.sub(&mean)?.square()?.mean_dims(&dims, true)?;
            outs.push(mean);
            outs.push(var.add_scalar(eps)?.rsqrt()?);
        }
        Ok(outs)
    },
};

fn infer_softmax(ctx: &Ctx, xs: &[Option<&Info>]) -> Result<Vec<Info>> {
    let x = need(ctx, xs, 0)?;
    float_input(ctx, x)?;
    if let Some(r) = x.rank() {
        ctx.axis(ctx.i("axis", -1)?, r)?;
    }
    Ok(vec![Info::new(x.dtype, x.shape.clone())])
}

/// `Softmax` along `axis` (opset 13's single-axis form).
pub(super) const SOFTMAX: OpDef = OpDef {
    name: "Softmax",
    host_inputs: &[],
    infer: infer_softmax,
    run: |ctx, xs| Ok(vec![need(ctx, xs, 0)?.softmax(ctx.i("axis", -1)? as isize)?]),
};

/// `LogSoftmax` along `axis`.
pub(super) const LOG_SOFTMAX: OpDef = OpDef {
    name: "LogSoftmax",
    host_inputs: &[],
    infer: infer_softmax,
    run: |ctx, xs| {
        Ok(vec![
            need(ctx, xs, 0)?.log_softmax(ctx.i("axis", -1)? as isize)?
        ])
    },
};
