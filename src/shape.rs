//! Shapes, strides and broadcasting.

use crate::{Error, Result};

/// Row-major strides of a contiguous tensor of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i];
    }
    s
}

/// Number of elements of `shape` (1 for a 0-d tensor). For shapes that have passed
/// [`checked_numel`] (every tensor's), so it cannot overflow.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The most elements (and the largest stride) a shape may have: PyTorch's sizes are `int64`, and
/// a Rust allocation holds at most `isize::MAX` bytes.
pub const MAX_NUMEL: usize = isize::MAX as usize;

/// Number of elements of `shape`, or `Err` ("shape [..] has too many elements") when it, or any
/// of its contiguous strides, would pass [`MAX_NUMEL`]. Every shape a tensor is created with goes
/// through here (creation, broadcasting, `expand`, `view`/`reshape`, and ops whose output size is
/// a product: matmul, cat, convolution windows), so element counts and strides never wrap.
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    // The product of the non-zero sizes bounds every contiguous stride, even past a zero size.
    let mut span = 1usize;
    for &d in shape.iter().filter(|&&d| d != 0) {
        span = span
            .checked_mul(d)
            .filter(|&s| s <= MAX_NUMEL)
            .ok_or_else(|| too_many_elements(op, shape))?;
    }
    Ok(if shape.contains(&0) { 0 } else { span })
}

/// `a * b` for sizes, or [`checked_numel`]'s error naming `shape` (the shape being formed).
pub fn checked_mul(op: &'static str, a: usize, b: usize, shape: &[usize]) -> Result<usize> {
    a.checked_mul(b)
        .filter(|&s| s <= MAX_NUMEL)
        .ok_or_else(|| too_many_elements(op, shape))
}

/// The error for a shape whose element count does not fit.
pub(crate) fn too_many_elements(op: &'static str, shape: &[usize]) -> Error {
    Error::shape(
        op,
        format!("shape {shape:?} has too many elements (more than {MAX_NUMEL})"),
    )
}

/// Normalise a possibly negative `dim` against `ndim` (PyTorch's wrap rule; a 0-d tensor accepts
/// -1 and 0).
pub fn wrap_dim(op: &'static str, dim: isize, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as isize;
    if dim < -n || dim >= n {
        return Err(Error::DimOutOfRange {
            op,
            dim,
            min: -n,
            max: n - 1,
        });
    }
    Ok(if dim < 0 { dim + n } else { dim } as usize)
}

/// The broadcast shape of two shapes (numpy/PyTorch rules).
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::Broadcast {
                op,
                lhs: a.to_vec(),
                rhs: b.to_vec(),
                dim: i,
                a: da,
                b: db,
            });
        };
    }
    checked_numel(op, &out)?;
    Ok(out)
}

/// How a tensor's elements sit in its storage: shape, strides (in elements) and offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Size of each dimension.
    pub shape: Vec<usize>,
    /// Step in storage elements for each dimension.
    pub strides: Vec<usize>,
    /// First element's position in storage.
    pub offset: usize,
}

impl Layout {
    /// A contiguous row-major layout.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }
    /// Row-major contiguous (size-1 dims may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut acc = 1;
        for i in (0..self.shape.len()).rev() {
            if self.shape[i] != 1 && self.strides[i] != acc {
                return false;
            }
            acc *= self.shape[i];
        }
        true
    }
    /// Broadcast this layout to `shape` (stride 0 on new or size-1 dims).
    pub fn broadcast_to(&self, op: &'static str, shape: &[usize]) -> Result<Layout> {
        if shape.len() < self.shape.len() {
            return Err(Error::shape(
                op,
                format!(
                    "the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
                    shape.len(),
                    self.shape.len()
                ),
            ));
        }
        checked_numel(op, shape)?;
        let lead = shape.len() - self.shape.len();
        let mut strides = vec![0; shape.len()];
        for i in 0..shape.len() {
            if i < lead {
                continue;
            }
            let (d, s) = (self.shape[i - lead], self.strides[i - lead]);
            if d == shape[i] {
                strides[i] = s;
            } else if d == 1 {
                strides[i] = 0;
            } else {
                return Err(Error::shape(
                    op,
                    format!(
                        "The expanded size of the tensor ({}) must match the existing size ({}) at non-singleton dimension {}. Target sizes: {:?}. Tensor sizes: {:?}",
                        shape[i], d, i, shape, self.shape
                    ),
                ));
            }
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }
    /// Reorder dimensions.
    pub fn permute(&self, dims: &[usize]) -> Layout {
        Layout {
            shape: dims.iter().map(|&d| self.shape[d]).collect(),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        }
    }
    /// The strides a `view` to `shape` would have, if the storage allows it (PyTorch's
    /// `computeStride`).
    pub fn view_strides(&self, shape: &[usize]) -> Option<Vec<usize>> {
        if self.numel() == 0 || self.shape.is_empty() {
            return Some(contiguous_strides(shape));
        }
        let mut new_strides = vec![0; shape.len()];
        let mut view_d = shape.len() as isize - 1;
        let mut chunk_base_stride = *self.strides.last().unwrap();
        let mut tensor_numel = 1;
        let mut view_numel = 1;
        for tensor_d in (0..self.shape.len()).rev() {
            tensor_numel *= self.shape[tensor_d];
            if tensor_d == 0
                || (self.shape[tensor_d - 1] != 1
                    && self.strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
            {
                while view_d >= 0 && (view_numel < tensor_numel || shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = self.strides[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(new_strides)
    }
}

/// Resolve a shape with at most one `-1` against `numel`.
pub fn infer_shape(op: &'static str, shape: &[isize], numel_in: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    for (i, &d) in shape.iter().enumerate() {
        if d == -1 {
            if infer.is_some() {
                return Err(Error::arg(op, "only one dimension can be inferred"));
            }
            infer = Some(i);
        } else if d < 0 {
            return Err(Error::arg(op, format!("invalid shape dimension {d}")));
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let mut known = 1usize;
    for (i, &d) in out.iter().enumerate() {
        if Some(i) != infer {
            known = checked_mul(op, known, d, &out)?;
        }
    }
    match infer {
        Some(i) => {
            if known == 0 || numel_in % known != 0 {
                return Err(Error::shape(
                    op,
                    format!("shape '{shape:?}' is invalid for input of size {numel_in}"),
                ));
            }
            out[i] = numel_in / known;
        }
        None => {
            if known != numel_in {
                return Err(Error::shape(
                    op,
                    format!("shape '{shape:?}' is invalid for input of size {numel_in}"),
                ));
            }
        }
    }
    checked_numel(op, &out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn broadcast_rules() {
        assert_eq!(
            broadcast_shapes("t", &[2, 1, 3], &[4, 1]).unwrap(),
            vec![2, 4, 3]
        );
        assert_eq!(broadcast_shapes("t", &[], &[2]).unwrap(), vec![2]);
        assert!(broadcast_shapes("t", &[2, 3], &[4]).is_err());
    }
    #[test]
    fn view_strides_follow_pytorch() {
        let l = Layout::contiguous(&[2, 3, 4]).permute(&[1, 0, 2]);
        assert!(l.view_strides(&[3, 8]).is_none());
        assert_eq!(l.view_strides(&[3, 2, 2, 2]).unwrap(), vec![4, 12, 2, 1]);
        assert!(!l.is_contiguous());
    }
}
