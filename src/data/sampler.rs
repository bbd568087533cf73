//! Samplers: the order in which a [`super::DataLoader`] visits a data set's indices, and
//! [`DistributedSampler`], which gives each data-parallel rank its own share of them.

use crate::{Error, Result};

/// Yields the sample indices of one epoch (PyTorch's `torch.utils.data.Sampler`), for
/// [`super::DataLoader::sampler`]. The epoch is explicit, as everywhere in the loader, so a
/// resumed run sees the same order.
pub trait Sampler: Send + Sync {
    /// The indices of `epoch`, in order.
    fn indices(&self, epoch: usize) -> Vec<usize>;
    /// How many indices each epoch yields (`len(sampler)`).
    fn len(&self) -> usize;
    /// True when an epoch yields nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Options of [`DistributedSampler::new`], PyTorch's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct DistributedSamplerOptions {
    /// Number of ranks sharing the data set (`None`: the process group's world size).
    pub num_replicas: Option<usize>,
    /// This process's rank (`None`: the process group's rank).
    pub rank: Option<usize>,
    /// Shuffle each epoch (default `true`), with a permutation seeded by `seed + epoch`.
    pub shuffle: bool,
    /// Shuffle seed; every rank must use the same one (default 0).
    pub seed: u64,
    /// Drop the tail so that the data divide evenly, instead of padding it by repeating the
    /// first indices (default `false`).
    pub drop_last: bool,
}

impl Default for DistributedSamplerOptions {
    fn default() -> Self {
        DistributedSamplerOptions {
            num_replicas: None,
            rank: None,
            shuffle: true,
            seed: 0,
            drop_last: false,
        }
    }
}

/// Restricts a data set of `len` samples to one rank's share (PyTorch's
/// `torch.utils.data.distributed.DistributedSampler`, with the same partition: the same
/// indices on the same rank for the same `(len, num_replicas, rank, seed, epoch)`, shuffled
/// with PyTorch's own `randperm` algorithm and generator). Every rank gets
/// [`DistributedSampler::num_samples`] indices: without `drop_last` the epoch's order is padded
/// by repeating its first indices, with it the tail is dropped. Give it to a loader with
/// [`super::DataLoader::sampler`]; the loader's epoch argument is PyTorch's `set_epoch`.
///
/// ```
/// use wgtorch::data::{DistributedSampler, DistributedSamplerOptions, Sampler};
/// let opts = |rank| DistributedSamplerOptions {
///     num_replicas: Some(3),
///     rank: Some(rank),
///     shuffle: false,
///     ..Default::default()
/// };
/// // 10 samples over 3 ranks: 4 each, padded by repeating index 0, 1.
/// let r0 = DistributedSampler::new(10, opts(0))?;
/// assert_eq!(r0.indices(0), [0, 3, 6, 9]);
/// assert_eq!(DistributedSampler::new(10, opts(1))?.indices(0), [1, 4, 7, 0]);
/// assert_eq!(DistributedSampler::new(10, opts(2))?.indices(0), [2, 5, 8, 1]);
/// // Shuffled: torch.randperm(10, generator=torch.Generator().manual_seed(0 + epoch)).
/// let s = DistributedSampler::new(10, DistributedSamplerOptions { shuffle: true, ..opts(0) })?;
/// assert_eq!(s.indices(0), [4, 5, 0, 2]); // randperm: [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]
/// assert!(DistributedSampler::new(10, opts(3)).is_err()); // rank must be < num_replicas
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    len: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: usize,
}

impl DistributedSampler {
    /// A sampler over `len` samples. `num_replicas` and `rank` default to the process group's
    /// (with the `mpi` feature, after `distributed::init_process_group`); without one, or with
    /// `rank >= num_replicas` or `num_replicas == 0`, it is an error.
    pub fn new(len: usize, opts: DistributedSamplerOptions) -> Result<DistributedSampler> {
        let num_replicas = match opts.num_replicas {
            Some(n) => n,
            None => group_size()?,
        };
        let rank = match opts.rank {
            Some(r) => r,
            None => group_rank()?,
        };
        if num_replicas == 0 {
            return Err(Error::arg(
                "DistributedSampler",
                "num_replicas should be a positive integer, but got num_replicas=0",
            ));
        }
        if rank >= num_replicas {
            return Err(Error::arg(
                "DistributedSampler",
                format!(
                    "Invalid rank {rank}, rank should be in the interval [0, {}]",
                    num_replicas - 1
                ),
            ));
        }
        Ok(DistributedSampler {
            len,
            num_replicas,
            rank,
            shuffle: opts.shuffle,
            seed: opts.seed,
            drop_last: opts.drop_last,
            epoch: 0,
        })
    }

