//! Normalisation: batch_norm (training and eval) and layer_norm, written with tensor ops; on
//! the CPU, layer_norm of f32/f64 is one fused kernel each way.

use crate::autograd::{is_grad_enabled, record, Saved};
use crate::backend::{cpu, cpu::CpuElem, cpu::CpuStorage, Storage};
use crate::dtype::Real;
use crate::{DType, Error, Result, Tensor};

/// `batch_norm`'s keyword arguments (PyTorch's names and defaults: no affine weight or bias,
/// evaluation mode, momentum 0.1, eps 1e-5).
#[derive(Clone, Copy, Debug)]
pub struct BatchNormFuncOptions<'a> {
    /// Per-channel scale `[C]`.
    pub weight: Option<&'a Tensor>,
    /// Per-channel shift `[C]`.
    pub bias: Option<&'a Tensor>,
    /// Normalise with the batch statistics (and update the running ones) instead of the
    /// running statistics.
    pub training: bool,
    /// Weight of the new batch statistic in the running averages.
    pub momentum: f64,
    /// Added to the variance.
    pub eps: f64,
}

impl Default for BatchNormFuncOptions<'_> {
    fn default() -> Self {
        BatchNormFuncOptions {
            weight: None,
            bias: None,
            training: false,
            momentum: 0.1,
            eps: 1e-5,
        }
    }
}

/// torch.nn.functional.batch_norm over `[N, C, ...]`, in evaluation mode (normalise with the
/// running statistics); the keyword arguments go through [`batch_norm_with`].
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], [2, 2], &dev)?;
/// let (rm, rv) = (Tensor::zeros([2], &dev)?, Tensor::ones([2], &dev)?);
/// let opts = F::BatchNormFuncOptions { training: true, ..Default::default() };
/// let y = F::batch_norm_with(&x, Some(&rm), Some(&rv), opts)?;
/// assert!((y.to_vec::<f32>()?[0] + 1.0).abs() < 1e-4);
/// let rm = rm.to_vec::<f32>()?; // running mean updated with momentum 0.1
/// assert!((rm[0] - 0.3).abs() < 1e-6 && (rm[1] - 0.5).abs() < 1e-6);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
) -> Result<Tensor> {
    batch_norm_with(
        input,
        running_mean,
        running_var,
        BatchNormFuncOptions::default(),
    )
}

/// [`batch_norm`] with its keyword arguments. In training the batch statistics normalise the
/// input and the running statistics (if given) are updated in place with `momentum` (unbiased
/// variance, as PyTorch); in eval the running statistics are used.
pub fn batch_norm_with(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    options: BatchNormFuncOptions<'_>,
) -> Result<Tensor> {
    crate::onnx::trace::traced(
        || batch_norm_with_untraced(input, running_mean, running_var, options),
        |r, out| crate::onnx::forms::batch_norm(r, input, running_mean, running_var, &options, out),
    )
}

