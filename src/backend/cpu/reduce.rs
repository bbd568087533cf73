//! CPU reductions over the last axis of a contiguous `[rows, n]` tensor.

use super::vmath::vectorized;
use super::{pool, with_cpu, with_dtype, CpuElem, CpuStorage, GRAIN};
use crate::dtype::{Elem, Real};
use crate::ops::ReduceOp;
use crate::DType;
use num_traits::ToPrimitive;
use rayon::prelude::*;

/// Reduce each row of `[rows, n]` into [`ReduceOp::out_dtype`]: arg ops give int64 indices
/// ([`DType::INDEX`]), half sums and products stay in f32 (the caller rounds once), integer
/// sums and products wrap; int64 is reduced exactly in i64.
pub(crate) fn reduce_rows(op: ReduceOp, x: &CpuStorage, rows: usize, n: usize) -> CpuStorage {
    if let CpuStorage::I64(v) = x {
        return long_rows(op, v, rows, n);
    }
    if let (CpuStorage::I32(v), ReduceOp::Sum | ReduceOp::Prod) = (x, op) {
        return CpuStorage::I32(
            (0..rows)
                .into_par_iter()
                .map(|r| int_row(op, &v[r * n..(r + 1) * n]))
                .collect(),
        );
    }
    with_cpu!(x, v, T => {
        let row = |r: usize| &v[r * n..(r + 1) * n];
        match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let out: Vec<i64> = (0..rows).into_par_iter().map(|r| arg_row(op, row(r)) as i64).collect();
                CpuStorage::I64(out)
            }
            _ => with_dtype!(op.out_dtype(T::DTYPE), D => {
                // Blocks of whole rows per task, each block inside one `vectorized` call (a
                // call per row cost a fifth of a 1024-wide row's time).
                let per_task = (GRAIN / n.max(1)).max(1);
                let mut out: Vec<D> = pool::any(rows);
                out.par_chunks_mut(per_task).enumerate().for_each(|(b, o)| {
                    vectorized(
                        #[inline(always)]
                        || {
                            for (i, o) in o.iter_mut().enumerate() {
                                *o = D::from_f64(value_row(op, row(b * per_task + i)));
                            }
                        },
                    )
                });
                D::wrap(out)
            }),
        }
    })
}

