//! The LSTM cell as one op: `(h', c') = lstm_cell(xs + hh, c)` with PyTorch's gate order
//! (i, f, g, o). A fused kernel each way on the CPU for f32/f64; the composite of tensor ops on
//! a GPU, for other dtypes, and for the gradient under `create_graph`.

use crate::autograd::{is_grad_enabled, record, Saved};
use crate::backend::{cpu, cpu::CpuElem, cpu::CpuStorage, Storage};
use crate::dtype::Real;
use crate::{DType, Result, Tensor};

/// One LSTM step from the input projection `xs` and the recurrent projection `hh` (both
/// `[B, 4H]`, biases included) and the cell state `c` (`[B, H]`): the new `(h, c)`.
pub(crate) fn lstm_cell(xs: &Tensor, hh: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
    let fused = !xs.device().is_gpu()
        && matches!(xs.dtype(), DType::F32 | DType::F64)
        && hh.dtype() == xs.dtype()
        && c.dtype() == xs.dtype()
        && !hh.device().is_gpu()
        && !c.device().is_gpu()
        && xs.ndim() == 2
        && hh.shape() == xs.shape()
        && c.ndim() == 2
        && c.shape()[0] == xs.shape()[0]
        && c.shape()[1] * 4 == xs.shape()[1];
    if !fused {
        return composite(&xs.add(hh)?, c);
    }
    let (b, h) = (c.shape()[0], c.shape()[1]);
    let (x, y, cd) = (
        xs.detach().dense()?,
        hh.detach().dense()?,
        c.detach().dense()?,
    );
    let dev = xs.device();
    let out = {
        let (xs_, ys_, cs_) = (x.storage(), y.storage(), cd.storage());
        match (&*xs_, &*ys_, &*cs_) {
            (Storage::Cpu(a), Storage::Cpu(bb), Storage::Cpu(cc)) => match xs.dtype() {
                DType::F32 => forward::<f32>(a, bb, cc, b, h),
                _ => forward::<f64>(a, bb, cc, b, h),
            },
            _ => None,
        }
    };
    let Some((hc, act)) = out else {
        return composite(&xs.add(hh)?, c);
    };
    let hc = Tensor::from_storage(Storage::Cpu(hc), &[2, b, h], dev);
    let act = Tensor::from_storage(Storage::Cpu(act), &[b, 4 * h], dev);
    let saved = (
        Saved::new(xs),
        Saved::new(hh),
        Saved::new(c),
        Saved::new(&act),
        Saved::output(&hc, "lstm_cell"),
    );
    let hc = record(hc, "lstm_cell", &[xs, hh, c], saved, |s, g| {
        let (xs, hh, c, act, hc) = s;
        let (dgates, dc) = if is_grad_enabled() {
            composite_backward(&xs.get()?.add(&hh.get()?)?, &c.get()?, g)?
        } else {
            fused_backward(&act.get()?, &c.get()?, &hc.get()?, g)?
        };
        Ok(vec![Some(dgates.clone()), Some(dgates), Some(dc)])
    });
    let half = |k: usize| hc.narrow(0, k, 1)?.squeeze_dim(0);
    Ok((half(0)?, half(1)?))
}

fn forward<T: Real + CpuElem>(
    xs: &CpuStorage,
    hh: &CpuStorage,
    c: &CpuStorage,
    b: usize,
    h: usize,
) -> Option<(CpuStorage, CpuStorage)> {
    let (xs, hh, c) = (
        cpu::head(xs, b * 4 * h)?,
        cpu::head(hh, b * 4 * h)?,
        cpu::head(c, b * h)?,
    );
    let mut hc = vec![T::zero(); 2 * b * h];
    let mut act = vec![T::zero(); 4 * b * h];
    cpu::lstm_cell_rows(xs, hh, c, &mut hc, &mut act, b, h);
    Some((T::wrap(hc), T::wrap(act)))
}

