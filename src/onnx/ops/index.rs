//! Indexing operators: `Slice` (negative steps included), `Gather` and `GatherND`, with every
//! index checked (on the device for device tensors).

use super::{need, show, Ctx, Info, Known, OpDef};
use crate::{DType, Result, Tensor};

/// One axis of a `Slice`: ONNX's clamping of start and end, for either sign of step.
fn slice_axis(dim: usize, start: i64, end: i64, step: i64) -> (i64, i64) {
    let d = dim as i64;
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    if step > 0 {
        (norm(start).clamp(0, d), norm(end).clamp(0, d))
    } else {
        (norm(start).clamp(-1, d - 1), norm(end).clamp(-1, d - 1))
    }
}

/// One sliced axis: (axis, start, end, step) as the node gives them.
type SliceAxis = (usize, i64, i64, i64);

fn slice_spec(ctx: &Ctx, rank: usize) -> Result<Option<Vec<SliceAxis>>> {
    let get = |i: usize| -> Option<Option<&[i64]>> {
        match ctx.known(i) {
            Known::Absent => Some(None),
            Known::Unknown => None,
            Known::Value(v) => Some(Some(v)),
        }
    };
    let (Some(Some(starts)), Some(Some(ends)), Some(axes), Some(steps)) =
        (get(1), get(2), get(3), get(4))
    else {
        return Ok(None);
    };
    let n = starts.len();
    if ends.len() != n || axes.is_some_and(|a| a.len() != n) || steps.is_some_and(|s| s.len() != n)
    {
        return Err(ctx.err("starts, ends, axes and steps must have one length"));
    }
    let mut seen = Vec::new();
    let mut spec = Vec::with_capacity(n);
    for i in 0..n {
        let axis = ctx.axis(axes.map_or(i as i64, |a| a[i]), rank)?;
        if seen.contains(&axis) {
            return Err(ctx.err(format!("axis {axis} is sliced twice")));
        }
        seen.push(axis);
        let step = steps.map_or(1, |s| s[i]);
        if step == 0 {
            return Err(ctx.err("steps must not be 0"));
        }
        spec.push((axis, starts[i], ends[i], step));
    }
    Ok(Some(spec))
}

fn slice_len(start: i64, end: i64, step: i64) -> usize {
    if step > 0 {
        if end > start {
            ((end - start - 1) / step + 1) as usize
        } else {
            0
        }
    } else if start > end {
        ((start - end - 1) / -step + 1) as usize
    } else {
        0
    }
}

/// `Slice(data, starts, ends, axes?, steps?)`, negative steps included.
pub(super) const SLICE: OpDef = OpDef {
    name: "Slice",
    host_inputs: &[1, 2, 3, 4],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let Some(s) = &x.shape else {
            return Ok(vec![Info::new(x.dtype, None)]);
        };
        let Some(spec) = slice_spec(ctx, s.len())? else {
            return Ok(vec![Info::new(x.dtype, Some(vec![None; s.len()]))]);
        };
        let mut out = s.clone();
        for (axis, start, end, step) in spec {
            out[axis] = s[axis].map(|d| {
                let (a, b) = slice_axis(d, start, end, step);
                slice_len(a, b, step)
            });
        }
        Ok(vec![Info::new(x.dtype, Some(out))])
    },
    run: |ctx, xs| {
        let mut y = need(ctx, xs, 0)?.clone();
        let spec =
            slice_spec(ctx, y.ndim())?.ok_or_else(|| ctx.err("starts and ends are required"))?;
        for (axis, start, end, step) in spec {
            let d = y.shape()[axis];
            let (a, b) = slice_axis(d, start, end, step);
            let len = slice_len(a, b, step);
            if step > 0 {
                let a = a as usize;
                y = y.slice(
                    axis as isize,
                    a,
                    a + (len.max(1) - 1) * step as usize + len.min(1),
                    step as usize,
                )?;
            } else {
                // Reversed: index i of the flipped axis is d - 1 - i of the original.
                let fa = (d as i64 - 1 - a) as usize;
                let s = (-step) as usize;
                y = y.flip([axis])?.slice(
                    axis as isize,
                    fa,
                    fa + (len.max(1) - 1) * s + len.min(1),
                    s,
                )?;
            }
        }
        Ok(vec![y])
    },
};

