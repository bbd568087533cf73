//! Data loading (PyTorch's `torch.utils.data` and torchvision's data sets): the [`Dataset`]
//! trait, a prefetching [`DataLoader`], [`transforms`], and the embedded [`Digits`],
//! [`Cifar10`], [`ImageFolder`] and [`TensorDataset`] data sets. Samples are CPU tensors with
//! an integer class label; the loader stacks them into input batches (in the samples' dtype)
//! and int64 label batches on its device.
//!
//! ```
//! use std::sync::Arc;
//! use wgtorch::data::{DataLoader, TensorDataset};
//! use wgtorch::{DType, Device, Tensor};
//! let dev = Device::Cpu;
//! // Ten samples of two features, x[i] = [2i, 2i + 1], labelled i % 2.
//! let x = Tensor::arange(0.0, 20.0, 1.0, &dev)?.reshape([10, 2])?;
//! let y = Tensor::from_vec((0..10i64).map(|i| i % 2).collect::<Vec<_>>(), [10], &dev)?;
//! let loader = DataLoader::new(Arc::new(TensorDataset::new(&x, &y)?), 4, &dev)?.shuffle(42);
//! assert_eq!(loader.len(), 3); // 4 + 4 + 2, the last batch kept (drop_last is false)
//! for epoch in 0..2 {
//!     let mut seen = 0;
//!     for batch in loader.epoch(epoch) {
//!         let (xb, yb) = batch?; // inputs [B, 2] f32, labels [B] int64
//!         assert_eq!((xb.shape()[1], yb.dtype()), (2, DType::I64));
//!         let (xs, ys) = (xb.to_vec::<f32>()?, yb.to_vec::<i64>()?);
//!         for (j, &label) in ys.iter().enumerate() {
//!             assert_eq!((xs[2 * j] as i64 / 2) % 2, label); // rows keep their labels
//!         }
//!         seen += ys.len();
//!     }
//!     assert_eq!(seen, 10);
//! }
//! // Each epoch's order comes from the seed and the epoch: reproducible, and reshuffled.
//! assert_eq!(loader.order(1), loader.order(1));
//! assert_ne!(loader.order(0), loader.order(1));
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod cifar;
mod digits;
mod image_folder;
mod loader;
mod sampler;
mod tensor_dataset;
pub mod transforms;

#[cfg(feature = "download")]
pub use cifar::download_cifar10;
pub use cifar::Cifar10;
pub use digits::Digits;
pub use image_folder::ImageFolder;
pub use loader::{collate, Batch, BatchIter, DataLoader};
pub use sampler::{DistributedSampler, DistributedSamplerOptions, Sampler};
pub use tensor_dataset::TensorDataset;
pub use transforms::Transform;

use crate::{Error, Result, Tensor};
use std::sync::Arc;

/// A sample: a CPU tensor and its class label (the DataLoader batches labels as int64,
/// PyTorch's target dtype, and inputs in their own dtype).
pub type Sample = (Tensor, i32);

/// An indexable collection of samples (PyTorch's map-style `torch.utils.data.Dataset`:
/// `len` is `__len__`, `get` is `__getitem__`). `Send + Sync`, so the [`DataLoader`]'s prefetch
/// thread can read it.
///
/// ```
/// use wgtorch::data::{Dataset, Sample};
/// use wgtorch::{Device, Error, Result, Tensor};
/// struct Squares(usize);
/// impl Dataset for Squares {
///     fn len(&self) -> usize {
///         self.0
///     }
///     fn get(&self, i: usize) -> Result<Sample> {
///         if i >= self.0 {
///             let (index, size) = (i as i64, self.0);
///             return Err(Error::IndexOutOfRange { op: "Squares", index, dim: 0, size });
///         }
///         Ok((Tensor::from_vec(vec![i as f32], [1], &Device::Cpu)?, (i * i) as i32))
///     }
/// }
/// let ds = Squares(4);
/// assert_eq!(ds.get(3)?.1, 9);
/// assert!(ds.get(4).is_err());
/// # Ok::<(), wgtorch::Error>(())
/// ```
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

/// A view of some indices of another dataset (train/test splits; torch.utils.data.Subset):
/// sample `i` is `dataset.get(indices[i])`.
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

/// Split `dataset` into a shuffled `(train, test)` pair, `round(len * train_fraction)` samples
/// in the first and the rest in the second; the shuffle comes from `seed` alone (PyTorch's
/// `random_split(dataset, [f, 1 - f], generator)`). A `train_fraction` outside [0, 1] (or NaN)
/// is an [`Error::InvalidArgument`].
///
/// ```
/// use std::sync::Arc;
/// use wgtorch::data::{random_split, Dataset, TensorDataset};
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::zeros([10, 3], &Device::Cpu)?;
/// let y = Tensor::from_vec(vec![0i64; 10], [10], &Device::Cpu)?;
/// let (train, test) = random_split(Arc::new(TensorDataset::new(&x, &y)?), 0.8, 0)?;
/// assert_eq!((train.len(), test.len()), (8, 2));
/// let mut all: Vec<usize> = train.indices.iter().chain(&test.indices).copied().collect();
/// all.sort();
/// assert_eq!(all, (0..10).collect::<Vec<_>>()); // disjoint, and covering every sample
/// # Ok::<(), wgtorch::Error>(())
/// ```
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

/// A dataset with a transform applied to each sample's input (torchvision's `transform=`
/// argument). The transform's generator is seeded from the sample index and the epoch of the
/// batch a [`DataLoader`] is loading (epoch 0 when `get` is called outside a loader), so an
/// epoch's augmentations are reproducible.
///
/// ```
/// use std::sync::Arc;
/// use wgtorch::data::transforms::{Compose, Normalize, RandomHorizontalFlip};
/// use wgtorch::data::{Dataset, TensorDataset, Transformed};
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::ones([4, 1, 2, 3], &Device::Cpu)?; // four 1-channel 2x3 images
/// let y = Tensor::from_vec(vec![0i64, 1, 0, 1], [4], &Device::Cpu)?;
/// let transform = Compose(vec![
///     Box::new(RandomHorizontalFlip { p: 0.5 }),
///     Box::new(Normalize { mean: vec![0.5], std: vec![0.5] }),
/// ]);
/// let ds = Transformed { dataset: TensorDataset::new(&x, &y)?, transform: Arc::new(transform) };
/// let (img, label) = ds.get(1)?;
/// assert_eq!((img.to_vec::<f32>()?, label), (vec![1.0; 6], 1)); // (1 - 0.5) / 0.5
/// # Ok::<(), wgtorch::Error>(())
/// ```
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
