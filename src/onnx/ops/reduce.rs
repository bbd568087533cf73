//! Reductions: `ReduceMean`, `ReduceSum`, `ReduceMax`, `ReduceMin` (axes as an attribute or,
//! from opset 13/18, as an input; `keepdims`; `noop_with_empty_axes`) and `ArgMax`.

use super::{need, Ctx, Dim, Info, Known, OpDef};
use crate::{DType, Result, Tensor};

/// The axes to reduce, normalised and sorted; `None` when only known at run time; an empty list
/// with `noop_with_empty_axes` means no reduction.
fn axes(ctx: &Ctx, rank: usize) -> Result<Option<Vec<usize>>> {
    let given: Option<Vec<i64>> = match ctx.ints("axes")? {
        Some(a) => Some(a),
        None => match ctx.known(1) {
            Known::Absent => None,
            Known::Unknown => return Ok(None),
            Known::Value(v) => Some(v.to_vec()),
        },
    };
    let noop = ctx.i("noop_with_empty_axes", 0)? != 0;
    let mut out = match given {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&a| ctx.axis(a, rank))
            .collect::<Result<Vec<_>>>()?,
        _ if noop => Vec::new(),
        _ => (0..rank).collect(),
    };
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(ctx.err(format!("axes {out:?} repeat an axis")));
    }
    Ok(Some(out))
}

fn infer_reduce(ctx: &Ctx, xs: &[Option<&Info>], dtype: Option<DType>) -> Result<Vec<Info>> {
    let x = need(ctx, xs, 0)?;
    let dtype = dtype.unwrap_or(x.dtype);
    let Some(shape) = &x.shape else {
        return Ok(vec![Info::new(dtype, None)]);
    };
    let keep = ctx.i("keepdims", 1)? != 0;
    let Some(axes) = axes(ctx, shape.len())? else {
        return Ok(vec![Info::new(
            dtype,
            if keep {
                Some(vec![None; shape.len()])
            } else {
                None
            },
        )]);
    };
    let out: Vec<Dim> = shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (false, _) => Some(d),
            (true, true) => Some(Some(1)),
            (true, false) => None,
        })
        .collect();
    Ok(vec![Info::new(dtype, Some(out))])
}

fn run_reduce(
    ctx: &Ctx,
    xs: &[Option<Tensor>],
    f: fn(&Tensor, &[isize], bool) -> Result<Tensor>,
) -> Result<Vec<Tensor>> {
    let x = need(ctx, xs, 0)?;
    let keep = ctx.i("keepdims", 1)? != 0;
    let axes = axes(ctx, x.ndim())?.ok_or_else(|| ctx.err("axes must be known on the host"))?;
    if axes.is_empty() {
        return Ok(vec![x.clone()]);
    }
    let dims: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    Ok(vec![f(x, &dims, keep)?])
}

macro_rules! reduce {
    ($konst:ident, $onnx:literal, $f:expr) => {
        pub(super) const $konst: OpDef = OpDef {
            name: $onnx,
            host_inputs: &[1],
            infer: |ctx, xs| infer_reduce(ctx, xs, None),
            run: |ctx, xs| run_reduce(ctx, xs, $f),
        };
    };
}

reduce!(REDUCE_MEAN, "ReduceMean", |x, d, k| x.mean_dims(d, k));
reduce!(REDUCE_SUM, "ReduceSum", |x, d, k| {
    // ONNX keeps the input's type (PyTorch's integer sums widen to int64).
    let y = x.sum_dims(d, k)?;
    if y.dtype() == x.dtype() {
        Ok(y)
    } else {
        y.to_dtype(x.dtype())
    }
});
reduce!(REDUCE_MAX, "ReduceMax", |x, d, k| x.amax(d, k));
reduce!(REDUCE_MIN, "ReduceMin", |x, d, k| x.amin(d, k));

/// `ArgMax` along `axis` (int64; `select_last_index = 1` is not supported).
pub(super) const ARG_MAX: OpDef = OpDef {
    name: "ArgMax",
    host_inputs: &[],
    infer: |ctx, xs| {
        if ctx.i("select_last_index", 0)? != 0 {
            return Err(ctx.err("select_last_index = 1 is not supported"));
        }
        let x = need(ctx, xs, 0)?;
        let Some(shape) = &x.shape else {
            return Ok(vec![Info::new(DType::I64, None)]);
        };
        let axis = ctx.axis(ctx.i("axis", 0)?, shape.len())?;
        let keep = ctx.i("keepdims", 1)? != 0;
        let out = shape
            .iter()
            .enumerate()
            .filter_map(|(i, &d)| {
                if i != axis {
                    Some(d)
                } else if keep {
                    Some(Some(1))
                } else {
                    None
                }
            })
            .collect();
        Ok(vec![Info::new(DType::I64, Some(out))])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let axis = ctx.axis(ctx.i("axis", 0)?, x.ndim())?;
        Ok(vec![
            x.argmax(Some(axis as isize), ctx.i("keepdims", 1)? != 0)?
        ])
    },
};
