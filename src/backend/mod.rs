//! Backends: enum dispatch over where the storage lives. The op layer checks devices and dtypes
//! before it calls in here, so operands always share a backend.
//!
//! User code rarely touches this module: tensors pick their backend from their
//! [`Device`](crate::Device). What is public here is for inspection and tuning: the host
//! buffer pool ([`cpu::pool`]), the CPU's vector math ([`cpu::vmath`]), and each GPU's context
//! ([`gpu::context`]) with its memory statistics and the WGSL of every kernel
//! ([`gpu::kernels`]).
//!
//! ```
//! use wgtorch::{backend, Device, Tensor};
//! let x = Tensor::ones([1 << 16], &Device::Cpu)?;
//! assert_eq!(x.sum_all()?.item()?, 65536.0);
//! drop(x); // large host buffers go back to the pool for the next tensor of that size
//! assert!(backend::cpu::pool::cached_bytes() >= 4 << 16);
//! backend::cpu::pool::empty_cache(); // torch.cuda.empty_cache()'s host analogue
//! # Ok::<(), wgtorch::Error>(())
//! ```

pub mod cpu;
pub mod gpu;

use crate::ops::{BinaryOp, ConvGeom, ReduceOp, UnaryOp};
use crate::shape::Layout;
use crate::{DType, Result};
use cpu::CpuStorage;
use gpu::GpuStorage;

/// A tensor's data: host vector or GPU buffer.
#[derive(Clone, Debug)]
pub enum Storage {
    /// Host memory.
    Cpu(CpuStorage),
    /// A pooled GPU buffer.
    Gpu(GpuStorage),
}

macro_rules! both {
    ($x:expr, $c:ident => $cpu:expr, $g:ident => $gpu:expr) => {
        match $x {
            Storage::Cpu($c) => Ok(Storage::Cpu($cpu)),
            Storage::Gpu($g) => Ok(Storage::Gpu($gpu?)),
        }
    };
}

/// The host storage of an operand the op layer placed on the CPU.
fn on_cpu(s: &Storage) -> &CpuStorage {
    match s {
        Storage::Cpu(c) => c,
        Storage::Gpu(_) => unreachable!("devices checked by the op layer"),
    }
}
/// The GPU storage of an operand the op layer placed on a GPU.
fn on_gpu(s: &Storage) -> &GpuStorage {
    match s {
        Storage::Gpu(g) => g,
        Storage::Cpu(_) => unreachable!("devices checked by the op layer"),
    }
}
fn pair<'a>(a: &'a Storage, b: &'a Storage) -> (&'a CpuStorage, &'a CpuStorage) {
    (on_cpu(a), on_cpu(b))
}
fn gpair<'a>(a: &'a Storage, b: &'a Storage) -> (&'a GpuStorage, &'a GpuStorage) {
    (on_gpu(a), on_gpu(b))
}

/// The scalars of one fused SGD step ([`Storage::sgd`]), as f32, the dtype the tensor ops
/// convert them to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SgdStep {
    pub lr: f32,
    pub momentum: f32,
    /// `1 - dampening`.
    pub undamped: f32,
    pub weight_decay: f32,
    pub nesterov: bool,
    /// The momentum buffer's first step: it becomes the gradient.
    pub first: bool,
}

/// What a forward convolution applies to each output element before storing it: `conv + bias`,
/// then `+ residual` (a dense tensor of the output's shape and dtype), then `relu`. ONNX import
/// fuses a convolution's following residual `Add` and `Relu` so: on the CPU in the output's
/// copy-out, on a GPU (f32 only) in the convolution kernel's last launch, instead of two more
/// passes over the output.
pub(crate) struct ConvEpilogue<'a, R = Storage> {
    /// Added to the output.
    pub residual: Option<&'a R>,
    /// `max(y, 0)` last, NaN and -0 kept (as `relu`).
    pub relu: bool,
}

impl<R> Clone for ConvEpilogue<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for ConvEpilogue<'_, R> {}
impl<R> Default for ConvEpilogue<'_, R> {
    fn default() -> Self {
        ConvEpilogue {
            residual: None,
            relu: false,
        }
    }
}

