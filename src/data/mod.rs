//! Data loading: the [`Dataset`] trait, a prefetching [`DataLoader`], transforms, and the
//! embedded digits, CIFAR-10 and ImageFolder data sets.

mod cifar;
mod digits;
mod image_folder;
mod loader;
mod tensor_dataset;
pub mod transforms;

#[cfg(feature = "download")]
pub use cifar::download_cifar10;
pub use cifar::Cifar10;
pub use digits::Digits;
pub use image_folder::ImageFolder;
pub use loader::{Batch, DataLoader};
pub use tensor_dataset::TensorDataset;
pub use transforms::Transform;

use crate::{Error, Result, Tensor};
use std::sync::Arc;

/// A sample: a CPU tensor and its class label (the DataLoader batches labels as int64,
/// PyTorch's target dtype).
pub type Sample = (Tensor, i32);

/// An indexable collection of samples.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sample `i` (a CPU tensor, e.g. `[C, H, W]` f32, and its label); an
    /// [`Error::IndexOutOfRange`] naming the dataset when `i >= len()`.
    fn get(&self, i: usize) -> Result<Sample>;
}

/// `Ok` when `i` indexes a dataset of `len` samples, else the error `Dataset::get` returns,
/// naming the dataset (`name`): "Cifar10: index 10 is out of bounds for dimension 0 with size 10".
pub(crate) fn check_index(name: &'static str, i: usize, len: usize) -> Result<()> {
    if i < len {
        return Ok(());
    }
    Err(Error::IndexOutOfRange {
        op: name,
        index: i64::try_from(i).unwrap_or(i64::MAX),
        dim: 0,
        size: len,
    })
}

/// A view of some indices of another dataset (train/test splits).
#[derive(Clone)]
pub struct Subset {
    /// The underlying data.
    pub dataset: Arc<dyn Dataset>,
    /// Which samples.
    pub indices: Vec<usize>,
}

impl Dataset for Subset {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, i: usize) -> Result<Sample> {
        check_index("Subset", i, self.indices.len())?;
        self.dataset.get(self.indices[i])
    }
}

/// Split `dataset` into a shuffled `(train, test)` pair, `train_fraction` (in [0, 1]) of it in the
/// first.
pub fn random_split(
    dataset: Arc<dyn Dataset>,
    train_fraction: f64,
    seed: u64,
) -> Result<(Subset, Subset)> {
    if !(0.0..=1.0).contains(&train_fraction) {
        return Err(Error::arg(
            "random_split",
            format!("train_fraction should be between 0 and 1, but got {train_fraction}"),
        ));
    }
    let mut idx: Vec<usize> = (0..dataset.len()).collect();
    let mut g = crate::Generator::new(seed);
    for i in (1..idx.len()).rev() {
        let j = g.below(i as u64 + 1) as usize;
        idx.swap(i, j);
    }
    let n = (dataset.len() as f64 * train_fraction).round() as usize;
    let test = idx.split_off(n);
    Ok((
        Subset {
            dataset: dataset.clone(),
            indices: idx,
        },
        Subset {
            dataset,
            indices: test,
        },
    ))
}

/// A dataset with a transform applied to each sample (seeded per sample and epoch).
pub struct Transformed<D> {
    /// The data.
    pub dataset: D,
    /// The transform.
    pub transform: Arc<dyn Transform>,
}

impl<D: Dataset> Dataset for Transformed<D> {
    fn len(&self) -> usize {
        self.dataset.len()
    }
    fn get(&self, i: usize) -> Result<Sample> {
        let (x, y) = self.dataset.get(i)?;
        let mut g = crate::Generator::new(
            0x7a11_5eed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ transforms::epoch_salt(),
        );
        Ok((self.transform.apply(&x, &mut g)?, y))
    }
}
