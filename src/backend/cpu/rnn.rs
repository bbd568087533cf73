//! The CPU LSTM cell: the gate nonlinearities and the state update in one pass each way (the
//! composite takes about ten kernels forward and twenty backward per time step).

use super::vmath::vectorized;
use crate::dtype::Real;

/// From the gate pre-activations `xs + hh` (`[B, 4H]`, chunks i, f, g, o) and the cell state
/// `c` (`[B, H]`): `hc = [h', c']` (`[2, B, H]`) and the activations `act` (`[B, 4H]`, kept for
/// the backward pass).
pub(crate) fn lstm_cell_rows<T: Real>(
    xs: &[T],
    hh: &[T],
    c: &[T],
    hc: &mut [T],
    act: &mut [T],
    b: usize,
    h: usize,
) {
    let (hs, cs) = hc.split_at_mut(b * h);
    vectorized(
        #[inline(always)]
        || {
            for (a, (x, y)) in act.iter_mut().zip(xs.iter().zip(hh)) {
                *a = *x + *y;
            }
            for r in 0..b {
                let a = &mut act[r * 4 * h..(r + 1) * 4 * h];
                let (ifg, o) = a.split_at_mut(3 * h);
                let (if_, g) = ifg.split_at_mut(2 * h);
                for v in if_.iter_mut().chain(o.iter_mut()) {
                    *v = v.vsigmoid();
                }
                for v in g.iter_mut() {
                    *v = v.vtanh();
                }
                let (i, f) = if_.split_at(h);
                let (cr, hr, c2) = (
                    &c[r * h..(r + 1) * h],
                    &mut hs[r * h..(r + 1) * h],
                    &mut cs[r * h..(r + 1) * h],
                );
                for j in 0..h {
                    let cn = f[j] * cr[j] + i[j] * g[j];
                    c2[j] = cn;
                    hr[j] = o[j] * cn.vtanh();
                }
            }
        },
    )
}

/// The gradients of [`lstm_cell_rows`] from `ghc = [dh', dc']`: the gate pre-activations'
/// (`dgates`, `[B, 4H]`) and the input cell state's (`dc`, `[B, H]`), from the saved
/// activations, input state `c` and new state `c2`.
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
    let one = T::one();
    let (dh, dc2) = ghc.split_at(b * h);
    vectorized(
        #[inline(always)]
        || {
            for r in 0..b {
                let a = &act[r * 4 * h..(r + 1) * 4 * h];
                let d = &mut dgates[r * 4 * h..(r + 1) * 4 * h];
                let rr = r * h..(r + 1) * h;
                let (dh, dc2, c, c2, dc) = (
                    &dh[rr.clone()],
                    &dc2[rr.clone()],
                    &c[rr.clone()],
                    &c2[rr.clone()],
                    &mut dc[rr],
                );
                for j in 0..h {
                    let (i, f, g, o) = (a[j], a[h + j], a[2 * h + j], a[3 * h + j]);
                    let tc = c2[j].vtanh();
                    let dct = dc2[j] + dh[j] * o * (one - tc * tc);
                    d[j] = dct * g * i * (one - i);
                    d[h + j] = dct * c[j] * f * (one - f);
                    d[2 * h + j] = dct * i * (one - g * g);
                    d[3 * h + j] = dh[j] * tc * o * (one - o);
                    dc[j] = dct * f;
                }
            }
        },
    )
}
