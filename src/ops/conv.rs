//! conv2d and pooling, lowered to im2col + matmul / reductions (im2col's adjoint, col2im, is its
//! backward).

use crate::autograd::{record, Saved};
use crate::backend::ConvEpilogue;
use crate::shape::checked_numel;
use crate::{DType, Error, Result, Tensor};

/// Geometry of a 2-D sliding window over `[N, C, H, W]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Samples (batch size).
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Zero padding above and below.
    pub ph: usize,
    /// Zero padding left and right.
    pub pw: usize,
    /// Vertical dilation.
    pub dh: usize,
    /// Horizontal dilation.
    pub dw: usize,
    /// Output height.
    pub ho: usize,
    /// Output width.
    pub wo: usize,
}

impl ConvGeom {
    /// Validate and compute the output size.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        op: &'static str,
        shape: &[usize],
        k: [usize; 2],
        s: [usize; 2],
        p: [usize; 2],
        d: [usize; 2],
    ) -> Result<ConvGeom> {
        if shape.len() != 4 {
            return Err(Error::shape(
                op,
                format!("expected a 4-D input [N, C, H, W], got shape {shape:?}"),
            ));
        }
        if s.contains(&0) || d.contains(&0) || k.contains(&0) {
            return Err(Error::arg(
                op,
                format!("kernel {k:?}, stride {s:?} and dilation {d:?} must be positive"),
            ));
        }
        let (h, w) = (shape[2], shape[3]);
        // Window extents and padded sizes in checked arithmetic: absurd arguments are an error.
        let ext = |i: usize, x: usize| -> Option<(usize, usize)> {
            let eff = d[i].checked_mul(k[i] - 1)?.checked_add(1)?;
            Some((eff, p[i].checked_mul(2)?.checked_add(x)?))
        };
        let (Some((e0, hp)), Some((e1, wp))) = (ext(0, h), ext(1, w)) else {
            return Err(Error::arg(
                op,
                format!("kernel {k:?}, padding {p:?} and dilation {d:?} overflow the window size"),
            ));
        };
        if hp < e0 || wp < e1 {
            return Err(Error::shape(op, format!("Calculated padded input size per channel: ({hp} x {wp}). Kernel size: ({e0} x {e1}). Kernel size can't be greater than actual input size")));
        }
        // An empty image with padding would give windows of padding alone (PyTorch allows it
        // only with no samples or no channels: nothing is computed).
        if (h == 0 || w == 0) && shape[0] != 0 && shape[1] != 0 {
            return Err(Error::shape(
                op,
                format!("Only zero batch or zero channel inputs are supported, but got input shape: {shape:?}"),
            ));
        }
        let (ho, wo) = ((hp - e0) / s[0] + 1, (wp - e1) / s[1] + 1);
        // im2col's column buffer [N, C*kh*kw, Ho*Wo] must be a valid shape.
        checked_numel(op, &[shape[0], shape[1], k[0], k[1], ho, wo])?;
        Ok(ConvGeom {
            n: shape[0],
            c: shape[1],
            h,
            w,
            kh: k[0],
            kw: k[1],
            sh: s[0],
            sw: s[1],
            ph: p[0],
            pw: p[1],
            dh: d[0],
            dw: d[1],
            ho,
            wo,
        })
    }
}

impl Tensor {
    /// Unfold into columns `[N, C*kh*kw, Ho*Wo]` (torch.nn.functional.unfold), padding with `pad`.
    pub fn im2col(&self, g: &ConvGeom, pad: f64) -> Result<Tensor> {
        let x = self.dense()?;
        let s = x.storage().im2col(g, pad)?;
        let out = Tensor::from_storage(s, &[g.n, g.c * g.kh * g.kw, g.ho * g.wo], self.device());
        Ok(record(out, "im2col", &[self], *g, |g, gr| {
            Ok(vec![Some(gr.col2im(g)?)])
        }))
    }
    /// Fold columns back to `[N, C, H, W]`, summing overlaps (torch.nn.functional.fold).
    pub fn col2im(&self, g: &ConvGeom) -> Result<Tensor> {
        let x = self.dense()?;
        let s = x.storage().col2im(g)?;
        let out = Tensor::from_storage(s, &[g.n, g.c, g.h, g.w], self.device());
        Ok(record(out, "col2im", &[self], *g, |g, gr| {
            Ok(vec![Some(gr.im2col(g, 0.0)?)])
        }))
    }
}

