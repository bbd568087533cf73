//! CPU layer normalisation over the last axis of a contiguous `[rows, n]` tensor, forward and
//! backward in one pass per row each (the composite takes about ten kernels each way).

use super::pool;
use super::reduce::{halves, sum_lanes_by, LANES};
use super::vmath::vectorized;
use crate::dtype::{Elem, Real};
use rayon::prelude::*;

/// Rows per parallel task: about 16K elements.
fn rows_per_task(n: usize) -> usize {
    (super::GRAIN / n.max(1)).max(1)
}

/// `y = (x - mean) * rstd * w + b` per row, with `mean` and `rstd = 1 / sqrt(var + eps)` (the
/// biased variance), which the backward reads. Statistics accumulate in f64.
pub(crate) fn layer_norm_rows<T: Real + super::CpuElem>(
    x: &[T],
    w: Option<&[T]>,
    b: Option<&[T]>,
    rows: usize,
    n: usize,
    eps: f64,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut y = pool::any(rows * n);
    let (mut mean, mut rstd) = (vec![T::zero(); rows], vec![T::zero(); rows]);
    let per = rows_per_task(n);
    y.par_chunks_mut(per * n)
        .zip(mean.par_chunks_mut(per).zip(rstd.par_chunks_mut(per)))
        .enumerate()
        .for_each(|(c, (y, (mean, rstd)))| {
            vectorized(
                #[inline(always)]
                || {
                    for (i, y) in y.chunks_exact_mut(n).enumerate() {
                        let r = c * per + i;
                        let x = &x[r * n..(r + 1) * n];
                        let m = sum_lanes_by(x, |v| Elem::to_f64(v)) / n as f64;
                        let var = sum_lanes_by(x, |v| {
                            let d = Elem::to_f64(v) - m;
                            d * d
                        }) / n as f64;
                        let s = 1.0 / (var + eps).sqrt();
                        let (mt, st) = (T::of(m), T::of(s));
                        mean[i] = mt;
                        rstd[i] = st;
                        match (w, b) {
                            (Some(w), Some(b)) => {
                                for (((y, &x), &w), &b) in y.iter_mut().zip(x).zip(w).zip(b) {
                                    *y = (x - mt) * st * w + b;
                                }
                            }
                            (Some(w), None) => {
                                for ((y, &x), &w) in y.iter_mut().zip(x).zip(w) {
                                    *y = (x - mt) * st * w;
                                }
                            }
                            (None, Some(b)) => {
                                for ((y, &x), &b) in y.iter_mut().zip(x).zip(b) {
                                    *y = (x - mt) * st + b;
                                }
                            }
                            (None, None) => {
                                for (y, &x) in y.iter_mut().zip(x) {
                                    *y = (x - mt) * st;
                                }
                            }
                        }
                    }
                },
            )
        });
    (y, mean, rstd)
}

/// The gradients of [`layer_norm_rows`] from the output gradient `g`: `dx` per row
/// (`rstd * (gw - mean(gw) - xhat * mean(gw * xhat))` with `gw = g * w`), and the column sums
/// `dw = Σ g * xhat`, `db = Σ g`, from per-block partials combined in a fixed order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_backward_rows<T: Real + super::CpuElem>(
    g: &[T],
    x: &[T],
    mean: &[T],
    rstd: &[T],
    w: Option<&[T]>,
    rows: usize,
    n: usize,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut dx = pool::any(rows * n);
    let per = rows_per_task(n);
    // Without a weight `gw` is `g * 1`: the same bits as `g`.
    let ones;
    let w = match w {
        Some(w) => w,
        None => {
            ones = vec![T::one(); n];
            &ones[..]
        }
    };
    let partials: Vec<(Vec<f64>, Vec<f64>)> = dx
        .par_chunks_mut(per * n)
        .enumerate()
        .map(|(c, dx)| {
            let (mut dw, mut db) = (vec![0f64; n], vec![0f64; n]);
            vectorized(
                #[inline(always)]
                || {
                    for (i, dx) in dx.chunks_exact_mut(n).enumerate() {
                        let r = c * per + i;
                        let (x, g) = (&x[r * n..(r + 1) * n], &g[r * n..(r + 1) * n]);
                        let (m, s) = (mean[r], rstd[r]);
                        // Per element: g·w and g·w·x̂ for this row's sums, g·x̂ and g for the
                        // weight's and bias's column sums.
                        let terms = |x: T, g: T, w: T| {
                            let xhat = (x - m) * s;
                            let gw = g * w;
                            let gwx = Elem::to_f64(gw * xhat);
                            (
                                Elem::to_f64(gw),
                                gwx,
                                Elem::to_f64(g * xhat),
                                Elem::to_f64(g),
                            )
                        };
                        // The row's sums over LANES independent lanes (as `sum_lanes`), so the
                        // loop vectorises instead of waiting on one running sum per element.
                        let (mut lane_gw, mut lane_gwx) = ([0f64; LANES], [0f64; LANES]);
                        let full = n / LANES * LANES;
                        for k in (0..full).step_by(LANES) {
                            let (xc, gc, wc) =
                                (&x[k..k + LANES], &g[k..k + LANES], &w[k..k + LANES]);
                            let (dwc, dbc) = (&mut dw[k..k + LANES], &mut db[k..k + LANES]);
                            for l in 0..LANES {
                                let (gw, gwx, gx, g) = terms(xc[l], gc[l], wc[l]);
                                lane_gw[l] += gw;
                                lane_gwx[l] += gwx;
                                dwc[l] += gx;
                                dbc[l] += g;
                            }
                        }
                        let (mut sum_gw, mut sum_gwx) = (0f64, 0f64);
                        for j in full..n {
                            let (gw, gwx, gx, g) = terms(x[j], g[j], w[j]);
                            sum_gw += gw;
                            sum_gwx += gwx;
                            dw[j] += gx;
                            db[j] += g;
                        }
                        let sum_gw = halves(&mut lane_gw, |a, b| a + b) + sum_gw;
                        let sum_gwx = halves(&mut lane_gwx, |a, b| a + b) + sum_gwx;
                        let (a, bq) = (T::of(sum_gw / n as f64), T::of(sum_gwx / n as f64));
                        for (((dx, &x), &g), &w) in dx.iter_mut().zip(x).zip(g).zip(w) {
                            let xhat = (x - m) * s;
                            *dx = s * (g * w - a - xhat * bq);
                        }
                    }
                },
            );
            (dw, db)
        })
        .collect();
    let (mut dw, mut db) = (vec![0f64; n], vec![0f64; n]);
    for (pw, pb) in &partials {
        for j in 0..n {
            dw[j] += pw[j];
            db[j] += pb[j];
        }
    }
    let back = |v: Vec<f64>| v.into_iter().map(T::of).collect();
    (dx, back(dw), back(db))
}