/// [`batch_norm_with`] itself; the public function records it for ONNX export.
fn batch_norm_with_untraced(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    options: BatchNormFuncOptions<'_>,
) -> Result<Tensor> {
    let _p = crate::profiler::op("batch_norm", &[input]);
    let BatchNormFuncOptions {
        weight,
        bias,
        training,
        momentum,
        eps,
    } = options;
    if input.ndim() < 2 {
        return Err(Error::shape(
            "batch_norm",
            format!(
                "expected at least 2-D input [N, C, ...], got {:?}",
                input.shape()
            ),
        ));
    }
    let input = &crate::amp::upper(input)?;
    let c = input.shape()[1];
    let mut bshape = vec![1usize; input.ndim()];
    bshape[1] = c;
    for (name, t) in [
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ] {
        if let Some(t) = t {
            if t.numel() != c {
                return Err(Error::shape(
                    "batch_norm",
                    format!("{name} should contain {c} elements not {}", t.numel()),
                ));
            }
        }
    }
    let dims: Vec<isize> = (0..input.ndim() as isize).filter(|&d| d != 1).collect();
    let (mean, var) = if training {
        let n = input.numel() / c.max(1);
        if n <= 1 {
            return Err(Error::arg(
                "batch_norm",
                format!(
                    "Expected more than 1 value per channel when training, got input size {:?}",
                    input.shape()
                ),
            ));
        }
        let mean = input.mean_dims(&dims, true)?;
        let var = input.sub(&mean)?.square()?.mean_dims(&dims, true)?;
        if let (Some(rm), Some(rv)) = (running_mean, running_var) {
            let _g = crate::no_grad();
            let unbiased = var.mul_scalar(n as f64 / (n as f64 - 1.0))?;
            let new_m = rm
                .mul_scalar(1.0 - momentum)?
                .add(&mean.reshape([c])?.mul_scalar(momentum)?)?;
            let new_v = rv
                .mul_scalar(1.0 - momentum)?
                .add(&unbiased.reshape([c])?.mul_scalar(momentum)?)?;
            rm.copy_(&new_m)?;
            rv.copy_(&new_v)?;
        }
        (mean, var)
    } else {
        match (running_mean, running_var) {
            (Some(m), Some(v)) => (m.reshape(&bshape)?, v.reshape(&bshape)?),
            _ => {
                return Err(Error::arg(
                    "batch_norm",
                    "running_mean and running_var must be defined in evaluation mode",
                ))
            }
        }
    };
    let mut y = input.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(&w.reshape(&bshape)?)?;
    }
    if let Some(b) = bias {
        y = y.add(&b.reshape(&bshape)?)?;
    }
    Ok(y)
}

/// `layer_norm`'s keyword arguments (PyTorch's names and defaults: no weight or bias, eps
/// 1e-5).
#[derive(Clone, Copy, Debug)]
pub struct LayerNormFuncOptions<'a> {
    /// Elementwise scale, shaped `normalized_shape`.
    pub weight: Option<&'a Tensor>,
    /// Elementwise shift, shaped `normalized_shape`.
    pub bias: Option<&'a Tensor>,
    /// Added to the variance.
    pub eps: f64,
}

impl Default for LayerNormFuncOptions<'_> {
    fn default() -> Self {
        LayerNormFuncOptions {
            weight: None,
            bias: None,
            eps: 1e-5,
        }
    }
}

/// torch.nn.functional.layer_norm over the trailing `normalized_shape` dims; the keyword
/// arguments go through [`layer_norm_with`].
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0], [1, 2], &Device::Cpu)?;
/// let y = F::layer_norm(&x, &[2])?.to_vec::<f32>()?;
/// assert!((y[0] + 1.0).abs() < 1e-4 && (y[1] - 1.0).abs() < 1e-4);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn layer_norm(input: &Tensor, normalized_shape: &[usize]) -> Result<Tensor> {
    layer_norm_with(input, normalized_shape, LayerNormFuncOptions::default())
}

/// [`layer_norm`] with its keyword arguments.
pub fn layer_norm_with(
    input: &Tensor,
    normalized_shape: &[usize],
    options: LayerNormFuncOptions<'_>,
) -> Result<Tensor> {
    crate::onnx::trace::traced(
        || layer_norm_with_untraced(input, normalized_shape, options),
        |r, out| crate::onnx::forms::layer_norm(r, input, normalized_shape, &options, out),
    )
}