/// A 2-D size argument (PyTorch's `_size_2_t`): one number for both dimensions, or `[h, w]`.
///
/// ```
/// use wgtorch::nn::functional::Size2;
/// assert_eq!(Size2::from(3), Size2([3, 3]));
/// assert_eq!(Size2::from([2, 1]), Size2([2, 1]));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Size2(pub [usize; 2]);

impl From<usize> for Size2 {
    fn from(v: usize) -> Size2 {
        Size2([v, v])
    }
}
impl From<[usize; 2]> for Size2 {
    fn from(v: [usize; 2]) -> Size2 {
        Size2(v)
    }
}
impl From<(usize, usize)> for Size2 {
    fn from((a, b): (usize, usize)) -> Size2 {
        Size2([a, b])
    }
}

/// `conv2d`'s keyword arguments (PyTorch's names and defaults: stride 1, padding 0, dilation 1,
/// groups 1); `..Default::default()` for the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dFuncOptions {
    /// Step of the window.
    pub stride: Size2,
    /// Zero padding on each side.
    pub padding: Size2,
    /// Spacing between kernel taps.
    pub dilation: Size2,
    /// Channel groups (in and out channels split into `groups` independent convolutions).
    pub groups: usize,
}

impl Default for Conv2dFuncOptions {
    fn default() -> Self {
        Conv2dFuncOptions {
            stride: Size2([1, 1]),
            padding: Size2([0, 0]),
            dilation: Size2([1, 1]),
            groups: 1,
        }
    }
}

/// 2-D convolution (torch.nn.functional.conv2d) with stride 1, no padding: input
/// `[N, C, H, W]`, weight `[O, C/groups, kh, kw]`, optional bias `[O]`. The keyword arguments
/// go through [`conv2d_with`].
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let x = Tensor::ones([1, 2, 5, 5], &dev)?;
/// let w = Tensor::ones([3, 2, 3, 3], &dev)?;
/// assert_eq!(F::conv2d(&x, &w, None)?.shape(), &[1, 3, 3, 3]);
/// let opts = F::Conv2dFuncOptions { stride: 2.into(), padding: 1.into(), ..Default::default() };
/// assert_eq!(F::conv2d_with(&x, &w, None, opts)?.shape(), &[1, 3, 3, 3]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn conv2d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    conv2d_with(input, weight, bias, Conv2dFuncOptions::default())
}

/// [`conv2d`] with its keyword arguments.
pub fn conv2d_with(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    options: Conv2dFuncOptions,
) -> Result<Tensor> {
    crate::onnx::trace::traced(
        || conv2d_with_untraced(input, weight, bias, options, ConvEpilogue::default()),
        |r, out| crate::onnx::forms::conv2d(r, input, weight, bias, &options, out),
    )
}

/// [`conv2d_with`] itself, then the epilogue (applied by ops after the convolution where the
/// backend does not fuse it); the public function records it for ONNX export.
pub(super) fn conv2d_with_untraced(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    options: Conv2dFuncOptions,
    epi: ConvEpilogue<'_, Tensor>,
) -> Result<Tensor> {
    let name = match (epi.residual.is_some(), epi.relu) {
        (false, false) => "conv2d",
        (false, true) => "conv2d_relu",
        (true, false) => "conv2d_add",
        (true, true) => "conv2d_add_relu",
    };
    let _p = crate::profiler::op(name, &[input, weight]);
    let Conv2dFuncOptions {
        stride: Size2(stride),
        padding: Size2(padding),
        dilation: Size2(dilation),
        groups,
    } = options;
    input.same_device("conv2d", weight)?;
    let (input, weight) = (&crate::amp::lower(input)?, &crate::amp::lower(weight)?);
    let bias = bias.map(crate::amp::lower).transpose()?;
    let bias = bias.as_ref();
    if weight.ndim() != 4 {
        return Err(Error::shape(
            "conv2d",
            format!(
                "weight must be 4-D [O, C/groups, kh, kw], got {:?}",
                weight.shape()
            ),
        ));
    }
    let (o, cg, kh, kw) = (
        weight.shape()[0],
        weight.shape()[1],
        weight.shape()[2],
        weight.shape()[3],
    );
    let g = ConvGeom::new("conv2d", input.shape(), [kh, kw], stride, padding, dilation)?;
    if groups == 0 || g.c != cg * groups || o % groups != 0 {
        return Err(Error::shape("conv2d", format!("Given groups={groups}, weight of size {:?}, expected input{:?} to have {} channels, but got {} channels instead", weight.shape(), input.shape(), cg * groups, g.c)));
    }
    checked_numel("conv2d", &[g.n, o, g.ho, g.wo])?;
    if groups == 1 {
        return conv2d_dense(input, weight, bias, g, o, epi);
    }
    let cols = input.im2col(&g, 0.0)?; // [N, C*kh*kw, L]
    let k = cg * kh * kw;
    let l = g.ho * g.wo;
    let cols = cols
        .reshape([g.n, groups, k, l])?
        .permute([1, 2, 0, 3])?
        .reshape([groups, k, g.n * l])?;
    let w = weight.reshape([groups, o / groups, k])?;
    let y = w
        .matmul(&cols)?
        .reshape([groups, o / groups, g.n, l])?
        .permute([2, 0, 1, 3])?
        .reshape([g.n, o, g.ho, g.wo])?;
    let y = match bias {
        Some(b) => y.add(&b.reshape([1, o, 1, 1])?)?,
        None => y,
    };
    epi.apply(y)
}

