//! Views shaped by other tensors: `meshgrid` (expanded views of 1-D inputs) and `view_as`.

use crate::{Error, Result, Tensor};

/// How [`Tensor::meshgrid`] orders its output dims (PyTorch's `indexing=`): `Ij` is matrix
/// indexing (output dim i follows input i), `Xy` Cartesian (the first two swapped, as NumPy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Matrix indexing: outputs of shape `[len(t0), len(t1), ...]`.
    Ij,
    /// Cartesian indexing: outputs of shape `[len(t1), len(t0), len(t2), ...]`.
    Xy,
}

impl Tensor {
    /// Coordinate grids from 0-d or 1-D tensors (torch.meshgrid with an explicit `indexing`):
    /// output `i` holds `tensors[i]` broadcast along every other dim. The outputs are expanded
    /// views of the inputs (no copy), differentiable.
    ///
    /// ```
    /// use wgtorch::{ops::Indexing, Device, Tensor};
    /// let x = Tensor::from_vec(vec![1f32, 2., 3.], [3], &Device::Cpu)?;
    /// let y = Tensor::from_vec(vec![4f32, 5.], [2], &Device::Cpu)?;
    /// let g = Tensor::meshgrid(&[&x, &y], Indexing::Xy)?;
    /// assert_eq!(g[0].shape(), [2, 3]);
    /// assert_eq!(g[0].to_vec::<f32>()?, [1., 2., 3., 1., 2., 3.]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn meshgrid(tensors: &[&Tensor], indexing: Indexing) -> Result<Vec<Tensor>> {
        const OP: &str = "meshgrid";
        let Some(first) = tensors.first() else {
            return Err(Error::arg(OP, "meshgrid expects a non-empty TensorList"));
        };
        for t in tensors {
            if t.ndim() > 1 {
                return Err(Error::shape(
                    OP,
                    format!(
                        "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {:?}",
                        t.shape()
                    ),
                ));
            }
            if t.dtype() != first.dtype() {
                return Err(Error::arg(
                    OP,
                    format!(
                        "meshgrid expects all tensors to have the same dtype (got {} and {})",
                        first.dtype(),
                        t.dtype()
                    ),
                ));
            }
            first.same_device(OP, t)?;
        }
        // Cartesian indexing is matrix indexing with the first two inputs swapped (their grids
        // are handed back in the inputs' order).
        let swap = indexing == Indexing::Xy && tensors.len() >= 2;
        let mut order: Vec<&Tensor> = tensors.to_vec();
        if swap {
            order.swap(0, 1);
        }
        let shape: Vec<usize> = order.iter().map(|t| t.numel()).collect();
        let mut grids = order
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut s = vec![1isize; shape.len()];
                s[i] = -1;
                t.reshape(&s)?.expand(&shape)
            })
            .collect::<Result<Vec<_>>>()?;
        if swap {
            grids.swap(0, 1);
        }
        Ok(grids)
    }

    /// `self` viewed with `other`'s shape (torch.Tensor.view_as): `view(other.shape())`.
    pub fn view_as(&self, other: &Tensor) -> Result<Tensor> {
        let shape: Vec<isize> = other.shape().iter().map(|&s| s as isize).collect();
        self.view(&shape)
    }
}
