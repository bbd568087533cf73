//! The CPU LSTM: the cell (the gate nonlinearities and the state update in one pass each way,
//! where the composite takes about ten kernels forward and twenty backward per time step) and
//! a whole layer over a sequence (the cell and the recurrent GEMM per step; backward, `W_hh`'s
//! gradient as one GEMM over all steps).

use super::gemm::{gemm, gemm_packed, Gemm, PackedB};
use super::vmath::vectorized;
use crate::dtype::Real;
use rayon::prelude::*;

/// Gate elements (`4H` per row) below which a cell runs on one thread: a rayon task costs a few
/// microseconds, a row of 800 gates about one.
const MIN_TASK_GATES: usize = 8192;

/// Rows per task when `b` rows of `4h` gates are split over the threads, each task with enough
/// work (all `b` in one task when small).
fn rows_per_task(b: usize, h: usize) -> usize {
    let pieces = (b * 4 * h / MIN_TASK_GATES).clamp(1, rayon::current_num_threads());
    b.div_ceil(pieces).max(1)
}

/// From the gate pre-activations `xs + hh` (`[B, 4H]`, chunks i, f, g, o) and the cell state
/// `c` (`[B, H]`): `hc = [h', c']` (`[2, B, H]`) and the activations `act` (`[B, 4H]`, kept for
/// the backward pass). Blocks of rows run in parallel.
pub(crate) fn lstm_cell_rows<T: Real>(
    xs: &[T],
    hh: &[T],
    c: &[T],
    hc: &mut [T],
    act: &mut [T],
    b: usize,
    h: usize,
) {
    if b == 0 || h == 0 {
        return;
    }
    let (hs, cs) = hc.split_at_mut(b * h);
    let rows = rows_per_task(b, h);
    if rows >= b {
        let (g4, bh) = (b * 4 * h, b * h);
        return cell_rows(
            &xs[..g4],
            &hh[..g4],
            &c[..bh],
            hs,
            &mut cs[..bh],
            &mut act[..g4],
            h,
        );
    }
    let (r1, r4) = (rows * h, rows * 4 * h);
    act[..b * 4 * h]
        .par_chunks_mut(r4)
        .zip(xs[..b * 4 * h].par_chunks(r4))
        .zip(hh[..b * 4 * h].par_chunks(r4))
        .zip(c[..b * h].par_chunks(r1))
        .zip(hs.par_chunks_mut(r1).zip(cs.par_chunks_mut(r1)))
        .for_each(|((((act, xs), hh), c), (hs, cs))| cell_rows(xs, hh, c, hs, cs, act, h));
}

/// [`lstm_cell_rows`] on one block of rows (as many as `c` holds).
fn cell_rows<T: Real>(
    xs: &[T],
    hh: &[T],
    c: &[T],
    hs: &mut [T],
    cs: &mut [T],
    act: &mut [T],
    h: usize,
) {
    // Each loop runs over whole slices with zipped iterators, so it compiles to vector code.
    vectorized(
        #[inline(always)]
        || {
            let rows = act
                .chunks_exact_mut(4 * h)
                .zip(xs.chunks_exact(4 * h).zip(hh.chunks_exact(4 * h)))
                .zip(
                    c.chunks_exact(h)
                        .zip(hs.chunks_exact_mut(h).zip(cs.chunks_exact_mut(h))),
                );
            for ((a, (x, y)), (cr, (hr, c2))) in rows {
                for (a, (x, y)) in a.iter_mut().zip(x.iter().zip(y)) {
                    *a = *x + *y;
                }
                let (ifg, o) = a.split_at_mut(3 * h);
                let (if_, g) = ifg.split_at_mut(2 * h);
                for v in if_.iter_mut() {
                    *v = v.vsigmoid();
                }
                for v in o.iter_mut() {
                    *v = v.vsigmoid();
                }
                for v in g.iter_mut() {
                    *v = v.vtanh();
                }
                let (i, f) = if_.split_at(h);
                for ((c2, cr), (f, (i, g))) in c2
                    .iter_mut()
                    .zip(cr)
                    .zip(f.iter().zip(i.iter().zip(g.iter())))
                {
                    *c2 = *f * *cr + *i * *g;
                }
                for (hr, (c2, o)) in hr.iter_mut().zip(c2.iter().zip(o.iter())) {
                    *hr = *o * c2.vtanh();
                }
            }
        },
    )
}