impl<'a, R> ConvEpilogue<'a, R> {
    /// The same epilogue over another form of the residual.
    pub(crate) fn map<S>(self, f: impl FnOnce(&'a R) -> &'a S) -> ConvEpilogue<'a, S> {
        ConvEpilogue {
            residual: self.residual.map(f),
            relu: self.relu,
        }
    }
}

impl Storage {
    /// Where the storage lives and the bytes it holds (a GPU buffer's pooled size class).
    pub(crate) fn footprint(&self) -> (crate::Device, usize) {
        match self {
            Storage::Cpu(c) => (crate::Device::Cpu, c.len() * c.dtype().size_in_bytes()),
            Storage::Gpu(g) => (crate::Device::Gpu(g.buf.ctx.ordinal), g.buf.class as usize),
        }
    }

    /// The element type held.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(c) => c.dtype(),
            Storage::Gpu(g) => g.dtype,
        }
    }

    pub(crate) fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Storage> {
        if let Storage::Cpu(c) = self {
            cpu::reserve(op.name(), c.dtype(), l.numel())?;
        }
        both!(self, c => cpu::unary(op, c, l), g => gpu::unary(op, g, l))
    }
    pub(crate) fn binary(
        &self,
        op: BinaryOp,
        al: &Layout,
        b: &Storage,
        bl: &Layout,
    ) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => {
                let (a, b) = pair(self, b);
                if op.divides_integers() && !a.dtype().is_float() && cpu::has_zero(b, bl) {
                    return Err(crate::ops::binary_op::zero_division(op.name()));
                }
                let dtype = if op.is_comparison() {
                    DType::Bool
                } else {
                    a.dtype()
                };
                cpu::reserve(op.name(), dtype, al.numel())?;
                Ok(Storage::Cpu(cpu::binary(op, a, al, b, bl)))
            }
            Storage::Gpu(_) => {
                let (a, b) = gpair(self, b);
                Ok(Storage::Gpu(gpu::binary(op, a, al, b, bl)?))
            }
        }
    }
    /// A fused elementwise program over `inputs` (one device, f32 or, on the CPU, f64; each
    /// view broadcast to the output's shape).
    pub(crate) fn fused(
        p: &crate::ops::fused::FusedProgram,
        inputs: &[(&Storage, &Layout)],
    ) -> Result<Storage> {
        let (first, l0) = inputs[0];
        match first {
            Storage::Cpu(c) => {
                cpu::reserve("fused", c.dtype(), l0.numel())?;
                let ins: Vec<_> = inputs.iter().map(|&(s, l)| (on_cpu(s), l)).collect();
                Ok(Storage::Cpu(cpu::fused(p, &ins)))
            }
            Storage::Gpu(_) => {
                let ins: Vec<_> = inputs.iter().map(|&(s, l)| (on_gpu(s), l)).collect();
                Ok(Storage::Gpu(gpu::fused::fused(p, &ins)?))
            }
        }
    }
    pub(crate) fn where_cond(
        &self,
        cl: &Layout,
        a: &Storage,
        al: &Layout,
        b: &Storage,
        bl: &Layout,
    ) -> Result<Storage> {
        match (self, a, b) {
            (Storage::Cpu(c), Storage::Cpu(a), Storage::Cpu(b)) => {
                cpu::reserve("where", a.dtype(), cl.numel())?;
                Ok(Storage::Cpu(cpu::where_cond(c, cl, a, al, b, bl)))
            }
            (Storage::Gpu(c), Storage::Gpu(a), Storage::Gpu(b)) => {
                Ok(Storage::Gpu(gpu::where_cond(c, cl, a, al, b, bl)?))
            }
            _ => unreachable!("devices checked by the op layer"),
        }
    }
    /// Contiguous copy converted to `to` (`ordinal` names the GPU for errors).
    pub(crate) fn cast(&self, l: &Layout, to: DType, ordinal: usize) -> Result<Storage> {
        if let Storage::Cpu(_) = self {
            cpu::reserve("to_dtype", to, l.numel())?;
        }
        both!(self, c => if c.dtype() == to { cpu::contiguous(c, l) } else { cpu::cast(c, l, to) }, g => gpu::cast(g, l, ordinal, to))
    }
    pub(crate) fn copy_into(&mut self, dl: &Layout, src: &Storage, sl: &Layout) -> Result<()> {
        match (self, src) {
            (Storage::Cpu(d), Storage::Cpu(s)) => {
                cpu::copy_into(d, dl, s, sl);
                Ok(())
            }
            (Storage::Gpu(d), Storage::Gpu(s)) => gpu::copy_into(d, dl, s, sl),
            _ => unreachable!("devices checked by the op layer"),
        }
    }
    pub(crate) fn reduce_rows(&self, op: ReduceOp, rows: usize, n: usize) -> Result<Storage> {
        both!(self, c => cpu::reduce_rows(op, c, rows, n), g => gpu::reduce_rows(op, g, rows, n))
    }
    pub(crate) fn cumsum_rows(&self, rows: usize, n: usize) -> Result<Storage> {
        both!(self, c => cpu::cumsum_rows(c, rows, n), g => gpu::cumsum_rows(g, rows, n))
    }
    /// Whether [`softmax_rows`](Self::softmax_rows) (or, when `backward`,
    /// [`softmax_backward_rows`](Self::softmax_backward_rows)) has a fused kernel for `rows` rows
    /// of `n` of this storage's dtype: asked before making an input contiguous for it.
    pub(crate) fn has_fused_softmax(&self, rows: usize, n: usize, backward: bool) -> bool {
        match self {
            Storage::Cpu(c) => matches!(c.dtype(), DType::F32 | DType::F64),
            Storage::Gpu(g) => gpu::softmax_takes(g, rows, n, if backward { 2 } else { 3 }),
        }
    }
    /// Softmax (log-softmax when `log`) of each row of a contiguous `[rows, n]` input in one
    /// kernel: f32 and f64 on the CPU, f32 rows a GPU takes one invocation each; `None` for the
    /// rest, which the caller composes.
    pub(crate) fn softmax_rows(&self, rows: usize, n: usize, log: bool) -> Result<Option<Storage>> {
        let (op, numel) = (if log { "log_softmax" } else { "softmax" }, rows * n);
        Ok(match self {
            Storage::Cpu(CpuStorage::F32(x)) => {
                cpu::reserve(op, DType::F32, numel)?;
                Some(CpuStorage::F32(cpu::softmax_rows(
                    &x[..numel],
                    rows,
                    n,
                    log,
                )))
            }
            Storage::Cpu(CpuStorage::F64(x)) => {
                cpu::reserve(op, DType::F64, numel)?;
                Some(CpuStorage::F64(cpu::softmax_rows(
                    &x[..numel],
                    rows,
                    n,
                    log,
                )))
            }
            Storage::Cpu(_) => None,
            Storage::Gpu(x) => return Ok(gpu::softmax_rows(x, rows, n, log)?.map(Storage::Gpu)),
        }
        .map(Storage::Cpu))
    }
    /// The input gradient of [`softmax_rows`](Self::softmax_rows) from its output (`self`) and
    /// the output gradient `g`, both contiguous `[rows, n]` of one dtype; `None` where no fused
    /// kernel takes them.
    pub(crate) fn softmax_backward_rows(
        &self,
        g: &Storage,
        rows: usize,
        n: usize,
        log: bool,
    ) -> Result<Option<Storage>> {
        let (op, numel) = (if log { "log_softmax" } else { "softmax" }, rows * n);
        Ok(match (self, g) {
            (Storage::Cpu(CpuStorage::F32(y)), Storage::Cpu(CpuStorage::F32(g))) => {
                cpu::reserve(op, DType::F32, numel)?;
                Some(CpuStorage::F32(cpu::softmax_backward_rows(
                    &y[..numel],
                    &g[..numel],
                    rows,
                    n,
                    log,
                )))
            }
            (Storage::Cpu(CpuStorage::F64(y)), Storage::Cpu(CpuStorage::F64(g))) => {
                cpu::reserve(op, DType::F64, numel)?;
                Some(CpuStorage::F64(cpu::softmax_backward_rows(
                    &y[..numel],
                    &g[..numel],
                    rows,
                    n,
                    log,
                )))
            }
            (Storage::Gpu(y), Storage::Gpu(g)) => {
                return Ok(gpu::softmax_backward_rows(y, g, rows, n, log)?.map(Storage::Gpu))
            }
            _ => None,
        }
        .map(Storage::Cpu))
    }
    /// Cross-entropy's input gradient from the log-softmax output `self` (contiguous
    /// `[t.len(), n]`), each row's target column `t[i] < n` and its gradient `g[i]` (f32/f64 on
    /// the CPU, `g` of `self`'s dtype); `None` elsewhere, where the caller composes it.
    pub(crate) fn log_softmax_at_backward_rows(
        &self,
        t: &[usize],
        g: &Storage,
        n: usize,
    ) -> Result<Option<Storage>> {
        let (op, numel) = ("cross_entropy", t.len() * n);
        debug_assert!(t.iter().all(|&t| t < n));
        Ok(match (self, g) {
            (Storage::Cpu(CpuStorage::F32(y)), Storage::Cpu(CpuStorage::F32(g))) => {
                cpu::reserve(op, DType::F32, numel)?;
                let o = cpu::log_softmax_at_backward_rows(&y[..numel], t, &g[..t.len()], n);
                Some(Storage::Cpu(CpuStorage::F32(o)))
            }
            (Storage::Cpu(CpuStorage::F64(y)), Storage::Cpu(CpuStorage::F64(g))) => {
                cpu::reserve(op, DType::F64, numel)?;
                let o = cpu::log_softmax_at_backward_rows(&y[..numel], t, &g[..t.len()], n);
                Some(Storage::Cpu(CpuStorage::F64(o)))
            }
            _ => None,
        })
    }
    /// nll_loss's `(loss, weight, kept target)` of each row of contiguous f32 log-probabilities
    /// `[rows, n]` at its target in one GPU kernel (`gpu::nll_rows`); `None` on the CPU and on
    /// adapters with too few storage bindings, where the caller composes it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn nll_rows(
        &self,
        op: &'static str,
        rows: usize,
        n: usize,
        target: &Storage,
        weight: Option<&Storage>,
        ignore: Option<i32>,
    ) -> Result<Option<(Storage, Storage, Storage)>> {
        let gpu_of = |s: &Storage| match s {
            Storage::Gpu(g) => Ok(g.clone()),
            Storage::Cpu(_) => Err(crate::Error::msg(format!(
                "{op}: operands on different devices"
            ))),
        };
        let Storage::Gpu(logp) = self else {
            return Ok(None);
        };
        let weight = weight.map(gpu_of).transpose()?;
        let rows_of = gpu::nll_rows(op, logp, rows, n, &gpu_of(target)?, weight.as_ref(), ignore)?;
        let gpu = Storage::Gpu;
        Ok(rows_of.map(|(loss, wt, kept)| (gpu(loss), gpu(wt), gpu(kept))))
    }
    /// The gradient of [`Storage::nll_rows`]'s loss (`self`: the loss's gradient, `[rows]`) with
    /// respect to the `[rows, n]` log-probabilities, from the rows' weights and kept targets.
    pub(crate) fn nll_rows_backward(
        &self,
        op: &'static str,
        kept: &Storage,
        wt: &Storage,
        rows: usize,
        n: usize,
    ) -> Result<Storage> {
        match (self, kept, wt) {
            (Storage::Gpu(g), Storage::Gpu(k), Storage::Gpu(w)) => {
                Ok(Storage::Gpu(gpu::nll_rows_backward(op, k, w, g, rows, n)?))
            }
            _ => Err(crate::Error::msg(format!(
                "{op}: the gradient of the GPU's loss rows takes GPU storages"
            ))),
        }
    }
    /// Indices that sort each row of a contiguous `[rows, n]` input (stable; int32).
    pub(crate) fn argsort_rows(&self, rows: usize, n: usize, descending: bool) -> Result<Storage> {
        both!(self, c => cpu::argsort_rows(c, rows, n, descending)?, g => gpu::argsort_rows(g, rows, n, descending))
    }
    pub(crate) fn matmul(&self, al: &Layout, b: &Storage, bl: &Layout) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => {
                let (a, b) = pair(self, b);
                // The op layer checked that the [B, M, N] product fits a shape.
                let n = al.shape[0] * al.shape[1] * bl.shape[2];
                cpu::reserve("matmul", a.dtype(), n)?;
                Ok(Storage::Cpu(cpu::matmul(a, al, b, bl)))
            }
            Storage::Gpu(_) => {
                let (a, b) = gpair(self, b);
                Ok(Storage::Gpu(gpu::matmul(a, al, b, bl)?))
            }
        }
    }
    /// `self.gather(dim, idx)`; an out-of-range index is an error named after `op` (on a GPU,
    /// reported at the next readback).
    pub(crate) fn gather(
        &self,
        op: &'static str,
        xshape: &[usize],
        dim: usize,
        idx: &Storage,
        il: &Layout,
    ) -> Result<Storage> {
        match (self, idx) {
            (Storage::Cpu(x), Storage::Cpu(i)) => {
                cpu::reserve(op, x.dtype(), il.numel())?;
                Ok(Storage::Cpu(cpu::gather_any(op, x, xshape, dim, i, il)?))
            }
            (Storage::Gpu(x), Storage::Gpu(i)) => {
                Ok(Storage::Gpu(gpu::gather(op, x, xshape, dim, i, il)?))
            }
            _ => unreachable!("devices and index dtype checked by the op layer"),
        }
    }
    /// `self.scatter_add(dim, idx, src)`; index errors as in `gather`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scatter_add(
        &self,
        op: &'static str,
        bshape: &[usize],
        dim: usize,
        idx: &Storage,
        il: &Layout,
        src: &Storage,
        sl: &Layout,
    ) -> Result<Storage> {
        match (self, idx, src) {
            (Storage::Cpu(b), Storage::Cpu(i), Storage::Cpu(s)) => {
                let mut out = b.clone();
                cpu::scatter_add_any(op, &mut out, bshape, dim, i, il, s, sl)?;
                Ok(Storage::Cpu(out))
            }
            (Storage::Gpu(b), Storage::Gpu(i), Storage::Gpu(s)) => Ok(Storage::Gpu(
                gpu::scatter_add(op, b, bshape, dim, i, il, s, sl)?,
            )),
            _ => unreachable!("devices and index dtype checked by the op layer"),
        }
    }
    pub(crate) fn im2col(&self, g: &ConvGeom, pad: f64) -> Result<Storage> {
        if let Storage::Cpu(c) = self {
            // ConvGeom checked that [N, C, kh, kw, Ho, Wo] fits a shape.
            let n = g.n * g.c * g.kh * g.kw * g.ho * g.wo;
            cpu::reserve("im2col", c.dtype(), n)?;
        }
        both!(self, c => cpu::im2col(c, g, pad), s => gpu::im2col(s, g, pad))
    }
    /// Fused SGD step in place on `self` (the parameter) and, with momentum, its buffer `buf`;
    /// all f32 on one device, `n` elements.
    pub(crate) fn sgd(
        &mut self,
        g: &Storage,
        buf: Option<&mut Storage>,
        n: usize,
        h: SgdStep,
    ) -> Result<()> {
        let refused = || crate::Error::msg("sgd: the fused step takes f32 storages on one device");
        match (self, g, buf) {
            (Storage::Cpu(CpuStorage::F32(p)), Storage::Cpu(CpuStorage::F32(g)), b) => {
                let b = match b {
                    Some(Storage::Cpu(CpuStorage::F32(b))) => Some(&mut b[..n]),
                    None => None,
                    Some(_) => return Err(refused()),
                };
                cpu::sgd(&mut p[..n], &g[..n], b, h);
                Ok(())
            }
            (Storage::Gpu(p), Storage::Gpu(g), b) => {
                let b = match b {
                    Some(Storage::Gpu(b)) => Some(&*b),
                    None => None,
                    Some(_) => return Err(refused()),
                };
                gpu::sgd(p, g, b, n, h)
            }
            _ => Err(refused()),
        }
    }
    /// Fused Adam/AdamW step in place on `self` (the parameter), `m` and `v`; all f32, `n` elements.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn adam(
        &mut self,
        g: &Storage,
        m: &mut Storage,
        v: &mut Storage,
        n: usize,
        h: [f32; 7],
        decoupled: bool,
    ) -> Result<()> {
        match (self, g, m, v) {
            (
                Storage::Cpu(CpuStorage::F32(p)),
                Storage::Cpu(CpuStorage::F32(g)),
                Storage::Cpu(CpuStorage::F32(m)),
                Storage::Cpu(CpuStorage::F32(v)),
            ) => {
                cpu::adam(&mut p[..n], &g[..n], &mut m[..n], &mut v[..n], h, decoupled);
                Ok(())
            }
            (Storage::Gpu(p), Storage::Gpu(g), Storage::Gpu(m), Storage::Gpu(v)) => {
                gpu::adam(p, g, m, v, n, h, decoupled)
            }
            _ => unreachable!("checked by the optimizer: one device, f32"),
        }
    }
    /// Max pooling: the maxima and, when `indices` (always on the GPU, whose kernel writes
    /// both), each window's argmax.
    pub(crate) fn max_pool(
        &self,
        g: &ConvGeom,
        indices: bool,
    ) -> Result<(Storage, Option<Storage>)> {
        match self {
            Storage::Cpu(c) => {
                cpu::reserve("max_pool2d", c.dtype(), g.n * g.c * g.ho * g.wo)?;
                let (v, i) = cpu::max_pool(c, g, indices);
                Ok((Storage::Cpu(v), i.map(Storage::Cpu)))
            }
            Storage::Gpu(s) => {
                let (v, i) = gpu::max_pool(s, g)?;
                Ok((Storage::Gpu(v), Some(Storage::Gpu(i))))
            }
        }
    }
    pub(crate) fn max_pool_backward(&self, idx: &Storage, g: &ConvGeom) -> Result<Storage> {
        match (self, idx) {
            (Storage::Cpu(c), Storage::Cpu(CpuStorage::I32(i))) => {
                Ok(Storage::Cpu(cpu::max_pool_backward(c, i, g)))
            }
            (Storage::Gpu(s), Storage::Gpu(i)) => {
                Ok(Storage::Gpu(gpu::max_pool_backward(s, i, g)?))
            }
            _ => unreachable!("devices checked by the op layer"),
        }
    }
    /// Convolution of `self` `[N, C, H, W]` with `w` `[O, C, kh, kw]` plus `bias` `[O]` (all dense),
    /// then the epilogue (its residual dense, of the output's shape and dtype).
    pub(crate) fn conv2d(
        &self,
        w: &Storage,
        bias: Option<&Storage>,
        epi: ConvEpilogue<'_>,
        g: &ConvGeom,
        o: usize,
    ) -> Result<Storage> {
        match (self, w) {
            (Storage::Cpu(x), Storage::Cpu(w)) => {
                cpu::reserve("conv2d", x.dtype(), g.n * o * g.ho * g.wo)?;
                let b = bias.map(|b| pair(b, b).0);
                let epi = epi.map(|r| pair(r, r).0);
                Ok(Storage::Cpu(cpu::conv2d(x, w, b, epi, g, o)))
            }
            (Storage::Gpu(x), Storage::Gpu(w)) => {
                let b = bias.map(|b| gpair(b, b).0);
                let epi = epi.map(|r| gpair(r, r).0);
                Ok(Storage::Gpu(gpu::conv2d(x, w, b, epi, g, o)?))
            }
            _ => unreachable!("devices checked by the op layer"),
        }
    }
    /// conv2d's input gradient from `self` (the output gradient) and the weight.
    pub(crate) fn conv2d_backward_input(
        &self,
        w: &Storage,
        g: &ConvGeom,
        o: usize,
    ) -> Result<Storage> {
        match (self, w) {
            (Storage::Cpu(gy), Storage::Cpu(w)) => {
                Ok(Storage::Cpu(cpu::conv2d_backward_input(gy, w, g, o)))
            }
            (Storage::Gpu(gy), Storage::Gpu(w)) => {
                Ok(Storage::Gpu(gpu::conv2d_backward_input(gy, w, g, o)?))
            }
            _ => unreachable!("devices checked by the op layer"),
        }
    }
    /// conv2d's weight gradient from `self` (the output gradient) and the input.
    pub(crate) fn conv2d_backward_weight(
        &self,
        x: &Storage,
        g: &ConvGeom,
        o: usize,
    ) -> Result<Storage> {
        match (self, x) {
            (Storage::Cpu(gy), Storage::Cpu(x)) => {
                Ok(Storage::Cpu(cpu::conv2d_backward_weight(gy, x, g, o)))
            }
            (Storage::Gpu(gy), Storage::Gpu(x)) => {
                Ok(Storage::Gpu(gpu::conv2d_backward_weight(gy, x, g, o)?))
            }
            _ => unreachable!("devices checked by the op layer"),
        }
    }
    pub(crate) fn col2im(&self, g: &ConvGeom) -> Result<Storage> {
        both!(self, c => cpu::col2im(c, g), s => gpu::col2im(s, g))
    }
}