/// `Gather(data, indices, axis)`: negative indices count from the end; out-of-range indices
/// are an error (checked on the device for device tensors).
pub(super) const GATHER: OpDef = OpDef {
    name: "Gather",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (x, idx) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        if !matches!(idx.dtype, DType::I64 | DType::I32) {
            return Err(ctx.err(format!("indices must be int32 or int64, got {}", idx.dtype)));
        }
        let (Some(s), Some(i)) = (&x.shape, &idx.shape) else {
            return Ok(vec![Info::new(x.dtype, None)]);
        };
        let axis = ctx.axis(ctx.i("axis", 0)?, s.len())?;
        let mut out = s[..axis].to_vec();
        out.extend(i.iter().copied());
        out.extend(s[axis + 1..].iter().copied());
        Ok(vec![Info::new(x.dtype, Some(out))])
    },
    run: |ctx, xs| {
        let (x, idx) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let axis = ctx.axis(ctx.i("axis", 0)?, x.ndim())?;
        let d = x.shape()[axis] as i64;
        // On a GPU the index arithmetic runs in int32 (int64 arithmetic there is checked on the
        // host, which would read back; a GPU buffer's dims fit int32).
        let flat = idx.reshape([idx.numel()])?.to_dtype(index_dtype(idx))?;
        // A compiled graph's Gather (`wgtorch_strict`) refuses a negative index, as the op it
        // records does.
        let flat = if ctx.i("wgtorch_strict", 0)? == 1 {
            flat
        } else {
            Tensor::where_cond(&flat.lt_scalar(0)?, &flat.add_scalar(d)?, &flat)?
        };
        let picked = x.index_select(axis as isize, &flat)?;
        let mut shape = x.shape()[..axis].to_vec();
        shape.extend_from_slice(idx.shape());
        shape.extend_from_slice(&x.shape()[axis + 1..]);
        Ok(vec![picked.reshape(&shape)?])
    },
};

/// `GatherND(data, indices)` with `batch_dims = 0`: each index row picks a slice of `data`.
/// Every component is checked against its dim (out of range is an error, on the device for
/// device tensors), not only the flattened offset.
pub(super) const GATHER_ND: OpDef = OpDef {
    name: "GatherND",
    host_inputs: &[],
    infer: |ctx, xs| {
        let (x, idx) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        if ctx.i("batch_dims", 0)? != 0 {
            return Err(ctx.err("batch_dims other than 0 is not supported"));
        }
        if idx.dtype != DType::I64 {
            return Err(ctx.err(format!("indices must be int64, got {}", idx.dtype)));
        }
        let (Some(s), Some(i)) = (&x.shape, &idx.shape) else {
            return Ok(vec![Info::new(x.dtype, None)]);
        };
        let Some(Some(k)) = i.last().copied() else {
            return Ok(vec![Info::new(x.dtype, None)]);
        };
        if i.is_empty() || k > s.len() {
            return Err(ctx.err(format!(
                "indices {} index deeper than data {}",
                show(&idx.shape),
                show(&x.shape)
            )));
        }
        let mut out = i[..i.len() - 1].to_vec();
        out.extend(s[k..].iter().copied());
        Ok(vec![Info::new(x.dtype, Some(out))])
    },
    run: |ctx, xs| {
        let (x, idx) = (need(ctx, xs, 0)?, need(ctx, xs, 1)?);
        let k = *idx
            .shape()
            .last()
            .ok_or_else(|| ctx.err("indices must have at least one dim"))?;
        if k > x.ndim() {
            return Err(ctx.err(format!(
                "indices {:?} index deeper than data {:?}",
                idx.shape(),
                x.shape()
            )));
        }
        let (dev, dims) = (idx.device(), &x.shape()[..k]);
        let total: usize = dims.iter().product();
        let mut strides = vec![1i64; k];
        for j in (0..k.saturating_sub(1)).rev() {
            strides[j] = strides[j + 1] * dims[j + 1] as i64;
        }
        let it = index_dtype(idx);
        let dims_t =
            Tensor::from_vec(dims.iter().map(|&d| d as i64).collect(), [k], &dev)?.to_dtype(it)?;
        let strides_t = Tensor::from_vec(strides, [k], &dev)?.to_dtype(it)?;
        let idx = idx.to_dtype(it)?;
        let idx = Tensor::where_cond(&idx.lt_scalar(0)?, &idx.add(&dims_t)?, &idx)?;
        let bad = idx
            .lt_scalar(0)?
            .logical_or(&idx.ge(&dims_t)?)?
            .any_dim(-1, false)?;
        let flat = idx.mul(&strides_t)?.sum_dims([-1], false)?;
        // A bad component sends its row past the end, where index_select refuses it.
        let past = Tensor::full_dtype(flat.shape(), total as f64, it, &dev)?;
        let flat = Tensor::where_cond(&bad, &past, &flat)?;
        let mut rows = vec![total];
        rows.extend_from_slice(&x.shape()[k..]);
        let picked = x
            .reshape(&rows)?
            .index_select(0, &flat.reshape([flat.numel()])?)?;
        let mut shape = idx.shape()[..idx.ndim() - 1].to_vec();
        shape.extend_from_slice(&x.shape()[k..]);
        Ok(vec![picked.reshape(&shape)?])
    },
};

/// The dtype for index arithmetic: int32 on a GPU, int64 on the CPU.
fn index_dtype(t: &Tensor) -> DType {
    if t.device().is_gpu() {
        DType::I32
    } else {
        DType::I64
    }
}
