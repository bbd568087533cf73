//! `LSTM` and `GRU`: forward, reverse or bidirectional, with ONNX's gate orders (LSTM i, o, f,
//! c; GRU z, r, h), both layouts, initial states, and equal sequence lengths. The input
//! projection of every step is one matmul; an LSTM direction is then one `lstm_layer` op (the
//! fused CPU kernel over the whole sequence, or the cell step by step), a GRU step the gate
//! arithmetic, so the result is differentiable.

use super::{need, show, Ctx, Dim, Info, OpDef};
use crate::{Result, Tensor};

/// The node's checked configuration.
struct Rnn {
    hidden: usize,
    directions: usize,
    reverse_only: bool,
    batch_first: bool,
}

fn config(ctx: &Ctx, gates: usize, default_acts: &[&str]) -> Result<Rnn> {
    let hidden = ctx.i("hidden_size", 0)?;
    if hidden < 1 {
        return Err(ctx.err("hidden_size must be given and positive"));
    }
    let direction = ctx.s("direction", "forward")?;
    let (directions, reverse_only) = match direction.as_str() {
        "forward" => (1, false),
        "reverse" => (1, true),
        "bidirectional" => (2, false),
        d => {
            return Err(ctx.err(format!(
                "direction '{d}' is not forward, reverse or bidirectional"
            )))
        }
    };
    if let Some(acts) = ctx.strings("activations")? {
        let want: Vec<&str> = default_acts
            .iter()
            .cycle()
            .take(default_acts.len() * directions)
            .copied()
            .collect();
        if acts.iter().map(String::as_str).ne(want.iter().copied()) {
            return Err(ctx.err(format!(
                "activations {acts:?} are not supported (only the defaults {want:?})"
            )));
        }
    }
    if ctx.node.attrs.iter().any(|a| a.name() == "clip") {
        return Err(ctx.err("clip is not supported"));
    }
    if ctx.i("input_forget", 0)? != 0 {
        return Err(ctx.err("input_forget = 1 is not supported"));
    }
    if gates == 4 && ctx.has_input(7) {
        return Err(ctx.err("peephole weights (input P) are not supported"));
    }
    Ok(Rnn {
        hidden: hidden as usize,
        directions,
        reverse_only,
        batch_first: ctx.i("layout", 0)? != 0,
    })
}

fn infer(ctx: &Ctx, xs: &[Option<&Info>], gates: usize, acts: &[&str]) -> Result<Vec<Info>> {
    let c = config(ctx, gates, acts)?;
    let x = need(ctx, xs, 0)?;
    super::float_input(ctx, x)?;
    let (seq, batch, input): (Dim, Dim, Dim) = match &x.shape {
        Some(s) if s.len() == 3 => {
            if c.batch_first {
                (s[1], s[0], s[2])
            } else {
                (s[0], s[1], s[2])
            }
        }
        Some(_) => return Err(ctx.err(format!("X must be 3-D, got {}", show(&x.shape)))),
        None => (None, None, None),
    };
    let expect = |i: usize, what: &str, want: [Dim; 3]| -> Result<()> {
        if let Some(t) = xs.get(i).copied().flatten() {
            if let Some(s) = &t.shape {
                let ok = s.len() == 3
                    && s.iter()
                        .zip(&want)
                        .all(|(a, b)| a.is_none() || b.is_none() || a == b);
                if !ok {
                    return Err(ctx.err(format!(
                        "{what} {} must be {}",
                        show(&t.shape),
                        show(&Some(want.to_vec()))
                    )));
                }
            }
        }
        Ok(())
    };
    let (d, h) = (Some(c.directions), Some(c.hidden));
    expect(1, "W", [d, Some(gates * c.hidden), input])?;
    expect(2, "R", [d, Some(gates * c.hidden), h])?;
    if let Some(b) = xs.get(3).copied().flatten() {
        if b.shape
            .as_ref()
            .is_some_and(|s| s.len() != 2 || s[1].is_some_and(|n| n != 2 * gates * c.hidden))
        {
            return Err(ctx.err(format!(
                "B {} must be [{}, {}]",
                show(&b.shape),
                c.directions,
                2 * gates * c.hidden
            )));
        }
    }
    let state = if c.batch_first {
        [batch, d, h]
    } else {
        [d, batch, h]
    };
    expect(5, "initial_h", state)?;
    if gates == 4 {
        expect(6, "initial_c", state)?;
    }
    let y = if c.batch_first {
        vec![batch, seq, d, h]
    } else {
        vec![seq, d, batch, h]
    };
    let dtype = x.dtype;
    let mut outs = vec![
        Info::new(dtype, Some(y)),
        Info::new(dtype, Some(state.to_vec())),
    ];
    if gates == 4 {
        outs.push(Info::new(dtype, Some(state.to_vec())));
    }
    Ok(outs)
}

