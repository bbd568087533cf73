//! Shape and movement operators: `Constant`, `Shape`, `ConstantOfShape`, `Reshape`,
//! `Flatten`, `Transpose`, `Squeeze`, `Unsqueeze`, `Concat`, `Split`, `Expand`, `Tile`,
//! `Range` (slicing and gathers are in `index.rs`). Shape arithmetic runs on the CPU; data movement on the data's
//! device.

use super::{broadcast, need, same_dtype, show, Ctx, Dim, Info, Known, OpDef};
use crate::{DType, Device, Result, Tensor};

pub(super) fn usizes(ctx: &Ctx, what: &str, v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| ctx.err(format!("{what} {v:?} holds a negative value")))
        })
        .collect()
}

/// `Constant`: its `value` tensor (or `value_float(s)`, `value_int(s)`), on the CPU.
pub(super) const CONSTANT: OpDef = OpDef {
    name: "Constant",
    host_inputs: &[],
    infer: |ctx, _| Ok(vec![Info::of_tensor(&constant(ctx)?)]),
    run: |ctx, _| Ok(vec![constant(ctx)?]),
};

fn constant(ctx: &Ctx) -> Result<Tensor> {
    let cpu = Device::Cpu;
    if let Some(t) = ctx.tensor("value")? {
        return Ok(t);
    }
    if ctx.node.attrs.iter().any(|a| a.name() == "value_float") {
        return Tensor::scalar(ctx.f("value_float", 0.0)?, &cpu);
    }
    if let Some(v) = ctx.floats("value_floats")? {
        let n = v.len();
        return Tensor::from_vec(v, [n], &cpu);
    }
    if ctx.node.attrs.iter().any(|a| a.name() == "value_int") {
        return Tensor::scalar(ctx.i("value_int", 0)?, &cpu);
    }
    if let Some(v) = ctx.ints("value_ints")? {
        let n = v.len();
        return Tensor::from_vec(v, [n], &cpu);
    }
    Err(ctx.err("needs a value, value_float(s) or value_int(s) attribute (strings and sparse tensors are not supported)"))
}

/// The `[start, end)` range of dims `Shape` reports (opset 15's attributes, clamped).
fn shape_range(ctx: &Ctx, rank: usize) -> Result<(usize, usize)> {
    let clamp = |v: i64| -> usize {
        let r = rank as i64;
        (if v < 0 { v + r } else { v }).clamp(0, r) as usize
    };
    let (s, e) = (clamp(ctx.i("start", 0)?), clamp(ctx.i("end", rank as i64)?));
    Ok((s, e.max(s)))
}

/// `Shape`: an int64 vector on the CPU (known at load when the dims are).
pub(super) const SHAPE: OpDef = OpDef {
    name: "Shape",
    host_inputs: &[],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let Some(s) = &x.shape else {
            return Ok(vec![Info::new(DType::I64, Some(vec![None]))]);
        };
        let (a, b) = shape_range(ctx, s.len())?;
        let dims = &s[a..b];
        let mut info = Info::known(DType::I64, &[dims.len()]);
        if let Some(d) = dims.iter().copied().collect::<Option<Vec<usize>>>() {
            info.value = Some(Tensor::from_vec(
                d.iter().map(|&d| d as i64).collect(),
                [d.len()],
                &Device::Cpu,
            )?);
        }
        Ok(vec![info])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let (a, b) = shape_range(ctx, x.ndim())?;
        let dims: Vec<i64> = x.shape()[a..b].iter().map(|&d| d as i64).collect();
        let n = dims.len();
        Ok(vec![Tensor::from_vec(dims, [n], &Device::Cpu)?])
    },
};

/// `ConstantOfShape(shape)`: filled with `value` (one element; float 0 by default), on the CPU.
pub(super) const CONSTANT_OF_SHAPE: OpDef = OpDef {
    name: "ConstantOfShape",
    host_inputs: &[0],
    infer: |ctx, xs| {
        let dtype = fill(ctx)?.dtype();
        Ok(vec![match ctx.known(0) {
            Known::Value(v) => Info::known(dtype, &usizes(ctx, "shape", v)?),
            _ => Info::new(
                dtype,
                need(ctx, xs, 0)?
                    .shape
                    .as_ref()
                    .and_then(|s| s[0])
                    .map(|n| vec![None; n]),
            ),
        }])
    },
    run: |ctx, _| {
        let shape = usizes(
            ctx,
            "shape",
            ctx.host(0)?.ok_or_else(|| ctx.err("shape is required"))?,
        )?;
        let value = fill(ctx)?;
        Tensor::full_dtype(&shape, value.to_f64_vec()?[0], value.dtype(), &Device::Cpu)
            .map(|t| vec![t])
    },
};

