//! DataLoader: batches, seeded shuffling, drop_last, background prefetch onto the target device.
//! A sample that fails to load (its `get` returns an error or panics) ends the epoch with an
//! [`Error::DataLoader`] naming it.

use super::transforms::with_epoch;
use super::{Dataset, Sample, Sampler};
use crate::{Device, Error, Result, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A batch: inputs `[B, ...]` and labels `[B]` (int64, PyTorch's `torch.long` targets), on the
/// loader's device.
pub type Batch = (Tensor, Tensor);

/// Iterates a dataset in batches (torch.utils.data.DataLoader with `batch_size`, `shuffle`,
/// `drop_last`; a background thread instead of `num_workers`). Each epoch's order comes from
/// `seed` and the epoch number, so a resumed run sees the same batches. Batches are assembled
/// and moved to `device` by a background thread, `prefetch` batches ahead. Every sample of a
/// batch must have the same shape; inputs are stacked as `[B, ...]` in the samples' dtype and
/// labels as int64 `[B]`.
///
/// ```
/// use std::sync::Arc;
/// use wgtorch::data::{DataLoader, TensorDataset};
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::zeros([10, 3], &Device::Cpu)?;
/// let y = Tensor::from_vec(vec![1i64; 10], [10], &Device::Cpu)?;
/// let ds = Arc::new(TensorDataset::new(&x, &y)?);
/// let loader = DataLoader::new(ds, 4, &Device::Cpu)?.shuffle(7).drop_last(true);
/// let mut sizes = Vec::new();
/// for batch in loader.epoch(0) {
///     sizes.push(batch?.0.shape()[0]);
/// }
/// assert_eq!(sizes, [4, 4]); // the last 2 samples are dropped
/// assert_eq!(loader.len(), 2);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct DataLoader {
    /// The samples (`len(loader.dataset)` in PyTorch is `loader.dataset.len()`).
    pub dataset: Arc<dyn Dataset>,
    /// Samples per batch.
    pub batch_size: usize,
    /// Shuffle each epoch.
    pub shuffle: bool,
    /// Drop a last, smaller batch.
    pub drop_last: bool,
    /// Where batches go.
    pub device: Device,
    /// Shuffle seed.
    pub seed: u64,
    /// Batches prepared ahead (0: load in the calling thread).
    pub prefetch: usize,
    /// Where each epoch's indices come from instead of `0..len` or the shuffle (PyTorch's
    /// `sampler=`, e.g. a [`super::DistributedSampler`]); exclusive with `shuffle`.
    pub sampler: Option<Arc<dyn Sampler>>,
}

impl DataLoader {
    /// A loader over `dataset` with batches of `batch_size` placed on `device`; shuffling off,
    /// `drop_last` off, seed 0, prefetch 2 (0 in the browser). A `batch_size` of 0 is an
    /// [`Error::InvalidArgument`].
    pub fn new(
        dataset: Arc<dyn Dataset>,
        batch_size: usize,
        device: &Device,
    ) -> Result<DataLoader> {
        if batch_size == 0 {
            return Err(Error::arg(
                "DataLoader",
                "batch_size should be a positive integer value, but got batch_size=0",
            ));
        }
        Ok(DataLoader {
            dataset,
            batch_size,
            shuffle: false,
            drop_last: false,
            device: *device,
            seed: 0,
            prefetch: if cfg!(target_arch = "wasm32") { 0 } else { 2 }, // no threads in the browser
            sampler: None,
        })
    }
    /// Builder: shuffle every epoch (PyTorch's `shuffle=True`), the order drawn from `seed` and
    /// the epoch number.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle = true;
        self.seed = seed;
        self
    }
    /// Builder: drop the last incomplete batch (PyTorch's `drop_last`).
    pub fn drop_last(mut self, on: bool) -> Self {
        self.drop_last = on;
        self
    }
    /// Builder: take each epoch's indices from `sampler` (PyTorch's `sampler=`), e.g. a
    /// [`super::DistributedSampler`] for this rank's share. Like PyTorch, a sampler and
    /// `shuffle` are exclusive: iterating a loader with both yields an error.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use wgtorch::data::{DataLoader, DistributedSampler, DistributedSamplerOptions, TensorDataset};
    /// use wgtorch::{Device, Tensor};
    /// let x = Tensor::arange(0.0, 10.0, 1.0, &Device::Cpu)?.reshape([10, 1])?;
    /// let y = Tensor::zeros([10], &Device::Cpu)?.to_dtype(wgtorch::DType::I64)?;
    /// let ds = Arc::new(TensorDataset::new(&x, &y)?);
    /// let opts = DistributedSamplerOptions { num_replicas: Some(2), rank: Some(1), ..Default::default() };
    /// let sampler = DistributedSampler::new(ds.len(), opts)?;
    /// let loader = DataLoader::new(ds, 2, &Device::Cpu)?.sampler(sampler);
    /// assert_eq!(loader.len(), 3); // rank 1's 5 samples in batches of 2
    /// let seen: usize = loader.epoch(0).map(|b| b.map(|b| b.0.shape()[0])).sum::<wgtorch::Result<_>>()?;
    /// assert_eq!(seen, 5);
    /// # use wgtorch::data::Dataset;
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn sampler(mut self, sampler: impl Sampler + 'static) -> Self {
        self.sampler = Some(Arc::new(sampler));
        self
    }

    /// Number of batches per epoch (PyTorch's `len(loader)`).
    pub fn len(&self) -> usize {
        let n = match &self.sampler {
            Some(s) => s.len(),
            None => self.dataset.len(),
        };
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }
    /// True when there are no batches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sample order of `epoch`: `0..len` without shuffling, else a permutation that depends
    /// only on `seed` and `epoch`.
    pub fn order(&self, epoch: usize) -> Vec<usize> {
        if let Some(s) = &self.sampler {
            return s.indices(epoch);
        }
        let mut idx: Vec<usize> = (0..self.dataset.len()).collect();
        if self.shuffle {
            let mut g = crate::Generator::new(
                self.seed ^ (epoch as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F),
            );
            for i in (1..idx.len()).rev() {
                let j = g.below(i as u64 + 1) as usize;
                idx.swap(i, j);
            }
        }
        idx
    }

    /// The batches of `epoch` (PyTorch's `for x, y in loader:`, with the epoch explicit). The
    /// first batch that fails to load is yielded as an `Err` ([`Error::DataLoader`] naming the
    /// sample, when a sample's `get` fails or panics; [`Error::Shape`] when samples' shapes
    /// differ), and the iteration ends there. The epoch also seeds [`super::Transformed`]'s
    /// augmentations of its batches (per loader: two loaders iterated together do not change
    /// each other's draws).
    pub fn epoch(&self, epoch: usize) -> BatchIter {
        if self.sampler.is_some() && self.shuffle {
            return BatchIter(Source::Failed(Some(Error::arg(
                "DataLoader",
                "sampler option is mutually exclusive with shuffle",
            ))));
        }
        let order = self.order(epoch);
        let n = self.dataset.len();
        if let Some(&bad) = order.iter().find(|&&i| i >= n) {
            return BatchIter(Source::Failed(Some(Error::DataLoader {
                index: Some(bad),
                msg: format!(
                    "the sampler yielded index {bad}, out of range for a data set of {n} samples"
                ),
                source: None,
            })));
        }
        let mut chunks: Vec<Vec<usize>> =
            order.chunks(self.batch_size).map(|c| c.to_vec()).collect();
        if self.drop_last && chunks.last().is_some_and(|c| c.len() < self.batch_size) {
            chunks.pop();
        }
        let (ds, dev) = (self.dataset.clone(), self.device);
        if self.prefetch == 0 {
            return BatchIter(Source::Inline {
                ds,
                dev,
                epoch,
                chunks: chunks.into_iter(),
            });
        }
        let (tx, rx) = sync_channel(self.prefetch);
        let worker = std::thread::spawn(move || {
            for c in chunks {
                let batch = with_epoch(epoch, || collate(ds.as_ref(), &c, &dev));
                let failed = batch.is_err();
                if tx.send(batch).is_err() || failed {
                    break;
                }
            }
        });
        BatchIter(Source::Background {
            rx: Some(rx),
            worker: Some(worker),
        })
    }
}