/// Inputs in time-major form, the sequence-length check, and initial states per direction.
struct Prepared {
    x: Tensor,
    h0: Option<Tensor>,
    c0: Option<Tensor>,
}

fn prepare(ctx: &Ctx, xs: &[Option<Tensor>], c: &Rnn) -> Result<Prepared> {
    let x = need(ctx, xs, 0)?;
    if x.ndim() != 3 {
        return Err(ctx.err(format!("X must be 3-D, got {:?}", x.shape())));
    }
    let x = if c.batch_first {
        x.transpose(0, 1)?
    } else {
        x.clone()
    };
    let (seq, batch) = (x.shape()[0], x.shape()[1]);
    if let Some(lens) = xs.get(4).and_then(Option::as_ref) {
        let lens = lens.to_dtype(crate::DType::I64)?.to_vec::<i64>()?;
        if lens.len() != batch || lens.iter().any(|&l| l != seq as i64) {
            return Err(ctx.err(format!(
                "sequence_lens {lens:?} must all equal the sequence length {seq} (padded batches are not supported)"
            )));
        }
    }
    // A state whose shape is known only at run time is checked here: each direction's
    // `[batch, hidden]` is selected from it, which would drop extra directions unseen.
    let state = |i: usize, name: &str| -> Result<Option<Tensor>> {
        let Some(s) = xs.get(i).and_then(Option::as_ref) else {
            return Ok(None);
        };
        let want = if c.batch_first {
            [batch, c.directions, c.hidden]
        } else {
            [c.directions, batch, c.hidden]
        };
        if s.shape() != want {
            return Err(ctx.err(format!("{name} {:?} must be {want:?}", s.shape())));
        }
        Ok(Some(if c.batch_first {
            s.transpose(0, 1)?
        } else {
            s.clone()
        }))
    };
    Ok(Prepared {
        x,
        h0: state(5, "initial_h")?,
        c0: state(6, "initial_c")?,
    })
}

/// Rows `[k·H, (k+1)·H)` of a `[gates·H, ...]` weight, for each gate index in `order` (`w`
/// itself for the identity).
fn regate(w: &Tensor, hidden: usize, order: &[usize]) -> Result<Tensor> {
    if order.iter().enumerate().all(|(i, &k)| i == k) {
        return Ok(w.clone());
    }
    let parts: Vec<Tensor> = order
        .iter()
        .map(|&k| w.narrow(0, k * hidden, hidden))
        .collect::<Result<_>>()?;
    Tensor::cat(&parts, 0)
}

/// Stacks per-direction outputs into ONNX's `Y` `[seq, D, batch, H]` and `Y_h` `[D, batch, H]`
/// (batch-first layouts transposed back).
fn outputs(c: &Rnn, ys: Vec<Tensor>, hs: Vec<Tensor>, cs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let y = Tensor::stack(&ys, 1)?;
    let state = |v: Vec<Tensor>| -> Result<Tensor> {
        let s = Tensor::stack(&v, 0)?;
        if c.batch_first {
            s.transpose(0, 1)
        } else {
            Ok(s)
        }
    };
    let mut out = vec![
        if c.batch_first {
            y.permute([2, 0, 1, 3])?
        } else {
            y
        },
        state(hs)?,
    ];
    if !cs.is_empty() {
        out.push(state(cs)?);
    }
    Ok(out)
}

/// Steps in the order direction `d` reads them.
fn steps(c: &Rnn, d: usize, seq: usize) -> Vec<usize> {
    if d == 1 || c.reverse_only {
        (0..seq).rev().collect()
    } else {
        (0..seq).collect()
    }
}