fn fill(ctx: &Ctx) -> Result<Tensor> {
    match ctx.tensor("value")? {
        Some(t) if t.numel() == 1 => Ok(t.reshape([0usize; 0])?),
        Some(t) => Err(ctx.err(format!(
            "value must hold one element, got shape {:?}",
            t.shape()
        ))),
        None => Tensor::scalar(0.0f32, &Device::Cpu),
    }
}

/// A `Reshape` target with `0` (copy the input's dim unless `allowzero`) and one `-1` resolved
/// as far as the known dims allow.
fn reshape_target(ctx: &Ctx, input: &[Dim], target: &[i64]) -> Result<Vec<Dim>> {
    let allowzero = ctx.i("allowzero", 0)? != 0;
    if target.iter().filter(|&&d| d == -1).count() > 1 || target.iter().any(|&d| d < -1) {
        return Err(ctx.err(format!(
            "shape {target:?} may hold one -1 and no other negative value"
        )));
    }
    let mut out: Vec<Dim> = Vec::with_capacity(target.len());
    for (i, &d) in target.iter().enumerate() {
        out.push(match d {
            0 if !allowzero => *input.get(i).ok_or_else(|| {
                ctx.err(format!(
                    "shape {target:?} copies dim {i} (0), which the input {} lacks",
                    show(&Some(input.to_vec()))
                ))
            })?,
            -1 => None,
            d => Some(d as usize),
        });
    }
    let total: Option<usize> = input
        .iter()
        .try_fold(1usize, |n, &d| d.and_then(|d| n.checked_mul(d)));
    let rest: Option<usize> = out
        .iter()
        .zip(target)
        .filter(|(_, &t)| t != -1)
        .try_fold(1usize, |n, (&d, _)| d.and_then(|d| n.checked_mul(d)));
    if let Some(pos) = target.iter().position(|&d| d == -1) {
        if let (Some(t), Some(r)) = (total, rest) {
            if r == 0 || t % r != 0 {
                return Err(ctx.err(format!("cannot reshape {} elements into {target:?}", t)));
            }
            out[pos] = Some(t / r);
        }
    } else if let (Some(t), Some(r)) = (total, rest) {
        if t != r {
            return Err(ctx.err(format!(
                "cannot reshape {} ({t} elements) into {target:?} ({r} elements)",
                show(&Some(input.to_vec()))
            )));
        }
    }
    Ok(out)
}

/// `Reshape(data, shape)` with `allowzero`.
pub(super) const RESHAPE: OpDef = OpDef {
    name: "Reshape",
    host_inputs: &[1],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let shape = match (ctx.known(1), &x.shape) {
            (Known::Value(t), Some(s)) => Some(reshape_target(ctx, s, t)?),
            (Known::Value(t), None) if !t.contains(&0) && !t.contains(&-1) => {
                Some(t.iter().map(|&d| Some(d as usize)).collect())
            }
            _ => need(ctx, xs, 1)?
                .shape
                .as_ref()
                .and_then(|s| s[0])
                .map(|n| vec![None; n]),
        };
        Ok(vec![Info::new(x.dtype, shape)])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let input: Vec<Dim> = x.shape().iter().map(|&d| Some(d)).collect();
        let target = ctx.host(1)?.ok_or_else(|| ctx.err("shape is required"))?;
        let out: Vec<usize> = reshape_target(ctx, &input, target)?
            .into_iter()
            .map(|d| d.expect("every dim is known at run time"))
            .collect();
        Ok(vec![x.reshape(&out)?])
    },
};

/// `Flatten(axis)`: `[prod(dims before axis), prod(dims from axis)]`.
pub(super) const FLATTEN: OpDef = OpDef {
    name: "Flatten",
    host_inputs: &[],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let Some(s) = &x.shape else {
            return Ok(vec![Info::new(x.dtype, Some(vec![None, None]))]);
        };
        let axis = flatten_axis(ctx, s.len())?;
        let prod = |d: &[Dim]| d.iter().try_fold(1usize, |n, &d| d.map(|d| n * d));
        Ok(vec![Info::new(
            x.dtype,
            Some(vec![prod(&s[..axis]), prod(&s[axis..])]),
        )])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let axis = flatten_axis(ctx, x.ndim())?;
        let outer: usize = x.shape()[..axis].iter().product();
        let inner: usize = x.shape()[axis..].iter().product();
        Ok(vec![x.reshape([outer, inner])?])
    },
};

