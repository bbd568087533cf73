//! Shapes, strides and broadcasting: the size arithmetic every op does before it allocates,
//! checked so that an overflowing shape is an error, not a wrapped size.
//!
//! ```
//! use wgtorch::shape::{broadcast_shapes, checked_numel, contiguous_strides};
//! assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
//! assert_eq!(broadcast_shapes("add", &[5, 1, 4], &[3, 1])?, vec![5, 3, 4]);
//! assert!(broadcast_shapes("add", &[2], &[3]).is_err());
//! assert!(checked_numel("zeros", &[1 << 40, 1 << 40]).is_err()); // 2⁸⁰ elements
//! # Ok::<(), wgtorch::Error>(())
//! ```

use std::fmt;

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
    /// Every element at its own position and no gaps: a permutation of a contiguous layout
    /// (PyTorch's `is_non_overlapping_and_dense`); false for broadcast (stride-0) views.
    ///
    /// ```
    /// use wgtorch::shape::Layout;
    /// let l = Layout::contiguous(&[2, 3]);
    /// assert!(l.permute(&[1, 0]).is_non_overlapping_and_dense());
    /// assert!(!l.broadcast_to("expand", &[4, 2, 3])?.is_non_overlapping_and_dense());
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut dims: Vec<(usize, usize)> = (self.shape.iter().copied())
            .zip(self.strides.iter().copied())
            .filter(|&(size, _)| size != 1)
            .collect();
        dims.sort_by_key(|&(_, stride)| stride);
        let mut expected = 1;
        for (size, stride) in dims {
            if stride != expected {
                return false;
            }
            expected *= size;
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

/// An integer that may stand in a shape or a list of dims: `i32` (what a bare literal such as
/// `-1` is), `i64`, `isize` and `usize`.
pub trait DimInt: Copy + fmt::Display {
    /// The value as `isize`, or `None` past its range.
    fn to_isize(self) -> Option<isize>;
}

macro_rules! dim_int {
    ($($t:ty),*) => {
        $(impl DimInt for $t {
            fn to_isize(self) -> Option<isize> {
                isize::try_from(self).ok()
            }
        })*
    };
}
dim_int!(i32, i64, isize, usize);

/// A shape or a list of dims, given the way PyTorch takes them: every op with such an argument
/// (`view`, `reshape`, `expand`, `permute`, `flip`, `repeat`, `sum_dims`, `Tensor::zeros`, ...)
/// accepts any of
///
/// - arrays and slices of `i32`, `i64`, `isize` or `usize`, by value or by reference:
///   `[-1, 5]` (a bare literal is `i32`), `&[-1, 5]`, `[2usize, 3]`, `x.shape()`;
/// - `Vec`s of those, by value or by reference;
/// - a single integer for a one-entry list (`x.view(-1)`, `Tensor::zeros(5, &dev)`);
/// - `[]` for a 0-d shape or an empty list of dims.
///
/// `-1` means "infer this size" for `view` / `reshape`, "keep this size" for `expand`, and the
/// last dim in a list of dims; each op checks its entries and reports PyTorch's errors. Arrays
/// are accepted up to 32 entries; pass longer lists as slices or `Vec`s.
///
/// A list of bare literals is `i32`, as in any Rust expression without other type information:
/// write sizes past `i32::MAX` with a type (`[2usize << 40]`, `1isize << 32`), or the compiler
/// reports the overflow.
///
/// ```
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::arange(0.0, 10.0, 1.0, &Device::Cpu)?;
/// assert_eq!(x.view([-1, 5])?.shape(), &[2, 5]);
/// assert_eq!(x.reshape(&[5, -1])?.shape(), &[5, 2]);
/// let dims: Vec<usize> = vec![2, 5];
/// assert_eq!(x.view(&dims)?.sum_dims(-1, false)?.shape(), &[2]);
/// assert_eq!(Tensor::zeros([], &Device::Cpu)?.ndim(), 0);
/// let err = x.view([-1, 7]).unwrap_err();
/// assert!(err.to_string().contains("shape '[-1, 7]' is invalid for input of size 10"));
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub trait IntoShape {
    /// The entries as signed integers, unchecked (`-1` kept), or an error naming `op` for an
    /// entry past `isize::MAX`.
    fn to_dims(&self, op: &'static str) -> Result<Vec<isize>>;

    /// The entries as the sizes of a tensor to create: each must be non-negative (PyTorch's
    /// "Trying to create tensor with negative dimension -1: [-1, 5]").
    fn to_sizes(&self, op: &'static str) -> Result<Vec<usize>> {
        let dims = self.to_dims(op)?;
        dims.iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    Error::arg(
                        op,
                        format!("Trying to create tensor with negative dimension {d}: {dims:?}"),
                    )
                })
            })
            .collect()
    }
}

impl<T: DimInt> IntoShape for [T] {
    fn to_dims(&self, op: &'static str) -> Result<Vec<isize>> {
        self.iter()
            .map(|&d| {
                d.to_isize().ok_or_else(|| {
                    let shape: Vec<String> = self.iter().map(|d| d.to_string()).collect();
                    Error::shape(
                        op,
                        format!(
                            "shape [{}] has too many elements (size {d} is more than {MAX_NUMEL})",
                            shape.join(", ")
                        ),
                    )
                })
            })
            .collect()
    }
}

impl<T: DimInt> IntoShape for Vec<T> {
    fn to_dims(&self, op: &'static str) -> Result<Vec<isize>> {
        self.as_slice().to_dims(op)
    }
}

impl<S: IntoShape + ?Sized> IntoShape for &S {
    fn to_dims(&self, op: &'static str) -> Result<Vec<isize>> {
        (**self).to_dims(op)
    }
}

/// `[]`: implemented for `usize` only, so that the element type of an empty literal is inferred
/// (the non-empty arrays below are generic over [`DimInt`], one impl per length, so that it is).
impl IntoShape for [usize; 0] {
    fn to_dims(&self, _op: &'static str) -> Result<Vec<isize>> {
        Ok(Vec::new())
    }
}

macro_rules! shape_arrays {
    ($($n:literal)*) => {
        $(impl<T: DimInt> IntoShape for [T; $n] {
            fn to_dims(&self, op: &'static str) -> Result<Vec<isize>> {
                self.as_slice().to_dims(op)
            }
        })*
    };
}
shape_arrays!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);

macro_rules! shape_scalars {
    ($($t:ty),*) => {
        $(impl IntoShape for $t {
            fn to_dims(&self, op: &'static str) -> Result<Vec<isize>> {
                [*self].to_dims(op)
            }
        })*
    };
}
shape_scalars!(i32, i64, isize, usize);

/// Resolve a shape with at most one `-1` against `numel` (`view` / `reshape`), with PyTorch's
/// errors.
pub fn infer_shape(op: &'static str, shape: &[isize], numel_in: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    for (i, &d) in shape.iter().enumerate() {
        if d == -1 {
            if infer.is_some() {
                return Err(Error::arg(op, "only one dimension can be inferred"));
            }
            infer = Some(i);
        } else if d < 0 {
            return Err(Error::arg(
                op,
                format!("invalid shape dimension {d} at index {i} of shape {shape:?}"),
            ));
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
        Some(_) if known == 0 && numel_in == 0 => {
            return Err(Error::shape(
                op,
                format!("cannot reshape tensor of 0 elements into shape {shape:?} because the unspecified dimension size -1 can be any value and is ambiguous"),
            ));
        }
        Some(i) => {
            if known == 0 || !numel_in.is_multiple_of(known) {
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
