//! `TensorDataset`: samples are rows of tensors that share their first dimension.

use super::{Dataset, Sample};
use crate::{DType, Device, Error, Result, Tensor};

/// Inputs and integer labels held as two tensors with the same first dimension, as PyTorch's
/// `TensorDataset(inputs, labels)`: sample `i` is `(inputs[i], labels[i])`. The data live on the
/// CPU (the [`super::DataLoader`] moves each batch to its device).
///
/// ```
/// use std::sync::Arc;
/// use wgtorch::data::{DataLoader, TensorDataset};
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::rand([10, 1, 8, 8], &Device::Cpu)?;
/// let y = Tensor::from_vec((0..10i64).collect::<Vec<_>>(), [10], &Device::Cpu)?;
/// let loader = DataLoader::new(Arc::new(TensorDataset::new(&x, &y)?), 4, &Device::Cpu)?;
/// let (xb, yb) = loader.epoch(0).next().unwrap()?;
/// assert_eq!((xb.shape(), yb.shape()), (&[4usize, 1, 8, 8][..], &[4usize][..]));
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct TensorDataset {
    inputs: Tensor,
    labels: Vec<i64>,
}

impl TensorDataset {
    /// `inputs` `[N, ...]` (any dtype) and `labels` `[N]` (an integer dtype).
    pub fn new(inputs: &Tensor, labels: &Tensor) -> Result<TensorDataset> {
        const OP: &str = "TensorDataset";
        if labels.ndim() != 1 || labels.dtype().is_float() || labels.dtype() == DType::Bool {
            return Err(Error::arg(
                OP,
                format!(
                    "labels must be a 1-D integer tensor, got {:?} {}",
                    labels.shape(),
                    labels.dtype()
                ),
            ));
        }
        if inputs.ndim() == 0 || inputs.shape()[0] != labels.shape()[0] {
            return Err(Error::shape(
                OP,
                format!(
                    "Size mismatch between tensors: inputs {:?}, labels {:?}",
                    inputs.shape(),
                    labels.shape()
                ),
            ));
        }
        Ok(TensorDataset {
            inputs: inputs.detach().to(&Device::Cpu)?.contiguous()?,
            labels: labels.to_dtype(DType::I64)?.to_vec::<i64>()?,
        })
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get(&self, i: usize) -> Result<Sample> {
        super::check_index("TensorDataset", i, self.labels.len())?;
        let label = i32::try_from(self.labels[i]).map_err(|_| {
            Error::arg(
                "TensorDataset",
                format!(
                    "label {} of sample {i} does not fit a Sample's i32",
                    self.labels[i]
                ),
            )
        })?;
        Ok((self.inputs.narrow(0, i, 1)?.squeeze_dim(0)?, label))
    }
}