/// Column sums of a float `[rows, cols]` with contiguous rows `row_stride` apart, starting at
/// element `offset`: `out[j] = Σ_i x[offset + i * row_stride + j]`, accumulated in f64 like the
/// row sums. In [`ReduceOp::out_dtype`] of a sum, as [`reduce_rows`]: half types give f32 (the
/// caller rounds once). None for other dtypes.
///
/// The rows are cut into chunks of a fixed size (set by the shape alone, so the result does not
/// depend on the thread count) and the columns into blocks; each (chunk, block) task sums its
/// rows in order, [`STRIP`] columns at a time with the sums in registers, into a partial row;
/// the partials are then added chunk by chunk. A bias gradient (`[2048, 128]` summed over its
/// rows) had one task for all its rows before, and read and wrote each sum in memory per row.
pub(crate) fn sum_cols(
    x: &CpuStorage,
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
) -> Option<CpuStorage> {
    /// `(rows, cols, row_stride)` as [`sum_cols`] takes them.
    type Dims = (usize, usize, usize);
    fn go<T: Elem + Sync, D: Elem + CpuElem>(v: &[T], (rows, cols, rs): Dims) -> Vec<D> {
        /// Columns per task.
        const BLOCK: usize = 1024;
        let mut out = pool::any(cols);
        if rows * cols == 0 {
            out.iter_mut().for_each(|o| *o = D::from_f64(0.0));
            return out;
        }
        // About GRAIN elements a task, and at most 64 chunks of rows (the partials' size).
        let per_chunk = (GRAIN / cols.min(BLOCK)).max(rows.div_ceil(64)).max(1);
        let chunks = rows.div_ceil(per_chunk);
        let mut partial = vec![0f64; chunks * cols];
        partial.par_chunks_mut(cols).enumerate().for_each(|(c, p)| {
            let chunk = c * per_chunk..((c + 1) * per_chunk).min(rows);
            p.par_chunks_mut(BLOCK).enumerate().for_each(|(b, p)| {
                let c0 = b * BLOCK;
                vectorized(
                    #[inline(always)]
                    || {
                        let mut strips = p.chunks_exact_mut(STRIP);
                        for (s, p) in (&mut strips).enumerate() {
                            let at = c0 + s * STRIP;
                            let mut acc = [0f64; STRIP];
                            for r in chunk.clone() {
                                let row = &v[r * rs + at..r * rs + at + STRIP];
                                for (a, x) in acc.iter_mut().zip(row) {
                                    *a += x.to_f64();
                                }
                            }
                            p.copy_from_slice(&acc);
                        }
                        let p = strips.into_remainder();
                        let at = c0 + (BLOCK.min(cols - c0) - p.len());
                        for r in chunk.clone() {
                            let row = &v[r * rs + at..r * rs + at + p.len()];
                            for (a, x) in p.iter_mut().zip(row) {
                                *a += x.to_f64();
                            }
                        }
                    },
                )
            });
        });
        out.par_chunks_mut(BLOCK)
            .enumerate()
            .with_min_len((GRAIN / (chunks * BLOCK)).max(1))
            .for_each(|(b, o)| {
                let c0 = b * BLOCK;
                let mut acc = vec![0f64; o.len()];
                for p in partial.chunks_exact(cols) {
                    for (a, x) in acc.iter_mut().zip(&p[c0..c0 + o.len()]) {
                        *a += x;
                    }
                }
                for (o, a) in o.iter_mut().zip(acc) {
                    *o = D::from_f64(a);
                }
            });
        out
    }
    // With no elements nothing is read, and the view may start past its storage's end (a
    // slice of an empty tensor).
    let from = |len: usize| if rows * cols == 0 { len } else { offset };
    let dims = (rows, cols, row_stride);
    match x {
        CpuStorage::F32(v) => Some(CpuStorage::F32(go(&v[from(v.len())..], dims))),
        CpuStorage::F64(v) => Some(CpuStorage::F64(go(&v[from(v.len())..], dims))),
        CpuStorage::F16(v) => Some(CpuStorage::F32(go(&v[from(v.len())..], dims))),
        CpuStorage::BF16(v) => Some(CpuStorage::F32(go(&v[from(v.len())..], dims))),
        _ => None,
    }
}

/// Rows of int64, in i64 (exact past 2^53, where f64 is not): sums and products wrap as
/// PyTorch's; arg ops give the first extreme's index.
fn long_rows(op: ReduceOp, v: &[i64], rows: usize, n: usize) -> CpuStorage {
    let row = |r: usize| &v[r * n..(r + 1) * n];
    let each = |f: &(dyn Fn(&[i64]) -> i64 + Sync)| -> Vec<i64> {
        (0..rows).into_par_iter().map(|r| f(row(r))).collect()
    };
    CpuStorage::I64(match op {
        ReduceOp::Sum => each(&|r| r.iter().fold(0i64, |a, &x| a.wrapping_add(x))),
        ReduceOp::Prod => each(&|r| r.iter().fold(1i64, |a, &x| a.wrapping_mul(x))),
        // Rows are non-empty for these (the op layer refuses empty ones).
        ReduceOp::Max => each(&|r| r.iter().copied().max().unwrap_or(i64::MIN)),
        ReduceOp::Min => each(&|r| r.iter().copied().min().unwrap_or(i64::MAX)),
        ReduceOp::ArgMax | ReduceOp::ArgMin => each(&|r| {
            let mut best = 0;
            for (i, x) in r.iter().enumerate().skip(1) {
                let better = if op == ReduceOp::ArgMax {
                    *x > r[best]
                } else {
                    *x < r[best]
                };
                if better {
                    best = i;
                }
            }
            best as i64
        }),
    })
}