fn flatten_axis(ctx: &Ctx, rank: usize) -> Result<usize> {
    let a = ctx.i("axis", 1)?;
    let r = rank as i64;
    if a < -r || a > r {
        return Err(ctx.err(format!("axis {a} is out of range for rank {rank}")));
    }
    Ok((if a < 0 { a + r } else { a }) as usize)
}

fn perm(ctx: &Ctx, rank: usize) -> Result<Vec<usize>> {
    let p = match ctx.ints("perm")? {
        None => (0..rank).rev().collect(),
        Some(p) => {
            let p = usizes(ctx, "perm", &p)?;
            let mut seen = p.clone();
            seen.sort_unstable();
            if seen != (0..rank).collect::<Vec<_>>() {
                return Err(ctx.err(format!("perm {p:?} is not a permutation of 0..{rank}")));
            }
            p
        }
    };
    Ok(p)
}

/// `Transpose(perm)` (reversed dims by default): a view.
pub(super) const TRANSPOSE: OpDef = OpDef {
    name: "Transpose",
    host_inputs: &[],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let shape = match &x.shape {
            Some(s) => Some(perm(ctx, s.len())?.iter().map(|&i| s[i]).collect()),
            None => None,
        };
        Ok(vec![Info::new(x.dtype, shape)])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        Ok(vec![x.permute(perm(ctx, x.ndim())?)?])
    },
};

/// The axes of Squeeze/Unsqueeze: attribute (before opset 13) or input 1.
enum Axes {
    Absent,
    Unknown,
    Given(Vec<i64>),
}

fn axes_of(ctx: &Ctx) -> Result<Axes> {
    if let Some(a) = ctx.ints("axes")? {
        return Ok(Axes::Given(a));
    }
    Ok(match ctx.known(1) {
        Known::Absent => Axes::Absent,
        Known::Unknown => Axes::Unknown,
        Known::Value(v) => Axes::Given(v.to_vec()),
    })
}

fn norm_axes(ctx: &Ctx, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = axes
        .iter()
        .map(|&a| ctx.axis(a, rank))
        .collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(ctx.err(format!("axes {axes:?} repeat an axis")));
    }
    Ok(out)
}

/// `Squeeze(data, axes?)`: the given size-1 dims, or every size-1 dim.
pub(super) const SQUEEZE: OpDef = OpDef {
    name: "Squeeze",
    host_inputs: &[1],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let Some(s) = &x.shape else {
            return Ok(vec![Info::new(x.dtype, None)]);
        };
        let shape = match axes_of(ctx)? {
            Axes::Given(a) => {
                let a = norm_axes(ctx, &a, s.len())?;
                for &i in &a {
                    if s[i].is_some_and(|d| d != 1) {
                        return Err(ctx.err(format!(
                            "cannot squeeze axis {i} of {} (size is not 1)",
                            show(&x.shape)
                        )));
                    }
                }
                Some(
                    s.iter()
                        .enumerate()
                        .filter(|(i, _)| !a.contains(i))
                        .map(|(_, &d)| d)
                        .collect(),
                )
            }
            Axes::Absent if s.iter().all(Option::is_some) => {
                Some(s.iter().copied().filter(|&d| d != Some(1)).collect())
            }
            _ => None,
        };
        Ok(vec![Info::new(x.dtype, shape)])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let axes: Vec<usize> = match axes_of(ctx)? {
            Axes::Given(a) => norm_axes(ctx, &a, x.ndim())?,
            Axes::Absent => (0..x.ndim()).filter(|&i| x.shape()[i] == 1).collect(),
            Axes::Unknown => return Err(ctx.err("axes must be known on the host")),
        };
        for &i in &axes {
            if x.shape()[i] != 1 {
                return Err(ctx.err(format!(
                    "cannot squeeze axis {i} of {:?} (size is not 1)",
                    x.shape()
                )));
            }
        }
        let shape: Vec<usize> = x
            .shape()
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        Ok(vec![x.reshape(&shape)?])
    },
};