/// `LSTM` (outputs `Y`, `Y_h`, `Y_c`).
pub(super) const LSTM: OpDef = OpDef {
    name: "LSTM",
    host_inputs: &[],
    infer: |ctx, xs| infer(ctx, xs, 4, &["Sigmoid", "Tanh", "Tanh"]),
    run: |ctx, xs| {
        let c = config(ctx, 4, &["Sigmoid", "Tanh", "Tanh"])?;
        let p = prepare(ctx, xs, &c)?;
        let (w, r) = (need(ctx, xs, 1)?, need(ctx, xs, 2)?);
        let (batch, hsz) = (p.x.shape()[1], c.hidden);
        // ONNX's i, o, f, c to wgtorch's cell order i, f, g(=c), o; a compiled graph's node
        // keeps the module's order.
        let order = if ctx.i(crate::onnx::forms::LSTM_GATES_IFGO, 0)? == 1 {
            [0, 1, 2, 3]
        } else {
            [0, 2, 3, 1]
        };
        let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
        for d in 0..c.directions {
            let wd = regate(&w.select(0, d as i64)?, hsz, &order)?;
            let rd = regate(&r.select(0, d as i64)?, hsz, &order)?;
            let mut proj = p.x.matmul(&wd.t()?)?;
            if let Some(b) = xs.get(3).and_then(Option::as_ref) {
                let b = b.select(0, d as i64)?;
                let bias = regate(&b.narrow(0, 0, 4 * hsz)?, hsz, &order)?.add(&regate(
                    &b.narrow(0, 4 * hsz, 4 * hsz)?,
                    hsz,
                    &order,
                )?)?;
                proj = proj.add(&bias)?;
            }
            let zeros = || Tensor::zeros([batch, hsz], &p.x.device())?.to_dtype(p.x.dtype());
            let h = match &p.h0 {
                Some(h0) => h0.select(0, d as i64)?,
                None => zeros()?,
            };
            let cell = match &p.c0 {
                Some(c0) => c0.select(0, d as i64)?,
                None => zeros()?,
            };
            let reverse = c.reverse_only || d == 1;
            let (y, h, cell) = crate::ops::lstm_layer(&proj, &rd, &h, &cell, reverse)?;
            ys.push(y);
            hs.push(h);
            cs.push(cell);
        }
        outputs(&c, ys, hs, cs)
    },
};

/// `GRU` (outputs `Y`, `Y_h`), with `linear_before_reset` either way.
pub(super) const GRU: OpDef = OpDef {
    name: "GRU",
    host_inputs: &[],
    infer: |ctx, xs| infer(ctx, xs, 3, &["Sigmoid", "Tanh"]),
    run: |ctx, xs| {
        let c = config(ctx, 3, &["Sigmoid", "Tanh"])?;
        let p = prepare(ctx, xs, &c)?;
        let (w, r) = (need(ctx, xs, 1)?, need(ctx, xs, 2)?);
        let (seq, batch, hsz) = (p.x.shape()[0], p.x.shape()[1], c.hidden);
        let before_reset = ctx.i("linear_before_reset", 0)? != 0;
        let (mut ys, mut hs) = (Vec::new(), Vec::new());
        for d in 0..c.directions {
            let wd = w.select(0, d as i64)?;
            let rd = r.select(0, d as i64)?;
            let gate = |m: &Tensor, k: usize| m.narrow(0, k * hsz, hsz);
            // Input projections of every step: [seq, batch, 3H] with W's biases.
            let mut proj = p.x.matmul(&wd.t()?)?;
            let mut rb: Option<Tensor> = None;
            if let Some(b) = xs.get(3).and_then(Option::as_ref) {
                let b = b.select(0, d as i64)?;
                proj = proj.add(&b.narrow(0, 0, 3 * hsz)?)?;
                rb = Some(b.narrow(0, 3 * hsz, 3 * hsz)?);
            }
            let (rzr_t, rh_t) = (rd.narrow(0, 0, 2 * hsz)?.t()?, gate(&rd, 2)?.t()?);
            let rb_zr = rb.as_ref().map(|b| b.narrow(0, 0, 2 * hsz)).transpose()?;
            let rb_h = rb.as_ref().map(|b| b.narrow(0, 2 * hsz, hsz)).transpose()?;
            let mut h = match &p.h0 {
                Some(h0) => h0.select(0, d as i64)?,
                None => Tensor::zeros([batch, hsz], &p.x.device())?.to_dtype(p.x.dtype())?,
            };
            let mut out = vec![None; seq];
            for t in steps(&c, d, seq) {
                let xt = proj.select(0, t as i64)?;
                let mut zr = xt.narrow(1, 0, 2 * hsz)?.add(&h.matmul(&rzr_t)?)?;
                if let Some(b) = &rb_zr {
                    zr = zr.add(b)?;
                }
                let zr = zr.sigmoid()?;
                let (z, rg) = (zr.narrow(1, 0, hsz)?, zr.narrow(1, hsz, hsz)?);
                let add_rb = |v: Tensor| -> Result<Tensor> {
                    match &rb_h {
                        Some(b) => v.add(b),
                        None => Ok(v),
                    }
                };
                let recur = if before_reset {
                    rg.mul(&add_rb(h.matmul(&rh_t)?)?)?
                } else {
                    add_rb(rg.mul(&h)?.matmul(&rh_t)?)?
                };
                let n = xt.narrow(1, 2 * hsz, hsz)?.add(&recur)?.tanh()?;
                // (1 − z) ⊙ n + z ⊙ h = n + z ⊙ (h − n)
                h = n.add(&z.mul(&h.sub(&n)?)?)?;
                out[t] = Some(h.clone());
            }
            ys.push(Tensor::stack(
                &out.into_iter()
                    .map(|o| o.expect("every step"))
                    .collect::<Vec<_>>(),
                0,
            )?);
            hs.push(h);
        }
        outputs(&c, ys, hs, Vec::new())
    },
};