    /// Indices per rank and epoch (PyTorch's `num_samples`).
    pub fn num_samples(&self) -> usize {
        if self.drop_last && !self.len.is_multiple_of(self.num_replicas) {
            // PyTorch's ceil((len - num_replicas) / num_replicas), which is len / num_replicas
            // (0 when there are fewer samples than ranks).
            self.len / self.num_replicas
        } else {
            self.len.div_ceil(self.num_replicas)
        }
    }

    /// Set the epoch that [`DistributedSampler::iter`] shuffles with (PyTorch's `set_epoch`;
    /// a loader passes its own epoch instead).
    pub fn set_epoch(&mut self, epoch: usize) {
        self.epoch = epoch;
    }

    /// This rank's indices for the epoch given to [`DistributedSampler::set_epoch`]
    /// (PyTorch's `iter(sampler)`).
    pub fn iter(&self) -> std::vec::IntoIter<usize> {
        self.indices(self.epoch).into_iter()
    }
}

impl Sampler for DistributedSampler {
    fn indices(&self, epoch: usize) -> Vec<usize> {
        let mut idx: Vec<usize> = if self.shuffle {
            torch_randperm(self.len, self.seed.wrapping_add(epoch as u64))
        } else {
            (0..self.len).collect()
        };
        let total = self.num_samples() * self.num_replicas;
        if self.drop_last {
            idx.truncate(total);
        } else if !idx.is_empty() {
            let n = idx.len();
            for i in 0..total - n {
                idx.push(idx[i % n]);
            }
        }
        idx.into_iter()
            .skip(self.rank)
            .step_by(self.num_replicas)
            .collect()
    }
    fn len(&self) -> usize {
        self.num_samples()
    }
}

#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
fn group_size() -> Result<usize> {
    crate::distributed::world_size()
}
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
fn group_rank() -> Result<usize> {
    crate::distributed::rank()
}
#[cfg(not(all(feature = "mpi", not(target_arch = "wasm32"))))]
fn group_size() -> Result<usize> {
    Err(no_group())
}
#[cfg(not(all(feature = "mpi", not(target_arch = "wasm32"))))]
fn group_rank() -> Result<usize> {
    Err(no_group())
}
#[cfg(not(all(feature = "mpi", not(target_arch = "wasm32"))))]
fn no_group() -> Error {
    Error::arg(
        "DistributedSampler",
        "Default process group has not been initialized (wgtorch was built without the `mpi` \
         feature): pass num_replicas and rank",
    )
}

/// `torch.randperm(n, generator=torch.Generator().manual_seed(seed))` on the CPU: PyTorch's
/// Fisher-Yates variant driven by its MT19937 generator, so the permutation is PyTorch's
/// exactly for `n` below 2³²/20 (PyTorch's own threshold; above it PyTorch switches to another
/// algorithm, and this one draws 64-bit numbers: a uniform permutation, but not PyTorch's).
fn torch_randperm(n: usize, seed: u64) -> Vec<usize> {
    let mut mt = Mt19937::new(seed as u32);
    let mut r: Vec<usize> = (0..n).collect();
    let small = (n as u64) < u64::from(u32::MAX) / 20;
    for i in 0..n.saturating_sub(1) {
        let draw = if small {
            u64::from(mt.next_u32())
        } else {
            (u64::from(mt.next_u32()) << 32) | u64::from(mt.next_u32())
        };
        let z = (draw % (n - i) as u64) as usize;
        r.swap(i, i + z);
    }
    r
}

/// The 32-bit Mersenne Twister (std::mt19937), PyTorch's CPU generator.
struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, next: 624 }
    }
    fn next_u32(&mut self) -> u32 {
        if self.next >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[k] = self.state[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.next = 0;
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }
}
