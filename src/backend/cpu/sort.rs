//! Row sort: the stable order of each row of a contiguous `[rows, n]` input, as int32 indices.

use super::{try_vec, with_cpu, CpuStorage};
use crate::dtype::Elem;
use crate::Result;
use rayon::prelude::*;
use std::cmp::Ordering;

/// PyTorch's sort order: NaN above every number (NaNs equal to each other), -0 equal to 0.
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// For each row, the indices that sort it (ascending, or descending), ties kept in their
/// original order (a stable sort). `n` fits int32 (checked by the op layer).
pub(crate) fn argsort_rows(
    x: &CpuStorage,
    rows: usize,
    n: usize,
    descending: bool,
) -> Result<CpuStorage> {
    let mut out: Vec<i32> = try_vec("sort", rows * n)?;
    out.resize(rows * n, 0);
    if n == 0 {
        return Ok(CpuStorage::I32(out));
    }
    with_cpu!(x, v, T => sort_rows::<T>(v, &mut out, n, descending));
    Ok(CpuStorage::I32(out))
}

fn sort_rows<T: Elem>(v: &[T], out: &mut [i32], n: usize, descending: bool) {
    out.par_chunks_mut(n).enumerate().for_each(|(r, o)| {
        let row = &v[r * n..(r + 1) * n];
        let mut keys: Vec<(f64, i32)> = row
            .iter()
            .enumerate()
            .map(|(i, x)| (x.to_f64(), i as i32))
            .collect();
        if descending {
            keys.sort_by(|a, b| order(b.0, a.0));
        } else {
            keys.sort_by(|a, b| order(a.0, b.0));
        }
        for (o, k) in o.iter_mut().zip(&keys) {
            *o = k.1;
        }
    });
}
