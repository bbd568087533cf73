//! One LSTM layer in one direction over a whole sequence as one op: `nn::LSTM` and the ONNX
//! `LSTM` node both run it. On the CPU (f32/f64) a fused kernel steps through time and its
//! backward computes `W_hh`'s gradient as one GEMM over every step, where the step-by-step
//! graph would record a matmul per step and add the per-step weight gradients one by one. Other
//! devices and dtypes, and empty tensors, run the steps as [`lstm_cell`] ops.

use super::rnn_cell::{composite, composite_backward, lstm_cell};
use crate::autograd::{is_grad_enabled, record, Saved};
use crate::backend::cpu::{self, CpuElem, CpuStorage, Gemm, LstmDims};
use crate::backend::Storage;
use crate::dtype::Real;
use crate::{DType, Result, Tensor};

/// The layer from the input projections `xi` (`[T, B, 4H]`, both biases included, gates i, f,
/// g, o), the recurrent weight `w_hh` (`[4H, H]`) and the initial state `h0`, `c0` (`[B, H]`),
/// stepping from the last step to the first when `reverse`: the outputs (`[T, B, H]`, in time
/// order) and the final `(h, c)`.
pub(crate) fn lstm_layer(
    xi: &Tensor,
    w_hh: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    reverse: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let _p = crate::profiler::op("lstm", &[xi, w_hh, h0, c0]);
    let fits = xi.ndim() == 3
        && h0.ndim() == 2
        && c0.shape() == h0.shape()
        && h0.shape()[0] == xi.shape()[1]
        && Some(xi.shape()[2]) == h0.shape()[1].checked_mul(4)
        && w_hh.shape() == [xi.shape()[2], h0.shape()[1]];
    if !fits {
        return Err(crate::Error::shape(
            "LSTM",
            format!(
                "a layer takes input projections [T, B, 4H], W_hh [4H, H] and states [B, H], got \
                 {:?}, {:?}, h0 {:?} and c0 {:?}",
                xi.shape(),
                w_hh.shape(),
                h0.shape(),
                c0.shape()
            ),
        ));
    }
    let dt = xi.dtype();
    let fused = matches!(dt, DType::F32 | DType::F64)
        && [xi, w_hh, h0, c0]
            .iter()
            .all(|t| !t.device().is_gpu() && t.dtype() == dt)
        && xi.shape().iter().all(|&n| n > 0);
    if !fused {
        return by_steps(xi, w_hh, h0, c0, reverse);
    }
    let d = LstmDims {
        t: xi.shape()[0],
        b: h0.shape()[0],
        h: h0.shape()[1],
        reverse,
    };
    let dense = |t: &Tensor| t.detach().dense();
    let (x, w, h, c) = (dense(xi)?, dense(w_hh)?, dense(h0)?, dense(c0)?);
    let out = {
        let (x, w, h, c) = (x.storage(), w.storage(), h.storage(), c.storage());
        match (&*x, &*w, &*h, &*c) {
            (Storage::Cpu(x), Storage::Cpu(w), Storage::Cpu(h), Storage::Cpu(c)) => match dt {
                DType::F32 => forward::<f32>([x, w, h, c], d),
                _ => forward::<f64>([x, w, h, c], d),
            },
            _ => None,
        }
    };
    let Some([y, cs, act]) = out else {
        return by_steps(xi, w_hh, h0, c0, reverse);
    };
    let dev = xi.device();
    let (t, b, hs) = (d.t, d.b, d.h);
    let y = Tensor::from_storage(Storage::Cpu(y), &[t + 2, b, hs], dev);
    let cs = Tensor::from_storage(Storage::Cpu(cs), &[t, b, hs], dev);
    let act = Tensor::from_storage(Storage::Cpu(act), &[t, b, 4 * hs], dev);
    let saved = (
        [xi, w_hh, h0, c0].map(Saved::new),
        [Saved::output(&y, "lstm"), Saved::new(&cs), Saved::new(&act)],
        reverse,
    );
    let y = record(y, "lstm", &[xi, w_hh, h0, c0], saved, |s, g| {
        let (inputs, states, reverse) = s;
        let [xi, w, h0, c0] = [&inputs[0], &inputs[1], &inputs[2], &inputs[3]].map(Saved::get);
        let grads = if is_grad_enabled() {
            composite_layer_backward(&xi?, &w?, &h0?, &c0?, *reverse, g)?
        } else {
            let [y, cs, act] = [&states[0], &states[1], &states[2]].map(Saved::get);
            fused_backward([&y?, &cs?, &act?], [&w?, &h0?, &c0?], g, *reverse)?
        };
        Ok(grads.into_iter().map(Some).collect())
    });
    Ok((
        y.narrow(0, 0, t)?,
        y.select(0, t as i64)?,
        y.select(0, t as i64 + 1)?,
    ))
}