/// Ungrouped convolution as one backend primitive (per-sample GEMMs on the CPU, implicit GEMM on
/// the GPU: neither materialises the batch's columns). Its backward is the primitive pair; with
/// `create_graph` it is the differentiable im2col formulation instead, so higher-order gradients
/// flow.
fn conv2d_dense(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    g: ConvGeom,
    o: usize,
    epi: ConvEpilogue<'_, Tensor>,
) -> Result<Tensor> {
    for t in [Some(weight), bias].into_iter().flatten() {
        input.same_device("conv2d", t)?;
        if t.dtype() != input.dtype() {
            return Err(Error::DTypeMismatch {
                op: "conv2d",
                expected: input.dtype(),
                found: t.dtype(),
            });
        }
    }
    if !input.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op: "conv2d",
            dtype: input.dtype(),
            hint: "; convolution needs floating-point tensors",
        });
    }
    if let Some(b) = bias {
        if b.shape() != [o] {
            return Err(Error::shape(
                "conv2d",
                format!("bias must have shape [{o}], got {:?}", b.shape()),
            ));
        }
    }
    let (x, w) = (input.dense()?, weight.dense()?);
    let b = bias.map(Tensor::dense).transpose()?;
    let shape = [g.n, o, g.ho, g.wo];
    // The backend fuses the epilogue when the residual needs no broadcast, on the CPU and, in
    // f32 (a half output would be rounded before the residual is added), on a GPU; what it does
    // not fuse runs as ops after it. A fused epilogue has no backward here: `conv2d_fused` asks
    // for one only when nothing needs a gradient.
    let fused = (!input.device().is_gpu() || input.dtype() == DType::F32)
        && epi
            .residual
            .is_none_or(|r| r.shape() == shape && r.dtype() == input.dtype());
    let (fused, rest) = if fused {
        (epi, ConvEpilogue::default())
    } else {
        (ConvEpilogue::default(), epi)
    };
    if (fused.residual.is_some() || fused.relu)
        && crate::autograd::is_grad_enabled()
        && [Some(input), Some(weight), bias, fused.residual]
            .into_iter()
            .flatten()
            .any(Tensor::requires_grad)
    {
        return Err(Error::msg(
            "internal: conv2d's fused epilogue has no backward; it is asked for only without grad",
        ));
    }
    let r = fused.residual.map(Tensor::dense).transpose()?;
    let r = r.as_ref().map(|r| r.storage());
    let s = x.storage().conv2d(
        &w.storage(),
        b.as_ref().map(|b| b.storage()).as_deref(),
        crate::backend::ConvEpilogue {
            residual: r.as_deref(),
            relu: fused.relu,
        },
        &g,
        o,
    )?;
    drop(r);
    let out = Tensor::from_storage(s, &shape, input.device());
    let mut inputs = vec![input, weight];
    inputs.extend(bias);
    let saved = (
        Saved::new(input),
        Saved::new(weight),
        g,
        o,
        bias.is_some(),
        [input.requires_grad(), weight.requires_grad()],
    );
    let y = record(out, "conv2d", &inputs, saved, |saved, gy| {
        let (x, w, g, o, has_bias, need) = saved;
        // Both are read whatever needs a gradient, as PyTorch saves both.
        let (x, w, o) = (x.get()?.dense()?, w.get()?.dense()?, *o);
        let gy = gy.dense()?;
        if crate::autograd::is_grad_enabled() {
            let mut grads = conv2d_backward_graph(&x, &w, &gy, g, o)?;
            grads.truncate(2 + *has_bias as usize);
            return Ok(grads);
        }
        let dev = gy.device();
        let gx = match need[0] {
            false => None,
            true => match transposed_as_forward(g, o) {
                // On a GPU the stride-1 input gradient runs as the forward kernel on flipped
                // weights (its gather needs no divisibility tests).
                Some(gt) if dev.is_gpu() => {
                    let wt = w.transpose(0, 1)?.flip([2, 3])?.dense()?;
                    let gx =
                        gy.storage()
                            .conv2d(&wt.storage(), None, Default::default(), &gt, g.c)?;
                    Some(gx)
                }
                _ => Some(gy.storage().conv2d_backward_input(&w.storage(), g, o)?),
            },
        };
        let gw = need[1]
            .then(|| gy.storage().conv2d_backward_weight(&x.storage(), g, o))
            .transpose()?;
        let mut grads = vec![
            gx.map(|s| Tensor::from_storage(s, x.shape(), dev)),
            gw.map(|s| Tensor::from_storage(s, w.shape(), dev)),
        ];
        if *has_bias {
            grads.push(Some(gy.sum_dims([0, 2, 3], false)?));
        }
        Ok(grads)
    });
    rest.apply(y)
}