/// [`layer_norm_with`] itself; the public function records it for ONNX export.
fn layer_norm_with_untraced(
    input: &Tensor,
    normalized_shape: &[usize],
    options: LayerNormFuncOptions<'_>,
) -> Result<Tensor> {
    let _p = crate::profiler::op("layer_norm", &[input]);
    let LayerNormFuncOptions { weight, bias, eps } = options;
    let input = &crate::amp::upper(input)?;
    let k = normalized_shape.len();
    if k == 0 || k > input.ndim() || input.shape()[input.ndim() - k..] != *normalized_shape {
        return Err(Error::shape("layer_norm", format!("Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size {:?}", normalized_shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "), input.shape())));
    }
    let n: usize = normalized_shape.iter().product();
    let fits = |t: Option<&Tensor>| {
        t.is_none_or(|t| {
            t.shape() == normalized_shape && t.dtype() == input.dtype() && !t.device().is_gpu()
        })
    };
    if !input.device().is_gpu()
        && matches!(input.dtype(), DType::F32 | DType::F64)
        && n > 0
        && fits(weight)
        && fits(bias)
    {
        return layer_norm_cpu(input, normalized_shape, weight, bias, eps);
    }
    let dims: Vec<isize> = (input.ndim() - k..input.ndim())
        .map(|d| d as isize)
        .collect();
    let mean = input.mean_dims(&dims, true)?;
    let var = input.sub(&mean)?.square()?.mean_dims(&dims, true)?;
    let mut y = input.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(w)?;
    }
    if let Some(b) = bias {
        y = y.add(b)?;
    }
    Ok(y)
}

/// The fused CPU layer_norm over the trailing `n` elements of each row (f32/f64, weight and bias
/// of `normalized_shape`). Its gradient is a fused kernel too, except under `create_graph`,
/// where the formula is recorded with tensor ops so that it can be differentiated again.
fn layer_norm_cpu(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let (numel, n) = (input.numel(), normalized_shape.iter().product::<usize>());
    let rows = numel / n;
    cpu::reserve("layer_norm", input.dtype(), numel)?;
    let dense = |t: Option<&Tensor>| t.map(|t| t.detach().dense()).transpose();
    let (x, w, b) = (input.detach().dense()?, dense(weight)?, dense(bias)?);
    let (xs, ws, bs) = (
        x.storage(),
        w.as_ref().map(|w| w.storage()),
        b.as_ref().map(|b| b.storage()),
    );
    let (wc, bc) = (
        ws.as_deref().and_then(cpu_of),
        bs.as_deref().and_then(cpu_of),
    );
    let dev = input.device();
    fn run<T: Real + CpuElem>(
        x: &CpuStorage,
        [w, b]: [Option<&CpuStorage>; 2],
        rows: usize,
        n: usize,
        eps: f64,
    ) -> Option<[CpuStorage; 3]> {
        let (w, b) = (
            w.and_then(|w| cpu::head(w, n)),
            b.and_then(|b| cpu::head(b, n)),
        );
        let (y, m, r) = cpu::layer_norm_rows(cpu::head(x, rows * n)?, w, b, rows, n, eps);
        Some([T::wrap(y), T::wrap(m), T::wrap(r)])
    }
    let out = cpu_of(&xs).and_then(|c| match input.dtype() {
        DType::F32 => run::<f32>(c, [wc, bc], rows, n, eps),
        DType::F64 => run::<f64>(c, [wc, bc], rows, n, eps),
        _ => None,
    });
    let [y, mean, rstd] =
        out.ok_or_else(|| Error::msg("layer_norm: the fused kernel takes f32/f64 CPU tensors"))?;
    drop((xs, ws, bs));
    let out = Tensor::from_storage(Storage::Cpu(y), input.shape(), dev);
    let stat = |s: CpuStorage| Tensor::from_storage(Storage::Cpu(s), &[rows], dev);
    let (mean, rstd) = (stat(mean), stat(rstd));
    let mut inputs = vec![input];
    inputs.extend(weight);
    inputs.extend(bias);
    let saved = (
        Saved::new(input),
        weight.map(Saved::new),
        bias.is_some(),
        Saved::new(&mean),
        Saved::new(&rstd),
        (eps, normalized_shape.to_vec()),
    );
    Ok(record(out, "layer_norm", &inputs, saved, |s, g| {
        let (x, w, has_bias, mean, rstd, (eps, shape)) = s;
        let (x, w) = (x.get()?, w.as_ref().map(Saved::get).transpose()?);
        let (dx, dw, db) = if is_grad_enabled() {
            layer_norm_backward_composite(&x, w.as_ref(), g, shape, *eps)?
        } else {
            layer_norm_backward_fused(&x, w.as_ref(), g, &mean.get()?, &rstd.get()?, shape)?
        };
        let mut grads = vec![Some(dx)];
        if w.is_some() {
            grads.push(Some(dw));
        }
        if *has_bias {
            grads.push(Some(db));
        }
        Ok(grads)
    }))
}

/// The fused CPU gradient of layer_norm: `(dx, dw, db)`, `dw` and `db` of `normalized_shape`.
fn layer_norm_backward_fused(
    x: &Tensor,
    w: Option<&Tensor>,
    g: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    normalized_shape: &[usize],
) -> Result<(Tensor, Tensor, Tensor)> {
    let (numel, n) = (x.numel(), normalized_shape.iter().product::<usize>());
    let rows = numel / n;
    cpu::reserve("layer_norm_backward", x.dtype(), numel)?;
    let (xd, gd, wd) = (
        x.dense()?,
        g.to_dtype(x.dtype())?.dense()?,
        w.map(|w| w.dense()).transpose()?,
    );
    let (xs, gs, ms, rs) = (xd.storage(), gd.storage(), mean.storage(), rstd.storage());
    let ws = wd.as_ref().map(|w| w.storage());
    fn run<T: Real + CpuElem>(
        [x, g, m, r]: [&Storage; 4],
        w: Option<&Storage>,
        rows: usize,
        n: usize,
    ) -> Option<[CpuStorage; 3]> {
        let w = match w {
            Some(w) => Some(part::<T>(w, n)?),
            None => None,
        };
        let (x, g) = (part::<T>(x, rows * n)?, part::<T>(g, rows * n)?);
        let (m, r) = (part::<T>(m, rows)?, part::<T>(r, rows)?);
        let (dx, dw, db) = cpu::layer_norm_backward_rows(g, x, m, r, w, rows, n);
        Some([T::wrap(dx), T::wrap(dw), T::wrap(db)])
    }
    let args = [&*xs, &*gs, &*ms, &*rs];
    let grads = match x.dtype() {
        DType::F32 => run::<f32>(args, ws.as_deref(), rows, n),
        DType::F64 => run::<f64>(args, ws.as_deref(), rows, n),
        _ => None,
    };
    let [dx, dw, db] = grads.ok_or_else(|| {
        Error::msg("layer_norm backward: the fused kernel takes f32/f64 CPU tensors")
    })?;
    let dev = x.device();
    Ok((
        Tensor::from_storage(Storage::Cpu(dx), x.shape(), dev),
        Tensor::from_storage(Storage::Cpu(dw), normalized_shape, dev),
        Tensor::from_storage(Storage::Cpu(db), normalized_shape, dev),
    ))
}

/// layer_norm's gradient written with tensor ops (differentiable, for `create_graph`):
/// `dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))` with `gw = g * w`, `dw = Σ g * xhat`,
/// `db = Σ g` over the rows.
fn layer_norm_backward_composite(
    x: &Tensor,
    w: Option<&Tensor>,
    g: &Tensor,
    normalized_shape: &[usize],
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let n = normalized_shape.iter().product::<usize>();
    let rows = (x.numel() / n) as isize;
    let (x2, g2) = (
        x.reshape([rows, n as isize])?,
        g.reshape([rows, n as isize])?,
    );
    let mean = x2.mean_dims([1], true)?;
    let xc = x2.sub(&mean)?;
    let rstd = xc
        .square()?
        .mean_dims([1], true)?
        .add_scalar(eps)?
        .rsqrt()?;
    let xhat = xc.mul(&rstd)?;
    let gw = match w {
        Some(w) => g2.mul(&w.reshape([n as isize])?)?,
        None => g2.clone(),
    };
    let dx = rstd.mul(
        &gw.sub(&gw.mean_dims([1], true)?)?
            .sub(&xhat.mul(&gw.mul(&xhat)?.mean_dims([1], true)?)?)?,
    )?;
    let dw = g2
        .mul(&xhat)?
        .sum_dims([0], false)?
        .reshape(normalized_shape)?;
    let db = g2.sum_dims([0], false)?.reshape(normalized_shape)?;
    Ok((dx.reshape(x.shape())?, dw, db))
}

/// The CPU storage, if it is one.
fn cpu_of(s: &Storage) -> Option<&CpuStorage> {
    match s {
        Storage::Cpu(c) => Some(c),
        Storage::Gpu(_) => None,
    }
}

/// The first `len` elements of a CPU storage of `T`s.
fn part<T: CpuElem>(s: &Storage, len: usize) -> Option<&[T]> {
    cpu_of(s).and_then(|c| cpu::head(c, len))
}