/// `Unsqueeze(data, axes)`: size-1 dims at `axes` of the output.
pub(super) const UNSQUEEZE: OpDef = OpDef {
    name: "Unsqueeze",
    host_inputs: &[1],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let shape = match (&x.shape, axes_of(ctx)?) {
            (Some(s), Axes::Given(a)) => Some(unsqueezed(ctx, s, &a)?),
            (Some(s), Axes::Unknown) => need(ctx, xs, 1)?
                .shape
                .as_ref()
                .and_then(|a| a[0])
                .map(|n| vec![None; s.len() + n]),
            _ => None,
        };
        Ok(vec![Info::new(x.dtype, shape)])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let Axes::Given(a) = axes_of(ctx)? else {
            return Err(ctx.err("axes are required"));
        };
        let input: Vec<Dim> = x.shape().iter().map(|&d| Some(d)).collect();
        let shape: Vec<usize> = unsqueezed(ctx, &input, &a)?
            .into_iter()
            .map(|d| d.expect("known"))
            .collect();
        Ok(vec![x.reshape(&shape)?])
    },
};

fn unsqueezed(ctx: &Ctx, s: &[Dim], axes: &[i64]) -> Result<Vec<Dim>> {
    let rank = s.len() + axes.len();
    let axes = norm_axes(ctx, axes, rank)?;
    let mut it = s.iter();
    Ok((0..rank)
        .map(|i| {
            if axes.contains(&i) {
                Some(1)
            } else {
                *it.next().expect("rank")
            }
        })
        .collect())
}

/// `Concat(axis)`.
pub(super) const CONCAT: OpDef = OpDef {
    name: "Concat",
    host_inputs: &[],
    infer: |ctx, xs| {
        let dtype = same_dtype(ctx, xs)?;
        let shapes: Vec<&Vec<Dim>> = xs
            .iter()
            .flatten()
            .filter_map(|x| x.shape.as_ref())
            .collect();
        let Some(first) = shapes.first() else {
            return Ok(vec![Info::new(dtype, None)]);
        };
        let rank = first.len();
        let axis = ctx.axis(ctx.i("axis", 0)?, rank)?;
        let mut out = (*first).clone();
        for s in &shapes[1..] {
            if s.len() != rank {
                return Err(ctx.err(format!("inputs differ in rank ({} vs {})", rank, s.len())));
            }
            for i in 0..rank {
                if i == axis {
                    out[i] = out[i].zip(s[i]).map(|(a, b)| a + b);
                } else if let (Some(a), Some(b)) = (out[i], s[i]) {
                    if a != b {
                        return Err(ctx.err(format!(
                            "inputs differ in dim {i} ({a} vs {b}) outside axis {axis}"
                        )));
                    }
                } else if out[i].is_none() {
                    out[i] = s[i];
                }
            }
        }
        let all_known = xs.iter().flatten().all(|x| x.shape.is_some());
        if !all_known {
            out[axis] = None;
        }
        Ok(vec![Info::new(dtype, Some(out))])
    },
    run: |ctx, xs| {
        let parts: Vec<Tensor> = xs.iter().flatten().cloned().collect();
        let axis = ctx.axis(ctx.i("axis", 0)?, parts.first().map_or(0, Tensor::ndim))?;
        Ok(vec![Tensor::cat(&parts, axis as isize)?])
    },
};

/// The sizes `Split` cuts `dim` into: input `split`, attribute `split` (before 13),
/// `num_outputs` (18), or equal parts for each output.
fn split_sizes(ctx: &Ctx, dim: Dim) -> Result<Option<Vec<usize>>> {
    let outputs = ctx.node.outputs.len();
    if let Some(s) = ctx.ints("split")? {
        return Ok(Some(usizes(ctx, "split", &s)?));
    }
    match ctx.known(1) {
        Known::Value(s) => return Ok(Some(usizes(ctx, "split", s)?)),
        Known::Unknown => return Ok(None),
        Known::Absent => {}
    }
    let Some(dim) = dim else { return Ok(None) };
    let n = ctx.i("num_outputs", outputs as i64)? as usize;
    if n == 0 || n != outputs {
        return Err(ctx.err(format!(
            "num_outputs {n} does not match the node's {outputs} outputs"
        )));
    }
    let chunk = dim.div_ceil(n);
    let sizes: Vec<usize> = (0..n)
        .map(|i| chunk.min(dim.saturating_sub(i * chunk)))
        .collect();
    if ctx.node.attrs.iter().all(|a| a.name() != "num_outputs") && dim % n != 0 {
        return Err(ctx.err(format!("cannot split {dim} into {n} equal parts")));
    }
    Ok(Some(sizes))
}