/// The gradients of [`lstm_cell_rows`] from `ghc = [dh', dc']`: the gate pre-activations'
/// (`dgates`, `[B, 4H]`) and the input cell state's (`dc`, `[B, H]`), from the saved
/// activations, input state `c` and new state `c2`. Blocks of rows run in parallel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lstm_cell_backward_rows<T: Real>(
    ghc: &[T],
    act: &[T],
    c: &[T],
    c2: &[T],
    dgates: &mut [T],
    dc: &mut [T],
    b: usize,
    h: usize,
) {
    if b == 0 || h == 0 {
        return;
    }
    let (dh, dc2) = ghc.split_at(b * h);
    let rows = rows_per_task(b, h);
    if rows >= b {
        let (g4, bh) = (b * 4 * h, b * h);
        return cell_backward_rows(
            (dh, &dc2[..bh]),
            &act[..g4],
            (&c[..bh], &c2[..bh]),
            &mut dgates[..g4],
            &mut dc[..bh],
            h,
        );
    }
    let (r1, r4) = (rows * h, rows * 4 * h);
    dgates[..b * 4 * h]
        .par_chunks_mut(r4)
        .zip(act[..b * 4 * h].par_chunks(r4))
        .zip(dc[..b * h].par_chunks_mut(r1))
        .zip(dh.par_chunks(r1).zip(dc2[..b * h].par_chunks(r1)))
        .zip(c[..b * h].par_chunks(r1).zip(c2[..b * h].par_chunks(r1)))
        .for_each(|((((dg, act), dc), (dh, dc2)), (c, c2))| {
            cell_backward_rows((dh, dc2), act, (c, c2), dg, dc, h)
        });
}

/// [`lstm_cell_backward_rows`] on one block of rows (as many as `c` holds).
fn cell_backward_rows<T: Real>(
    (dh, dc2): (&[T], &[T]),
    act: &[T],
    (c, c2): (&[T], &[T]),
    dgates: &mut [T],
    dc: &mut [T],
    h: usize,
) {
    let one = T::one();
    vectorized(
        #[inline(always)]
        || {
            let rows = act
                .chunks_exact(4 * h)
                .zip(dgates.chunks_exact_mut(4 * h))
                .zip(dh.chunks_exact(h).zip(dc2.chunks_exact(h)))
                .zip(
                    c.chunks_exact(h)
                        .zip(c2.chunks_exact(h))
                        .zip(dc.chunks_exact_mut(h)),
                );
            for (((a, d), (dh, dc2)), ((c, c2), dc)) in rows {
                let (ai, rest) = a.split_at(h);
                let (af, rest) = rest.split_at(h);
                let (ag, ao) = rest.split_at(h);
                let (di, rest) = d.split_at_mut(h);
                let (df, rest) = rest.split_at_mut(h);
                let (dg, d_o) = rest.split_at_mut(h);
                // Gate by gate over whole rows: dct = dc' + dh·o·(1 − tanh²c'), kept in dc.
                for ((dc, d_o), (dc2, (dh, (o, c2)))) in dc
                    .iter_mut()
                    .zip(d_o.iter_mut())
                    .zip(dc2.iter().zip(dh.iter().zip(ao.iter().zip(c2))))
                {
                    let tc = c2.vtanh();
                    *dc = *dc2 + *dh * *o * (one - tc * tc);
                    *d_o = *dh * tc * *o * (one - *o);
                }
                for (di, (dct, (i, g))) in di.iter_mut().zip(dc.iter().zip(ai.iter().zip(ag))) {
                    *di = *dct * *g * *i * (one - *i);
                }
                for (df, (dct, (f, c))) in df.iter_mut().zip(dc.iter().zip(af.iter().zip(c))) {
                    *df = *dct * *c * *f * (one - *f);
                }
                for (dg, (dct, (i, g))) in dg.iter_mut().zip(dc.iter().zip(ai.iter().zip(ag))) {
                    *dg = *dct * *i * (one - *g * *g);
                }
                for (dc, f) in dc.iter_mut().zip(af) {
                    *dc = *dc * *f;
                }
            }
        },
    )
}

/// The sizes of one LSTM layer over a sequence in one direction: `t` steps of `b` rows and `h`
/// hidden features, run from the last step to the first when `reverse`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LstmDims {
    pub t: usize,
    pub b: usize,
    pub h: usize,
    pub reverse: bool,
}

impl LstmDims {
    /// The time index of the `p`-th step run.
    fn step(self, p: usize) -> usize {
        step_index(self.t, p, self.reverse)
    }
}

/// The time index of the `p`-th of `t` steps run, from the last when `reverse`.
pub(crate) fn step_index(t: usize, p: usize, reverse: bool) -> usize {
    if reverse {
        t - 1 - p
    } else {
        p
    }
}