/// For stride 1, the input gradient is a forward convolution of the output gradient with the
/// weights transposed and flipped, padded by `d*(k-1) - p`: its geometry, when that padding is
/// not negative.
pub(crate) fn transposed_as_forward(g: &ConvGeom, o: usize) -> Option<ConvGeom> {
    let pad = |k: usize, d: usize, p: usize| (d * (k - 1)).checked_sub(p);
    if g.sh != 1 || g.sw != 1 {
        return None;
    }
    let p = [pad(g.kh, g.dh, g.ph)?, pad(g.kw, g.dw, g.pw)?];
    let gt = ConvGeom::new(
        "conv2d",
        &[g.n, o, g.ho, g.wo],
        [g.kh, g.kw],
        [1, 1],
        p,
        [g.dh, g.dw],
    )
    .ok()?;
    (gt.ho == g.h && gt.wo == g.w).then_some(gt)
}

/// conv2d's gradients in differentiable ops (for `create_graph`): `dX = col2im(Wᵀ·dY)`,
/// `dW = Σ_n dY·colsᵀ`, `db = Σ dY`.
fn conv2d_backward_graph(
    x: &Tensor,
    w: &Tensor,
    gy: &Tensor,
    g: &ConvGeom,
    o: usize,
) -> Result<Vec<Option<Tensor>>> {
    let (k, l) = (g.c * g.kh * g.kw, g.ho * g.wo);
    let gy3 = gy.reshape([g.n, o, l])?;
    let w2 = w.reshape([o, k])?;
    let gx = w2.t()?.matmul(&gy3)?.col2im(g)?;
    let cols = x.im2col(g, 0.0)?;
    let gw = gy3
        .matmul(&cols.transpose(1, 2)?)?
        .sum_dims([0], false)?
        .reshape(w.shape())?;
    Ok(vec![
        Some(gx),
        Some(gw),
        Some(gy.sum_dims([0, 2, 3], false)?),
    ])
}

/// PyTorch's pooling input check: 3-D or 4-D, and only a batch may be empty (an empty plane
/// with padding would pool padding alone; no channels, nothing at all).
fn check_pool_input(op: &'static str, shape: &[usize]) -> Result<()> {
    let nd = shape.len();
    if nd != 4 && nd != 3 {
        return Err(Error::shape(
            op,
            format!("expected a 3-D or 4-D input, got {shape:?}"),
        ));
    }
    if shape[nd - 3..].contains(&0) {
        return Err(Error::shape(
            op,
            format!("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:{shape:?}"),
        ));
    }
    Ok(())
}

