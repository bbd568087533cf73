//! CPU reductions over the last axis of a contiguous `[rows, n]` tensor.

use super::{with_cpu, with_dtype, CpuElem, CpuStorage};
use crate::dtype::Elem;
use crate::ops::ReduceOp;
use crate::DType;
use rayon::prelude::*;

/// Reduce each row of `[rows, n]` into [`ReduceOp::out_dtype`]: arg ops give i32, half sums
/// and products stay in f32 (the caller rounds once), int32 sums and products wrap.
pub(crate) fn reduce_rows(op: ReduceOp, x: &CpuStorage, rows: usize, n: usize) -> CpuStorage {
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
                let out: Vec<i32> = (0..rows).into_par_iter().map(|r| arg_row(op, row(r)) as i32).collect();
                CpuStorage::I32(out)
            }
            _ => with_dtype!(op.out_dtype(T::DTYPE), D => {
                let out: Vec<D> = (0..rows)
                    .into_par_iter()
                    .with_min_len((4096 / n.max(1)).max(1))
                    .map(|r| D::from_f64(value_row(op, row(r))))
                    .collect();
                D::wrap(out)
            }),
        }
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

/// Sum in f64 with eight independent accumulators (so the loop vectorises), combined in a fixed
/// order: deterministic, and more accurate than one running sum.
fn sum_lanes<T: Elem>(r: &[T]) -> f64 {
    let mut acc = [0f64; 8];
    let chunks = r.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().map(|x| x.to_f64()).sum();
    for c in chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a += x.to_f64();
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn value_row<T: Elem>(op: ReduceOp, r: &[T]) -> f64 {
    match op {
        ReduceOp::Sum => {
            if r.len() > 1 << 15 {
                // Chunk sums in parallel, combined in a fixed order: deterministic across runs.
                let parts: Vec<f64> = r.par_chunks(1 << 14).map(sum_lanes).collect();
                parts.iter().sum()
            } else {
                sum_lanes(r)
            }
        }
        ReduceOp::Prod => r.iter().map(|x| x.to_f64()).product(),
        ReduceOp::Max => r
            .iter()
            .map(|x| x.to_f64())
            .fold(f64::NEG_INFINITY, |m, x| {
                if x.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(x)
                }
            }),
        ReduceOp::Min => r.iter().map(|x| x.to_f64()).fold(f64::INFINITY, |m, x| {
            if x.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.min(x)
            }
        }),
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

/// Inclusive prefix sum along each row (int32 wraps).
pub(crate) fn cumsum_rows(x: &CpuStorage, rows: usize, n: usize) -> CpuStorage {
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