/// `Split(input, split?)` along `axis`.
pub(super) const SPLIT: OpDef = OpDef {
    name: "Split",
    host_inputs: &[1],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let outputs = ctx.node.outputs.len();
        let Some(s) = &x.shape else {
            return Ok(vec![Info::new(x.dtype, None); outputs]);
        };
        let axis = ctx.axis(ctx.i("axis", 0)?, s.len())?;
        let Some(sizes) = split_sizes(ctx, s[axis])? else {
            let mut o = s.clone();
            o[axis] = None;
            return Ok(vec![Info::new(x.dtype, Some(o)); outputs]);
        };
        if sizes.len() != outputs {
            return Err(ctx.err(format!(
                "split {sizes:?} does not match the node's {outputs} outputs"
            )));
        }
        if let Some(d) = s[axis] {
            if sizes.iter().sum::<usize>() != d {
                return Err(ctx.err(format!(
                    "split {sizes:?} does not add up to dim {axis} ({d})"
                )));
            }
        }
        Ok(sizes
            .iter()
            .map(|&n| {
                let mut o = s.clone();
                o[axis] = Some(n);
                Info::new(x.dtype, Some(o))
            })
            .collect())
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let axis = ctx.axis(ctx.i("axis", 0)?, x.ndim())?;
        let sizes = split_sizes(ctx, Some(x.shape()[axis]))?
            .ok_or_else(|| ctx.err("split must be known"))?;
        if sizes.iter().sum::<usize>() != x.shape()[axis] {
            return Err(ctx.err(format!(
                "split {sizes:?} does not add up to dim {axis} ({})",
                x.shape()[axis]
            )));
        }
        x.split_sizes(&sizes, axis as isize)
    },
};

/// `Expand(input, shape)`: bidirectional broadcasting of the input to `shape`.
pub(super) const EXPAND: OpDef = OpDef {
    name: "Expand",
    host_inputs: &[1],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let shape = match ctx.known(1) {
            Known::Value(v) => {
                let target = Some(usizes(ctx, "shape", v)?.into_iter().map(Some).collect());
                broadcast(ctx, &[&x.shape, &target])?
            }
            _ => None,
        };
        Ok(vec![Info::new(x.dtype, shape)])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let target = usizes(
            ctx,
            "shape",
            ctx.host(1)?.ok_or_else(|| ctx.err("shape is required"))?,
        )?;
        let out = crate::shape::broadcast_shapes("Expand", x.shape(), &target)?;
        Ok(vec![x.expand(&out)?])
    },
};

/// `Tile(input, repeats)`.
pub(super) const TILE: OpDef = OpDef {
    name: "Tile",
    host_inputs: &[1],
    infer: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let shape = match (&x.shape, ctx.known(1)) {
            (Some(s), Known::Value(r)) => {
                if r.len() != s.len() {
                    return Err(ctx.err(format!(
                        "repeats {r:?} must have one value per dim of {}",
                        show(&x.shape)
                    )));
                }
                let r = usizes(ctx, "repeats", r)?;
                Some(s.iter().zip(&r).map(|(&d, &r)| d.map(|d| d * r)).collect())
            }
            (s, _) => s.as_ref().map(|s| vec![None; s.len()]),
        };
        Ok(vec![Info::new(x.dtype, shape)])
    },
    run: |ctx, xs| {
        let x = need(ctx, xs, 0)?;
        let r = usizes(
            ctx,
            "repeats",
            ctx.host(1)?.ok_or_else(|| ctx.err("repeats is required"))?,
        )?;
        if r.len() != x.ndim() {
            return Err(ctx.err(format!(
                "repeats {r:?} must have one value per dim of {:?}",
                x.shape()
            )));
        }
        Ok(vec![x.repeat(&r)?])
    },
};

/// `Range(start, limit, delta)`: scalars of one type.
pub(super) const RANGE: OpDef = OpDef {
    name: "Range",
    host_inputs: &[],
    infer: |ctx, xs| Ok(vec![Info::new(same_dtype(ctx, xs)?, Some(vec![None]))]),
    run: |ctx, xs| {
        let scalar = |i: usize| -> Result<f64> {
            let t = need(ctx, xs, i)?;
            if t.numel() != 1 {
                return Err(ctx.err(format!(
                    "input {i} must be a scalar, got shape {:?}",
                    t.shape()
                )));
            }
            Ok(t.to_f64_vec()?[0])
        };
        let (start, limit, delta) = (scalar(0)?, scalar(1)?, scalar(2)?);
        if delta == 0.0 {
            return Err(ctx.err("delta must not be 0"));
        }
        let dtype = need(ctx, xs, 0)?.dtype();
        Ok(vec![Tensor::arange_dtype(
            start,
            limit,
            delta,
            dtype,
            &Device::Cpu,
        )?])
    },
};