/// The fused gradient: `(dgates, dc)` from the activations, the input state, the output
/// `[h', c']` and its gradient.
fn fused_backward(act: &Tensor, c: &Tensor, hc: &Tensor, g: &Tensor) -> Result<(Tensor, Tensor)> {
    let (b, h) = (c.shape()[0], c.shape()[1]);
    let (c, g) = (c.detach().dense()?, g.to_dtype(act.dtype())?.dense()?);
    let (a_, c_, hc_, g_) = (act.storage(), c.storage(), hc.storage(), g.storage());
    let grads = match (&*a_, &*c_, &*hc_, &*g_) {
        (Storage::Cpu(a), Storage::Cpu(cc), Storage::Cpu(o), Storage::Cpu(gg)) => {
            match act.dtype() {
                DType::F32 => backward::<f32>(a, cc, o, gg, b, h),
                _ => backward::<f64>(a, cc, o, gg, b, h),
            }
        }
        _ => None,
    };
    let (dg, dc) = grads.ok_or_else(|| {
        crate::Error::msg("lstm_cell backward: the fused kernel takes f32/f64 CPU tensors")
    })?;
    let dev = act.device();
    Ok((
        Tensor::from_storage(Storage::Cpu(dg), &[b, 4 * h], dev),
        Tensor::from_storage(Storage::Cpu(dc), &[b, h], dev),
    ))
}

fn backward<T: Real + CpuElem>(
    act: &CpuStorage,
    c: &CpuStorage,
    hc: &CpuStorage,
    g: &CpuStorage,
    b: usize,
    h: usize,
) -> Option<(CpuStorage, CpuStorage)> {
    let (act, c) = (cpu::head::<T>(act, 4 * b * h)?, cpu::head::<T>(c, b * h)?);
    let (hc, g) = (
        cpu::head::<T>(hc, 2 * b * h)?,
        cpu::head::<T>(g, 2 * b * h)?,
    );
    let mut dgates = vec![T::zero(); 4 * b * h];
    let mut dc = vec![T::zero(); b * h];
    cpu::lstm_cell_backward_rows(g, act, c, &hc[b * h..], &mut dgates, &mut dc, b, h);
    Some((T::wrap(dgates), T::wrap(dc)))
}

/// The cell from tensor ops (any device and dtype): `gates` `[B, 4H]`, `c` `[B, H]`.
pub(super) fn composite(gates: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
    let [i, f, gg, o] = activations(gates)?;
    let c2 = f.mul(c)?.add(&i.mul(&gg)?)?;
    let h2 = o.mul(&c2.tanh()?)?;
    Ok((h2, c2))
}

/// The gate activations `[σ(i), σ(f), tanh(g), σ(o)]` from the pre-activations `[B, 4H]`.
fn activations(gates: &Tensor) -> Result<[Tensor; 4]> {
    let g = gates.chunk(4, 1)?;
    Ok([
        g[0].sigmoid()?,
        g[1].sigmoid()?,
        g[2].tanh()?,
        g[3].sigmoid()?,
    ])
}

/// The cell's gradient written with tensor ops (differentiable, for `create_graph`), from the
/// gradient `g` of `[h', c']`.
pub(super) fn composite_backward(
    gates: &Tensor,
    c: &Tensor,
    g: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let [i, f, gg, o] = activations(gates)?;
    let c2 = f.mul(c)?.add(&i.mul(&gg)?)?;
    let tc = c2.tanh()?;
    let (dh, dc2) = (
        g.narrow(0, 0, 1)?.squeeze_dim(0)?,
        g.narrow(0, 1, 1)?.squeeze_dim(0)?,
    );
    let dct = dc2.add(&dh.mul(&o)?.tanh_backward(&tc)?)?;
    let di = dct.mul(&gg)?.sigmoid_backward(&i)?;
    let df = dct.mul(c)?.sigmoid_backward(&f)?;
    let dg = dct.mul(&i)?.tanh_backward(&gg)?;
    let d_o = dh.mul(&tc)?.sigmoid_backward(&o)?;
    Ok((Tensor::cat(&[di, df, dg, d_o], 1)?, dct.mul(&f)?))
}