/// Sample `i` of `ds`, with a failure (an error or a panic in `get`) turned into an
/// [`Error::DataLoader`] naming the sample.
fn load(ds: &dyn Dataset, i: usize) -> Result<Sample> {
    match catch_unwind(AssertUnwindSafe(|| ds.get(i))) {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(Error::DataLoader {
            index: Some(i),
            msg: e.to_string(),
            source: Some(Box::new(e)),
        }),
        Err(payload) => Err(panicked(Some(i), "the dataset's get", payload)),
    }
}

/// The error for a panic (`payload`) in `what`.
fn panicked(index: Option<usize>, what: &str, payload: Box<dyn std::any::Any + Send>) -> Error {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    Error::DataLoader {
        index,
        msg: format!("{what} panicked: {text}"),
        source: None,
    }
}

/// Stack the samples `idx` of `ds` into one batch on `dev` (one upload per batch): inputs as
/// `[len(idx), ...]` in the samples' dtype (PyTorch's `default_collate`: f32 images stay f32,
/// int64 token ids stay int64), labels as int64 `[len(idx)]`. Errors as
/// [`DataLoader::epoch`]'s, and samples of different shapes.
pub fn collate(ds: &dyn Dataset, idx: &[usize], dev: &Device) -> Result<Batch> {
    let mut xs = Vec::with_capacity(idx.len());
    let mut labels = Vec::with_capacity(idx.len());
    for &i in idx {
        let (x, y) = load(ds, i)?;
        if let Some(first) = xs.first().map(Tensor::shape) {
            if first != x.shape() {
                return Err(Error::shape("collate", format!("samples have different shapes: {first:?} and {:?} (sample {i}); add a Resize transform", x.shape())));
            }
        }
        xs.push(x);
        labels.push(i64::from(y));
    }
    let data = if xs.is_empty() {
        Tensor::zeros([0], dev)?
    } else {
        // Stacked where the samples are (the CPU for every dataset here), then one copy to `dev`.
        Tensor::stack(&xs, 0)?.to(dev)?
    };
    Ok((data, Tensor::from_vec(labels, [idx.len()], dev)?))
}