/// [`cpu::lstm_layer_rows`] on dense storages `[xi, w_hh, h0, c0]`: `[y, cs, act]`.
fn forward<T: Real + Gemm + CpuElem>(
    [x, w, h, c]: [&CpuStorage; 4],
    d: LstmDims,
) -> Option<[CpuStorage; 3]> {
    let (bh, g4) = (d.b * d.h, d.b * 4 * d.h);
    let x = cpu::head::<T>(x, d.t * g4)?;
    let w = cpu::head::<T>(w, 4 * d.h * d.h)?;
    let (h, c) = (cpu::head::<T>(h, bh)?, cpu::head::<T>(c, bh)?);
    let mut y = vec![T::zero(); (d.t + 2) * bh];
    let mut cs = vec![T::zero(); d.t * bh];
    let mut act = vec![T::zero(); d.t * g4];
    cpu::lstm_layer_rows(x, w, h, c, &mut y, &mut cs, &mut act, d);
    Some([T::wrap(y), T::wrap(cs), T::wrap(act)])
}

/// The fused gradient `[dxi, dw_hh, dh0, dc0]` from the forward's `[y, cs, act]`, its inputs
/// `[w_hh, h0, c0]` and the gradient `g` of `y`.
fn fused_backward(
    [y, cs, act]: [&Tensor; 3],
    [w, h0, c0]: [&Tensor; 3],
    g: &Tensor,
    reverse: bool,
) -> Result<Vec<Tensor>> {
    let (t, b, h) = (cs.shape()[0], cs.shape()[1], cs.shape()[2]);
    let d = LstmDims { t, b, h, reverse };
    let dense = |t: &Tensor| t.detach().dense();
    let (g, w, h0, c0) = (
        g.to_dtype(y.dtype())?.dense()?,
        dense(w)?,
        dense(h0)?,
        dense(c0)?,
    );
    let s = [&g, y, cs, act, &w, &h0, &c0].map(|t| t.storage());
    let grads = match [&*s[0], &*s[1], &*s[2], &*s[3], &*s[4], &*s[5], &*s[6]] {
        [Storage::Cpu(g), Storage::Cpu(y), Storage::Cpu(cs), Storage::Cpu(act), Storage::Cpu(w), Storage::Cpu(h0), Storage::Cpu(c0)] =>
        {
            let all = [g, y, cs, act, w, h0, c0];
            match y.dtype() {
                DType::F32 => backward::<f32>(all, d),
                _ => backward::<f64>(all, d),
            }
        }
        _ => None,
    };
    let [dxi, dw, dh0, dc0] = grads.ok_or_else(|| {
        crate::Error::msg("lstm backward: the fused kernel takes f32/f64 CPU tensors")
    })?;
    let dev = y.device();
    let wrap = |s: CpuStorage, shape: &[usize]| Tensor::from_storage(Storage::Cpu(s), shape, dev);
    Ok(vec![
        wrap(dxi, &[t, b, 4 * h]),
        wrap(dw, &[4 * h, h]),
        wrap(dh0, &[b, h]),
        wrap(dc0, &[b, h]),
    ])
}