/// An int32 sum or product, wrapping as the GPU's does.
fn int_row(op: ReduceOp, r: &[i32]) -> i32 {
    if op == ReduceOp::Prod {
        r.iter().fold(1, |a, &x| a.wrapping_mul(x))
    } else {
        r.iter().fold(0, |a, &x| a.wrapping_add(x))
    }
}

/// Independent running values of the row reductions: 32 f64 sums, or 64 extremes (four 512-bit
/// vectors of f32), so that several chains hide the latency of each step (one 8-lane chain ran a
/// 1024-wide f32 row sum at 9 GB/s per core).
pub(super) const LANES: usize = 32;

/// Columns [`sum_cols`] sums at a time, their f64 sums held in registers (eight AVX2 vectors).
const STRIP: usize = 32;

/// Sum in f64 over [`LANES`] independent accumulators (so the loop vectorises), combined in a
/// fixed order: deterministic, and more accurate than one running sum. Callers run it inside
/// [`vectorized`].
#[inline(always)]
fn sum_lanes<T: Elem>(r: &[T]) -> f64 {
    sum_lanes_by(r, |x| x.to_f64())
}

/// [`sum_lanes`] of `f(x)` over the elements `x` of `r` (layer_norm's variance sums squared
/// deviations this way).
#[inline(always)]
pub(super) fn sum_lanes_by<T: Copy>(r: &[T], f: impl Fn(T) -> f64) -> f64 {
    let mut acc = [0f64; LANES];
    let chunks = r.chunks_exact(LANES);
    let tail: f64 = chunks.remainder().iter().map(|&x| f(x)).sum();
    // LLVM vectorises these lanes 128 bits at a time (its cost model for f32 -> f64 on
    // AVX-512), so a row sum reads at about three quarters of the read stream.
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += f(x);
        }
    }
    halves(&mut acc, |a, b| a + b) + tail
}

/// `v` (a power of two long) folded by halves with `f`: `v[i] = f(v[i], v[i + len/2])` until
/// one is left (vector steps, in a fixed order).
#[inline(always)]
pub(super) fn halves<A: Copy>(v: &mut [A], f: impl Fn(A, A) -> A) -> A {
    let mut len = v.len();
    while len > 1 {
        len /= 2;
        let (lo, hi) = v.split_at_mut(len);
        lo.iter_mut()
            .zip(&hi[..len])
            .for_each(|(a, &b)| *a = f(*a, b));
    }
    v[0]
}

/// The maximum (minimum when `min`) of a row in its compute type, NaN if any element is NaN.
/// `2·LANES` independent lanes with a branch-free select, so the loop vectorises; a NaN sticks in
/// its lane (`x > NaN` is false) and wins when the lanes are combined. An empty row gives -inf
/// (+inf). Callers run it inside [`vectorized`].
#[inline(always)]
fn extreme_lanes<T: Elem>(r: &[T], min: bool) -> T::Acc {
    let init = T::Acc::of(if min {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    });
    #[inline(always)]
    fn pick<A: Real>(a: A, x: A, min: bool) -> A {
        let better = if min { x < a } else { x > a };
        if better || x.is_nan() {
            x
        } else {
            a
        }
    }
    let mut acc = [init; 2 * LANES];
    let chunks = r.chunks_exact(2 * LANES);
    let mut best = init;
    for x in chunks.remainder() {
        best = pick(best, x.to_acc(), min);
    }
    // Each step writes a new array from the old one: a select stored back over the
    // value it read compiles to a masked store, which the next step's load cannot
    // forward from (the lanes then live in memory, at half the speed).
    if min {
        for c in chunks {
            acc = std::array::from_fn(|i| pick(acc[i], c[i].to_acc(), true));
        }
    } else {
        for c in chunks {
            acc = std::array::from_fn(|i| pick(acc[i], c[i].to_acc(), false));
        }
    }
    pick(best, halves(&mut acc, |a, b| pick(a, b, min)), min)
}