fn pool_cols(
    op: &'static str,
    input: &Tensor,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    pad: f64,
) -> Result<(Tensor, ConvGeom, Vec<usize>)> {
    check_pool_input(op, input.shape())?;
    if p[0] > k[0] / 2 || p[1] > k[1] / 2 {
        return Err(Error::arg(op, format!("pad should be at most half of effective kernel size, but got pad={p:?}, kernel_size={k:?}")));
    }
    let lead: Vec<usize> = input.shape()[..input.ndim() - 2].to_vec();
    let (h, w) = (
        input.shape()[input.ndim() - 2],
        input.shape()[input.ndim() - 1],
    );
    let nc: usize = lead.iter().product();
    let x = input.reshape([nc, 1, h, w])?;
    let g = ConvGeom::new(op, x.shape(), k, s, p, [1, 1])?;
    let cols = x.im2col(&g, pad)?; // [NC, kh*kw, L]
    let mut out = lead;
    out.extend([g.ho, g.wo]);
    Ok((cols, g, out))
}

/// `max_pool2d`'s keyword arguments (PyTorch's names and defaults: stride = kernel_size,
/// padding 0, dilation 1). `ceil_mode` and `return_indices` are not implemented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool2dOptions {
    /// Step of the window; `None` is the kernel size.
    pub stride: Option<Size2>,
    /// Implicit `-inf` padding on each side (at most half the kernel).
    pub padding: Size2,
    /// Spacing between window taps.
    pub dilation: Size2,
}

impl Default for MaxPool2dOptions {
    fn default() -> Self {
        MaxPool2dOptions {
            stride: None,
            padding: Size2([0, 0]),
            dilation: Size2([1, 1]),
        }
    }
}

/// 2-D max pooling over `[N, C, H, W]` or `[C, H, W]` (torch.nn.functional.max_pool2d) with
/// stride = kernel_size. One kernel computes each window's maximum and its argmax; the gradient
/// goes to that element.
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::arange(0.0, 16.0, 1.0, &Device::Cpu)?.reshape(&[1, 1, 4, 4])?;
/// assert_eq!(F::max_pool2d(&x, 2)?.to_vec::<f32>()?, [5.0, 7.0, 13.0, 15.0]);
/// let opts = F::MaxPool2dOptions { stride: Some(1.into()), ..Default::default() };
/// assert_eq!(F::max_pool2d_with(&x, 3, opts)?.shape(), &[1, 1, 2, 2]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn max_pool2d(input: &Tensor, kernel_size: impl Into<Size2>) -> Result<Tensor> {
    max_pool2d_with(input, kernel_size, MaxPool2dOptions::default())
}

/// [`max_pool2d`] with its keyword arguments.
pub fn max_pool2d_with(
    input: &Tensor,
    kernel_size: impl Into<Size2>,
    options: MaxPool2dOptions,
) -> Result<Tensor> {
    let kernel: Size2 = kernel_size.into();
    crate::onnx::trace::traced(
        || max_pool2d_with_untraced(input, kernel, options),
        |r, out| crate::onnx::forms::max_pool2d(r, input, kernel, &options, out),
    )
}

/// [`max_pool2d_with`] itself; the public function records it for ONNX export.
fn max_pool2d_with_untraced(
    input: &Tensor,
    kernel_size: impl Into<Size2>,
    options: MaxPool2dOptions,
) -> Result<Tensor> {
    let _p = crate::profiler::op("max_pool2d", &[input]);
    let Size2(kernel) = kernel_size.into();
    let stride = options.stride.map_or(kernel, |s| s.0);
    let Size2(padding) = options.padding;
    let Size2(dilation) = options.dilation;
    check_pool_input("max_pool2d", input.shape())?;
    if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
        return Err(Error::arg("max_pool2d", format!("pad should be at most half of effective kernel size, but got pad={padding:?}, kernel_size={kernel:?}")));
    }
    let nd = input.ndim();
    let lead: Vec<usize> = input.shape()[..nd - 2].to_vec();
    let planes: usize = lead.iter().product();
    let g = ConvGeom::new(
        "max_pool2d",
        &[planes, 1, input.shape()[nd - 2], input.shape()[nd - 1]],
        kernel,
        stride,
        padding,
        dilation,
    )?;
    let x = input.dense()?;
    // The argmax is needed only for a backward pass.
    let grad = crate::autograd::is_grad_enabled() && input.requires_grad();
    let (v, i) = x.storage().max_pool(&g, grad)?;
    let mut out_shape = lead;
    out_shape.extend([g.ho, g.wo]);
    let out = Tensor::from_storage(v, &out_shape, input.device());
    let Some(i) = i.filter(|_| grad) else {
        return Ok(out);
    };
    let idx = Tensor::from_storage(i, &out_shape, input.device());
    // The rule needs only the argmax, but the input is saved too (and checked), as PyTorch does.
    let saved = (Saved::new(input), Saved::new(&idx), g);
    Ok(record(out, "max_pool2d", &[input], saved, |s, gr| {
        let (x, idx, g) = s;
        let x = x.get()?;
        Ok(vec![Some(max_pool2d_backward(
            gr,
            &idx.get()?,
            g,
            x.shape(),
        )?)])
    }))
}