/// [`cpu::lstm_layer_backward_rows`] on dense storages `[g, y, cs, act, w_hh, h0, c0]`.
fn backward<T: Real + Gemm + CpuElem>(
    [g, y, cs, act, w, h0, c0]: [&CpuStorage; 7],
    d: LstmDims,
) -> Option<[CpuStorage; 4]> {
    let (bh, g4) = (d.b * d.h, d.b * 4 * d.h);
    let g = cpu::head::<T>(g, (d.t + 2) * bh)?;
    let (y, cs) = (
        cpu::head::<T>(y, (d.t + 2) * bh)?,
        cpu::head::<T>(cs, d.t * bh)?,
    );
    let act = cpu::head::<T>(act, d.t * g4)?;
    let w = cpu::head::<T>(w, 4 * d.h * d.h)?;
    let (h0, c0) = (cpu::head::<T>(h0, bh)?, cpu::head::<T>(c0, bh)?);
    let mut dxi = vec![T::zero(); d.t * g4];
    let mut dw = vec![T::zero(); 4 * d.h * d.h];
    let (mut dh0, mut dc0) = (vec![T::zero(); bh], vec![T::zero(); bh]);
    cpu::lstm_layer_backward_rows(
        g,
        (y, cs, act),
        (w, h0, c0),
        &mut dxi,
        &mut dw,
        &mut dh0,
        &mut dc0,
        d,
    );
    Some([dxi, dw, dh0, dc0].map(T::wrap))
}

/// The layer as [`lstm_cell`] ops, one step at a time (any device and dtype, empty tensors);
/// shapes checked by [`lstm_layer`].
fn by_steps(
    xi: &Tensor,
    w_hh: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    reverse: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let t = xi.shape()[0];
    let w_t = w_hh.t()?;
    let (mut h, mut c) = (h0.clone(), c0.clone());
    let mut outs = vec![None; t];
    for p in 0..t {
        let s = cpu::step_index(t, p, reverse);
        let (h2, c2) = lstm_cell(&xi.select(0, s as i64)?, &h.matmul(&w_t)?, &c)?;
        (h, c) = (h2, c2);
        outs[s] = Some(h.clone());
    }
    let outs: Vec<Tensor> = outs.into_iter().flatten().collect();
    let out = if outs.is_empty() {
        Tensor::zeros([0, h0.shape()[0], h0.shape()[1]], &h0.device())?.to_dtype(h0.dtype())?
    } else {
        Tensor::stack(&outs, 0)?
    };
    Ok((out, h, c))
}

/// The layer's gradient written with tensor ops (differentiable, for `create_graph`): the
/// forward recomputed from the saved inputs, then back through the steps with the cell's
/// composite gradient. `[dxi, dw_hh, dh0, dc0]` from the gradient `g` of `y`.
fn composite_layer_backward(
    xi: &Tensor,
    w: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    reverse: bool,
    g: &Tensor,
) -> Result<Vec<Tensor>> {
    let g = &g.to_dtype(xi.dtype())?;
    let t = xi.shape()[0];
    let w_t = w.t()?;
    let (mut h, mut c) = (h0.clone(), c0.clone());
    // (gates, c_prev, h_prev) of every step, in the order run.
    let mut states = Vec::with_capacity(t);
    for p in 0..t {
        let gates = xi.select(0, cpu::step_index(t, p, reverse) as i64)?;
        let gates = gates.add(&h.matmul(&w_t)?)?;
        let (h2, c2) = composite(&gates, &c)?;
        states.push((gates, c, h));
        (h, c) = (h2, c2);
    }
    let (mut dh, mut dc) = (g.select(0, t as i64)?, g.select(0, t as i64 + 1)?);
    // Each step's gate gradient and h_prev, in time order.
    let (mut dgates, mut h_prevs) = (vec![None; t], vec![None; t]);
    for (p, (gates, c_prev, h_prev)) in states.into_iter().enumerate().rev() {
        let s = cpu::step_index(t, p, reverse);
        let ghc = Tensor::stack(&[g.select(0, s as i64)?.add(&dh)?, dc], 0)?;
        let (dg, dcp) = composite_backward(&gates, &c_prev, &ghc)?;
        dh = dg.matmul(w)?;
        dc = dcp;
        (dgates[s], h_prevs[s]) = (Some(dg), Some(h_prev));
    }
    let stacked =
        |v: Vec<Option<Tensor>>| Tensor::stack(&v.into_iter().flatten().collect::<Vec<_>>(), 0);
    let (dgates, h_prevs) = (stacked(dgates)?, stacked(h_prevs)?);
    // W_hh's gradient over every step at once, as the fused kernel computes it.
    let rows = |m: &Tensor| m.reshape([-1, m.shape()[2] as isize]);
    let dw = rows(&dgates)?.t()?.matmul(&rows(&h_prevs)?)?;
    Ok(vec![dgates, dw, dh, dc])
}