/// One row's reduction, inlined into its caller's [`vectorized`] block.
#[inline(always)]
fn value_row<T: Elem>(op: ReduceOp, r: &[T]) -> f64 {
    match op {
        ReduceOp::Sum => {
            if r.len() > 1 << 15 {
                // Chunk sums in parallel, combined in a fixed order: deterministic across runs.
                let parts: Vec<f64> = r
                    .par_chunks(1 << 14)
                    .map(|c| vectorized(|| sum_lanes(c)))
                    .collect();
                parts.iter().sum()
            } else {
                sum_lanes(r)
            }
        }
        ReduceOp::Prod => r.iter().map(|x| x.to_f64()).product(),
        // Widening a float compute type to f64 always succeeds.
        ReduceOp::Max => extreme_lanes(r, false).to_f64().unwrap_or(f64::NAN),
        ReduceOp::Min => extreme_lanes(r, true).to_f64().unwrap_or(f64::NAN),
        ReduceOp::ArgMax | ReduceOp::ArgMin => unreachable!("arg reductions return indices"),
    }
}

/// Index of the first maximum (or minimum); NaN wins, as in PyTorch.
fn arg_row<T: Elem>(op: ReduceOp, r: &[T]) -> usize {
    let mut best = 0;
    let mut bv = match r.first() {
        Some(x) => x.to_f64(),
        None => return 0,
    };
    for (i, x) in r.iter().enumerate().skip(1) {
        let x = x.to_f64();
        if bv.is_nan() {
            break;
        }
        let better = x.is_nan()
            || if op == ReduceOp::ArgMax {
                x > bv
            } else {
                x < bv
            };
        if better {
            best = i;
            bv = x;
        }
    }
    best
}

/// Inclusive prefix sum along each row (integers wrap; int64 in i64).
pub(crate) fn cumsum_rows(x: &CpuStorage, rows: usize, n: usize) -> CpuStorage {
    if let CpuStorage::I64(v) = x {
        let mut out = vec![0i64; rows * n];
        if n > 0 {
            out.par_chunks_mut(n).enumerate().for_each(|(r, o)| {
                let mut acc = 0i64;
                for (o, &x) in o.iter_mut().zip(&v[r * n..]) {
                    acc = acc.wrapping_add(x);
                    *o = acc;
                }
            });
        }
        return CpuStorage::I64(out);
    }
    if let CpuStorage::I32(v) = x {
        let mut out = vec![0i32; rows * n];
        if n > 0 {
            out.par_chunks_mut(n).enumerate().for_each(|(r, o)| {
                let mut acc = 0i32;
                for (o, &x) in o.iter_mut().zip(&v[r * n..]) {
                    acc = acc.wrapping_add(x);
                    *o = acc;
                }
            });
        }
        return CpuStorage::I32(out);
    }
    with_cpu!(x, v, T => {
        let mut out = vec![T::default(); rows * n];
        if n > 0 {
            out.par_chunks_mut(n).enumerate().for_each(|(r, o)| {
                let mut acc = 0.0f64;
                for j in 0..n {
                    acc += v[r * n + j].to_f64();
                    o[j] = T::from_f64(acc);
                }
            });
        }
        T::wrap(out)
    })
}

/// The sum of `f(x)` over a row, in sixteen lanes (so that it vectorises when `f` does),
/// combined in a fixed order.
#[inline(always)]
fn sum_map<T: Copy, A: Real>(r: &[T], f: impl Fn(T) -> A) -> A {
    let mut acc = [A::zero(); 16];
    let chunks = r.chunks_exact(16);
    let mut tail = A::zero();
    for &x in chunks.remainder() {
        tail = tail + f(x);
    }
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = *a + f(x);
        }
    }
    acc.iter().fold(tail, |s, &a| s + a)
}

/// `sum(a * b)` in sixteen lanes, combined in a fixed order.
#[inline(always)]
fn dot_lanes<A: Real>(a: &[A], b: &[A]) -> A {
    let mut acc = [A::zero(); 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let mut tail = A::zero();
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        tail = tail + x * y;
    }
    for (ca, cb) in ca.zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(ca).zip(cb) {
            *s = *s + x * y;
        }
    }
    acc.iter().fold(tail, |s, &a| s + a)
}