/// The input gradient of max pooling: `grad` routed to the argmax positions `idx`. Differentiable
/// in `grad` (its backward reads the gradient at the same positions).
fn max_pool2d_backward(
    grad: &Tensor,
    idx: &Tensor,
    g: &ConvGeom,
    in_shape: &[usize],
) -> Result<Tensor> {
    let gr = grad.dense()?;
    let s = gr.storage().max_pool_backward(&idx.storage(), g)?;
    let out = Tensor::from_storage(s, in_shape, grad.device());
    let saved = (Saved::new(idx), g.n * g.c, grad.shape().to_vec());
    Ok(record(
        out,
        "max_pool2d_backward",
        &[grad],
        saved,
        |(idx, planes, out_shape), g2| {
            let (idx, planes) = (idx.get()?, *planes);
            let flat = g2.reshape([planes, g2.numel() / planes.max(1)])?;
            let picked = flat.gather(1, &idx.reshape([planes, idx.numel() / planes.max(1)])?)?;
            Ok(vec![Some(picked.reshape(out_shape)?)])
        },
    ))
}

/// `avg_pool2d`'s keyword arguments (PyTorch's names and defaults: stride = kernel_size,
/// padding 0, count_include_pad true, no divisor_override).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool2dOptions {
    /// Step of the window; `None` is the kernel size.
    pub stride: Option<Size2>,
    /// Zero padding on each side (at most half the kernel).
    pub padding: Size2,
    /// Whether the padding counts in each window's divisor.
    pub count_include_pad: bool,
    /// A fixed divisor for every window instead of its size.
    pub divisor_override: Option<usize>,
}

impl Default for AvgPool2dOptions {
    fn default() -> Self {
        AvgPool2dOptions {
            stride: None,
            padding: Size2([0, 0]),
            count_include_pad: true,
            divisor_override: None,
        }
    }
}

/// 2-D average pooling over `[N, C, H, W]` or `[C, H, W]` (torch.nn.functional.avg_pool2d)
/// with stride = kernel_size.
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::arange(0.0, 16.0, 1.0, &Device::Cpu)?.reshape(&[1, 1, 4, 4])?;
/// assert_eq!(F::avg_pool2d(&x, 2)?.to_vec::<f32>()?, [2.5, 4.5, 10.5, 12.5]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn avg_pool2d(input: &Tensor, kernel_size: impl Into<Size2>) -> Result<Tensor> {
    avg_pool2d_with(input, kernel_size, AvgPool2dOptions::default())
}

/// [`avg_pool2d`] with its keyword arguments. Windows sum their taps (im2col + a row sum) and
/// divide by `divisor_override`, else the window size (`count_include_pad`), else the number
/// of taps inside the input.
pub fn avg_pool2d_with(
    input: &Tensor,
    kernel_size: impl Into<Size2>,
    options: AvgPool2dOptions,
) -> Result<Tensor> {
    let kernel: Size2 = kernel_size.into();
    crate::onnx::trace::traced(
        || avg_pool2d_with_untraced(input, kernel, options),
        |r, out| crate::onnx::forms::avg_pool2d(r, input, kernel, &options, out),
    )
}