/// Iterator over an epoch's batches, returned by [`DataLoader::epoch`]; it ends after the
/// first `Err`. Dropping it stops the prefetch thread and joins it.
pub struct BatchIter(Source);

enum Source {
    Inline {
        ds: Arc<dyn Dataset>,
        dev: Device,
        epoch: usize,
        chunks: std::vec::IntoIter<Vec<usize>>,
    },
    /// Batches from the prefetch thread; both None once the epoch is over.
    Background {
        rx: Option<Receiver<Result<Batch>>>,
        worker: Option<JoinHandle<()>>,
    },
    /// The epoch could not start: this error, once.
    Failed(Option<Error>),
    Done,
}

impl BatchIter {
    /// End the epoch: stop and join the prefetch thread; its panic, if it died of one.
    fn finish(&mut self) -> Option<Error> {
        let Source::Background { rx, worker } = std::mem::replace(&mut self.0, Source::Done) else {
            return None;
        };
        drop(rx); // a thread blocked sending wakes up and stops
        let payload = worker?.join().err()?;
        Some(panicked(None, "the prefetch thread", payload))
    }
}

impl Iterator for BatchIter {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        let item = match &mut self.0 {
            Source::Inline {
                ds,
                dev,
                epoch,
                chunks,
            } => chunks
                .next()
                .map(|c| with_epoch(*epoch, || collate(ds.as_ref(), &c, dev))),
            Source::Background { rx, .. } => rx.as_ref().and_then(|rx| rx.recv().ok()),
            Source::Failed(e) => return e.take().map(Err),
            Source::Done => return None,
        };
        match item {
            Some(Ok(batch)) => Some(Ok(batch)),
            // The thread ended: after the last batch, or by a panic outside `get`.
            None => self.finish().map(Err),
            Some(Err(e)) => {
                self.finish();
                Some(Err(e))
            }
        }
    }
}

impl Drop for BatchIter {
    fn drop(&mut self) {
        self.finish();
    }
}