/// Softmax (log-softmax when `log`) along each row of a contiguous `[rows, n]` f32/f64 buffer,
/// the same formula as the composite in `ops/reduce.rs` (the oracle of the tests): `m` the row's
/// maximum (NaN if any element is), then `exp(x - m) / sum` or `x - m - log(sum)` with the sum of
/// `exp(x - m)` over sixteen lanes. Two passes over the input and one write per element; blocks
/// of rows run in parallel.
pub(crate) fn softmax_rows<T: Real + CpuElem + Elem<Acc = T>>(
    x: &[T],
    rows: usize,
    n: usize,
    log: bool,
) -> Vec<T> {
    let mut out = pool::any(rows * n);
    if n == 0 {
        return out;
    }
    // Blocks of whole rows per task, each block inside one `vectorized` call, not one call per
    // row (attention's rows are 64 wide).
    let per_task = (GRAIN / n).max(1) * n;
    out.par_chunks_mut(per_task)
        .zip(x.par_chunks(per_task))
        .for_each(|(o, x)| {
            vectorized(
                #[inline(always)]
                || {
                    for (o, r) in o.chunks_exact_mut(n).zip(x.chunks_exact(n)) {
                        let m = extreme_lanes(r, false);
                        if log {
                            // (x - m) - log(sum), as PyTorch and the GPU: x - (m + log(sum))
                            // rounds log(sum) to m's ulp (-3.6e-7 came out 0 for [16, 0, 0, 0]).
                            let ls = sum_map(r, |x: T| (x - m).vexp()).ln();
                            for (o, &x) in o.iter_mut().zip(r) {
                                *o = (x - m) - ls;
                            }
                        } else {
                            for (o, &x) in o.iter_mut().zip(r) {
                                *o = (x - m).vexp();
                            }
                            let inv = T::one() / sum_map(o, |e: T| e);
                            for o in o.iter_mut() {
                                *o = *o * inv;
                            }
                        }
                    }
                },
            )
        });
    out
}

/// The input gradient of [`softmax_rows`] from its output `y` and the output gradient `g` (both
/// contiguous `[rows, n]`): `g - exp(y) * sum(g)` for log-softmax, `y * (g - sum(g * y))` for
/// softmax, per row.
pub(crate) fn softmax_backward_rows<T: Real + CpuElem + Elem<Acc = T>>(
    y: &[T],
    g: &[T],
    rows: usize,
    n: usize,
    log: bool,
) -> Vec<T> {
    let mut out = pool::any(rows * n);
    if n == 0 {
        return out;
    }
    // Blocks of whole rows per task, as in `softmax_rows` (a call per row made the gradient of
    // softmax over [128, 64, 64] take ~1.6 times as long on Zen 3).
    let per_task = (GRAIN / n).max(1) * n;
    out.par_chunks_mut(per_task)
        .zip(y.par_chunks(per_task).zip(g.par_chunks(per_task)))
        .for_each(|(o, (y, g))| {
            vectorized(
                #[inline(always)]
                || {
                    let rows = o.chunks_exact_mut(n).zip(y.chunks_exact(n));
                    for ((o, y), g) in rows.zip(g.chunks_exact(n)) {
                        if log {
                            let s = sum_map(g, |g: T| g);
                            for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                                *o = g - y.vexp() * s;
                            }
                        } else {
                            let s = dot_lanes(y, g);
                            for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                                *o = y * (g - s);
                            }
                        }
                    }
                },
            )
        });
    out
}