/// One LSTM layer over a whole sequence: for each step, the recurrent product `h·W_hhᵀ` (one
/// GEMM against `W_hhᵀ` packed once for all steps) and [`lstm_cell_rows`] on it and the step's
/// input projection `xi[s]` (`[T, B, 4H]`, biases included). Writes `y = [outputs (T×B×H),
/// h_n, c_n]`, every step's cell state `cs` (`[T, B, H]`) and gate activations `act`
/// (`[T, B, 4H]`) for [`lstm_layer_backward_rows`]. `w` is `W_hh` (`[4H, H]`), `h0`/`c0` the
/// initial state; `d.t`, `d.b` and `d.h` are positive.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lstm_layer_rows<T: Real + Gemm>(
    xi: &[T],
    w: &[T],
    h0: &[T],
    c0: &[T],
    y: &mut [T],
    cs: &mut [T],
    act: &mut [T],
    d: LstmDims,
) {
    let (b, h) = (d.b, d.h);
    let (bh, g4) = (b * h, b * 4 * h);
    let mut hh = vec![T::zero(); g4];
    let mut hc = vec![T::zero(); 2 * bh];
    // W_hhᵀ packed once for every step's product.
    let w_t = PackedB::new(b, h, 4 * h, w, [1, h]);
    for p in 0..d.t {
        let s = d.step(p);
        let prev = (p > 0).then(|| d.step(p - 1));
        let h_prev = prev.map_or(h0, |q| &y[q * bh..(q + 1) * bh]);
        gemm_packed(b, h_prev, [h, 1], &w_t, T::zero(), &mut hh, 4 * h);
        let c_prev = prev.map_or(c0, |q| &cs[q * bh..(q + 1) * bh]);
        lstm_cell_rows(
            &xi[s * g4..(s + 1) * g4],
            &hh,
            c_prev,
            &mut hc,
            &mut act[s * g4..(s + 1) * g4],
            b,
            h,
        );
        y[s * bh..(s + 1) * bh].copy_from_slice(&hc[..bh]);
        cs[s * bh..(s + 1) * bh].copy_from_slice(&hc[bh..]);
    }
    let (t, last) = (d.t, d.step(d.t - 1));
    y.copy_within(last * bh..(last + 1) * bh, t * bh);
    y[(t + 1) * bh..(t + 2) * bh].copy_from_slice(&cs[last * bh..(last + 1) * bh]);
}

/// The gradients of [`lstm_layer_rows`] from `gy` (the gradient of its `y`): back through the
/// steps with [`lstm_cell_backward_rows`] and `dh = dgates·W_hh` per step, then `W_hh`'s
/// gradient as one GEMM over every step, `dgatesᵀ·h_prev`. Writes the gradients of the input
/// projections (`dxi`, `[T, B, 4H]`), of `W_hh` (`dw`) and of the initial state (`dh0`, `dc0`).
/// `d.t`, `d.b` and `d.h` are positive.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lstm_layer_backward_rows<T: Real + Gemm>(
    gy: &[T],
    (y, cs, act): (&[T], &[T], &[T]),
    (w, h0, c0): (&[T], &[T], &[T]),
    dxi: &mut [T],
    dw: &mut [T],
    dh0: &mut [T],
    dc0: &mut [T],
    d: LstmDims,
) {
    let (b, h, t) = (d.b, d.h, d.t);
    let (bh, g4) = (b * h, b * 4 * h);
    let mut ghc = vec![T::zero(); 2 * bh];
    let mut dh = gy[t * bh..(t + 1) * bh].to_vec();
    let mut dc = gy[(t + 1) * bh..(t + 2) * bh].to_vec();
    // h_prev of every step, in time order: W_hh's gradient is dgatesᵀ · h_prev over all steps.
    let mut h_prev = vec![T::zero(); t * bh];
    // W_hh packed once for every step's `dgates·W_hh`.
    let w_p = PackedB::new(b, 4 * h, h, w, [h, 1]);
    for p in (0..t).rev() {
        let s = d.step(p);
        let prev = (p > 0).then(|| d.step(p - 1));
        let (dhs, dcs) = ghc.split_at_mut(bh);
        for ((o, a), bb) in dhs.iter_mut().zip(&gy[s * bh..(s + 1) * bh]).zip(&dh) {
            *o = *a + *bb;
        }
        dcs.copy_from_slice(&dc);
        let c_prev = prev.map_or(c0, |q| &cs[q * bh..(q + 1) * bh]);
        let dg = &mut dxi[s * g4..(s + 1) * g4];
        lstm_cell_backward_rows(
            &ghc,
            &act[s * g4..(s + 1) * g4],
            c_prev,
            &cs[s * bh..(s + 1) * bh],
            dg,
            &mut dc,
            b,
            h,
        );
        gemm_packed(b, dg, [4 * h, 1], &w_p, T::zero(), &mut dh, h);
        h_prev[s * bh..(s + 1) * bh].copy_from_slice(prev.map_or(h0, |q| &y[q * bh..(q + 1) * bh]));
    }
    dh0.copy_from_slice(&dh);
    dc0.copy_from_slice(&dc);
    gemm(
        4 * h,
        t * b,
        h,
        dxi,
        [1, 4 * h],
        &h_prev,
        [h, 1],
        T::zero(),
        dw,
        h,
    );
}