/// [`avg_pool2d_with`] itself; the public function records it for ONNX export.
fn avg_pool2d_with_untraced(
    input: &Tensor,
    kernel_size: impl Into<Size2>,
    options: AvgPool2dOptions,
) -> Result<Tensor> {
    let _p = crate::profiler::op("avg_pool2d", &[input]);
    let Size2(kernel) = kernel_size.into();
    let stride = options.stride.map_or(kernel, |s| s.0);
    let Size2(padding) = options.padding;
    let (cols, g, out) = pool_cols("avg_pool2d", input, kernel, stride, padding, 0.0)?;
    if let Some(d) = options.divisor_override {
        if d == 0 {
            return Err(Error::arg("avg_pool2d", "divisor must be not zero"));
        }
        return cols
            .sum_dims([1], false)?
            .div_scalar(d as f64)?
            .reshape(&out);
    }
    if options.count_include_pad || padding == [0, 0] {
        return cols.mean_dims([1], false)?.reshape(&out);
    }
    // Taps inside the input per window: the same pooling of a ones plane, summed.
    let ones = Tensor::full_dtype([1, 1, g.h, g.w], 1.0, input.dtype(), &input.device())?;
    let counts = ones
        .im2col(&ConvGeom { n: 1, c: 1, ..g }, 0.0)?
        .sum_dims([1], false)?;
    cols.sum_dims([1], false)?.div(&counts)?.reshape(&out)
}

/// Adaptive average pooling over `[N, C, H, W]` or `[C, H, W]` to `output_size` (one number or
/// `[oh, ow]`), with PyTorch's window bounds (torch.nn.functional.adaptive_avg_pool2d). An
/// empty plane (H or W of 0) is an error, as in PyTorch, for a 1×1 output too (where PyTorch
/// takes a mean of nothing, NaN, instead).
///
/// ```
/// use wgtorch::nn::functional as F;
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::ones([2, 3, 7, 5], &Device::Cpu)?;
/// assert_eq!(F::adaptive_avg_pool2d(&x, 1)?.shape(), &[2, 3, 1, 1]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn adaptive_avg_pool2d(input: &Tensor, output_size: impl Into<Size2>) -> Result<Tensor> {
    let size: Size2 = output_size.into();
    crate::onnx::trace::traced(
        || adaptive_avg_pool2d_untraced(input, size),
        |r, out| crate::onnx::forms::adaptive_avg_pool2d(r, input, out),
    )
}

/// [`adaptive_avg_pool2d`] itself; the public function records it for ONNX export.
fn adaptive_avg_pool2d_untraced(input: &Tensor, output_size: impl Into<Size2>) -> Result<Tensor> {
    let Size2(output) = output_size.into();
    let nd = input.ndim();
    if nd < 3 {
        return Err(Error::shape(
            "adaptive_avg_pool2d",
            format!("expected a 3-D or 4-D input, got {:?}", input.shape()),
        ));
    }
    let (h, w) = (input.shape()[nd - 2], input.shape()[nd - 1]);
    if let Some(d) = [h, w].iter().position(|&x| x == 0) {
        return Err(Error::shape(
            "adaptive_avg_pool2d",
            format!(
                "Expected input to have non-zero size for non-batch dimensions, but input has sizes {:?} with dimension {} being empty",
                input.shape(),
                nd - 2 + d
            ),
        ));
    }
    let [oh, ow] = output;
    if oh == 0 || ow == 0 {
        return Err(Error::arg(
            "adaptive_avg_pool2d",
            "output size must be positive",
        ));
    }
    // (No channels: not a pooling input, but PyTorch gives the empty result, as the cells do.)
    if h % oh == 0 && w % ow == 0 && input.numel() > 0 {
        return avg_pool2d(input, [h / oh, w / ow]);
    }
    let mut rows = Vec::with_capacity(oh);
    for i in 0..oh {
        let (h0, h1) = (i * h / oh, ((i + 1) * h).div_ceil(oh));
        let mut cols = Vec::with_capacity(ow);
        for j in 0..ow {
            let (w0, w1) = (j * w / ow, ((j + 1) * w).div_ceil(ow));
            let cell =
                input
                    .narrow(nd as isize - 2, h0, h1 - h0)?
                    .narrow(nd as isize - 1, w0, w1 - w0)?;
            cols.push(cell.mean_dims([-2, -1], false)?);
        }
        rows.push(Tensor::stack(&cols, -1)?);
    }
    Tensor::stack(&rows, -2)
}