/// The input gradient of log-softmax (output `y`, contiguous `[rows, n]`) when each row's output
/// gradient is zero but at one column, `t[i]` (in range; the forward pass checked it), where it
/// is `g[i]`: cross-entropy's gradient, `onehot(t) * s - exp(y) * s` with `s = 0 + g[i]`. The same
/// bits as [`softmax_backward_rows`] of `zeros.scatter_add(1, t, g)` (that row's sum is `0 + g[i]`
/// exactly, whatever the lanes), in one pass over `y` instead of a zero fill, a scatter and two
/// reads of the scattered gradient.
pub(crate) fn log_softmax_at_backward_rows<T: Real + CpuElem + Elem<Acc = T>>(
    y: &[T],
    t: &[usize],
    g: &[T],
    n: usize,
) -> Vec<T> {
    let rows = t.len();
    let mut out = pool::any(rows * n);
    if n == 0 {
        return out;
    }
    let per_task = (GRAIN / n).max(1);
    out.par_chunks_mut(per_task * n)
        .zip(y.par_chunks(per_task * n))
        .zip(t.par_chunks(per_task).zip(g.par_chunks(per_task)))
        .for_each(|((o, y), (t, g))| {
            vectorized(
                #[inline(always)]
                || {
                    let rows = o.chunks_exact_mut(n).zip(y.chunks_exact(n));
                    for ((o, y), (&t, &g)) in rows.zip(t.iter().zip(g)) {
                        let s = T::zero() + g;
                        for (o, &y) in o.iter_mut().zip(y) {
                            *o = T::zero() - y.vexp() * s;
                        }
                        o[t] = s - y[t].vexp() * s;
                    }
                },
            )
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row lengths around the lane counts (`LANES` sums, `2·LANES` extremes) and their
    /// multiples, so that the lanes, the folds and the remainders are all reached.
    fn lengths() -> impl Iterator<Item = usize> {
        [0, 1, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 1000].into_iter()
    }

    /// `f` compiled for the baseline and inside `vectorized` (the CPU's widest set), which must
    /// agree to the bit.
    fn both<R: Copy + Into<f64>>(f: impl Fn() -> R) -> R {
        let (plain, wide) = (f(), vectorized(&f));
        let (p, w): (f64, f64) = (plain.into(), wide.into());
        assert!(
            p.to_bits() == w.to_bits() || (p.is_nan() && w.is_nan()),
            "{p} vs {w}"
        );
        plain
    }

    fn row(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919) % 211) as f32 * 0.37 - 39.0)
            .collect()
    }

    #[test]
    fn sums_match_a_plain_f64_sum() {
        for n in lengths() {
            let r = row(n);
            let want: f64 = r.iter().map(|&x| x as f64).sum();
            let got = both(|| sum_lanes(&r));
            // Sums of f32 values in f64 are exact here (few, similar magnitudes).
            assert_eq!(got, want, "n={n}");
            let r64: Vec<f64> = r.iter().map(|&x| x as f64).collect();
            assert_eq!(both(|| sum_lanes(&r64)), want, "f64 n={n}");
        }
    }

    #[test]
    fn extremes_find_the_value_and_any_nan_at_every_position() {
        for n in lengths().filter(|&n| n > 0) {
            let r = row(n);
            let max = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let min = r.iter().copied().fold(f32::INFINITY, f32::min);
            assert_eq!(both(|| extreme_lanes(&r, false)), max, "max n={n}");
            assert_eq!(both(|| extreme_lanes(&r, true)), min, "min n={n}");
            for at in 0..n {
                let mut x = r.clone();
                x[at] = f32::NAN;
                assert!(
                    both(|| extreme_lanes(&x, false)).is_nan(),
                    "max NaN at {at} of {n}"
                );
                assert!(
                    both(|| extreme_lanes(&x, true)).is_nan(),
                    "min NaN at {at} of {n}"
                );
                x[at] = f32::INFINITY;
                assert_eq!(
                    both(|| extreme_lanes(&x, false)),
                    f32::INFINITY,
                    "+inf at {at} of {n}"
                );
                x[at] = f32::NEG_INFINITY;
                assert_eq!(
                    both(|| extreme_lanes(&x, true)),
                    f32::NEG_INFINITY,
                    "-inf at {at} of {n}"
                );
            }
            let r64: Vec<f64> = r.iter().map(|&x| x as f64).collect();
            assert_eq!(
                both(|| extreme_lanes(&r64, false)),
                max as f64,
                "f64 max n={n}"
            );
        }
        assert_eq!(both(|| extreme_lanes::<f32>(&[], false)), f32::NEG_INFINITY);
        assert_eq!(both(|| extreme_lanes::<f32>(&[], true)), f32::INFINITY);
    }
}
