//! The GEMM autotuner: which [`Tile`] each GEMM kernel family runs at each shape, per adapter.
//! CPU adapters choose among register tiles (of [`Tile::CANDIDATES`], and
//! [`Tile::SUBGROUP_CANDIDATES`] where the adapter's subgroups are 8 wide), real GPUs among
//! shared-memory tiles ([`Tile::SHARED_CANDIDATES`], and for native f16 GEMMs
//! [`Tile::SHARED_HALF_CANDIDATES`]): [`GpuContext::gemm_tiles`].
//!
//! A (kernel, shape bucket) on an adapter runs the adapter's default tile, the first of its
//! tiles ([`Tile::DEFAULT`], [`Tile::SHARED_DEFAULT`]: the kernels of before the tuner; in the
//! browser, where nothing is tuned, a CPU adapter's is [`Tile::BROWSER_CPU_DEFAULT`]) until it
//! is tuned. Its first GEMM
//! queues nothing, so that a fresh process's first step has the cores to itself; its second
//! queues the other candidates for
//! the context's background compiler (one bucket's at a time; on llvmpipe without its shader
//! cache they take up to a second each). The first GEMM of the bucket once they are compiled (by
//! this bucket, another of the same kernel, or a forced tile) runs each candidate twice on its
//! own operands, the default into the result and the others into a NaN-filled scratch buffer,
//! timed by timestamp queries around their compute passes where the adapter has them, else by
//! the wall clock around a wait for the queue; the better run counts (the first may include the
//! driver's code generation). A candidate whose output differs from the default's is never
//! chosen. The fastest becomes the bucket's tile, in memory and in a cache file on disk, so that
//! the next process starts tuned; a tile read from there that is not compiled yet compiles in
//! the background too, from the bucket's second GEMM on, the default running meanwhile. Tuning
//! begins no bucket once a process has spent [`BUDGET`] on the runs (see
//! [`set_tuning_budget`]), and gives up a bucket whose runs would pass what is left. The trial
//! runs are left out of the dispatch counters.
//!
//! `WGTORCH_GEMM_TILE` overrides it: `default` runs the adapter's default everywhere, a tile such
//! as `8x4/8x8` or `8x8/16x16k8` forces that tile on any adapter (the tests force each
//! candidate; a subgroup tile such as `8x4/16x4s` runs without subgroups where they are not
//! offered, a tile staging f16 such as `8x8/16x16k8h` stages f32 in a GEMM that is not native
//! f16), `tune` (or unset, or a value that is not a tile) tunes.
//! `WGTORCH_CACHE_DIR` moves the cache (else `$XDG_CACHE_HOME/wgtorch`, `~/.cache/wgtorch`, or
//! `%LOCALAPPDATA%\wgtorch`); `WGTORCH_CACHE_DIR=none` keeps results in memory only. Nothing is
//! tuned in the browser, where a wait for the queue would block the page.
//!
//! ```
//! use wgtorch::backend::gpu::tune;
//! use wgtorch::{Device, Tensor};
//! if let Ok(gpu) = Device::gpu() {
//!     let a = Tensor::randn([64, 64], &gpu)?;
//!     // On a software adapter: the default tile, or the tile read from the cache once it is
//!     // compiled; tuned at a later GEMM of this shape (see `wait_for_compiles`).
//!     let b = a.matmul(&a)?;
//!     assert_eq!(b.shape(), [64, 64]);
//!     for (bucket, t) in tune::tuned_gemm_tiles(0) {
//!         println!("{bucket}: {} ({:?} µs per candidate)", t.tile, t.times_us);
//!     }
//! }
//! # Ok::<(), wgtorch::Error>(())
//! ```

#[cfg(not(target_arch = "wasm32"))]
use super::background::Compiled;
use super::kernels::{GpuType, Kernel, Tile};
use super::GpuContext;
use crate::Result;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The most wall time one process spends tuning, unless [`set_tuning_budget`] says otherwise.
pub const BUDGET: Duration = Duration::from_millis(1000);

/// What `WGTORCH_GEMM_TILE` (or [`force_gemm_tile`]) asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    Tune,
    /// The adapter's default tile.
    Default,
    Fixed(Tile),
}

/// One tuned bucket: the tile chosen and what each candidate measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    /// The chosen tile.
    pub tile: Tile,
    /// `[m, n, k, batches]` of the GEMM that tuned the bucket (zeros when read from the disk
    /// cache).
    pub dims: [usize; 4],
    /// Each candidate's time (the best of its runs) on the GEMM that tuned the bucket, in µs (`None`:
    /// refused, its output differed from the default's); empty when read from the disk cache.
    pub times_us: Vec<(Tile, Option<f64>)>,
    /// Whether `times_us` are the kernels' own times (timestamp queries), not the wall clock's.
    pub timestamps: bool,
}

/// A bucket's candidates timed so far (the tiles in the tuner's order, the default first), when
/// the budget ran out before all were: the next attempt, in this process or a later one (from
/// the disk cache), times the rest.
#[derive(Clone, Debug, PartialEq)]
struct Progress {
    /// Timed by timestamp queries (else the wall clock); an attempt that times otherwise
    /// starts over.
    timestamps: bool,
    times: Vec<(Tile, Option<f64>)>,
}

struct State {
    policy: Option<Policy>,
    budget: Duration,
    /// Per adapter (ordinal): the disk cache was read; the tuned buckets.
    tuned: BTreeMap<usize, (bool, HashMap<String, Tuned>)>,
    spent: Duration,
    /// Buckets (adapter, key) whose tuning was given up in this process: not tried again.
    skipped: BTreeSet<(usize, String)>,
    /// Buckets (adapter, key) launched before in this process.
    seen: BTreeSet<(usize, String)>,
    /// Buckets (adapter, key) timed in part.
    progress: BTreeMap<(usize, String), Progress>,
    /// Kernels (adapter, pipeline key) a trial has run in this process: the driver has
    /// generated their code (llvmpipe does at a pipeline's first dispatch), one run times them.
    warm: BTreeSet<(usize, String)>,
}

static STATE: Mutex<State> = Mutex::new(State {
    policy: None,
    budget: BUDGET,
    tuned: BTreeMap::new(),
    spent: Duration::ZERO,
    skipped: BTreeSet::new(),
    seen: BTreeSet::new(),
    progress: BTreeMap::new(),
    warm: BTreeSet::new(),
});
/// Held while a bucket is tuned (one at a time; another thread meanwhile runs the default).
#[cfg(not(target_arch = "wasm32"))]
static TUNING: Mutex<()> = Mutex::new(());

thread_local! {
    /// Set while this thread runs a candidate for the tuner's timing alone.
    static TRIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is running a tuner's trial of a candidate (its dispatch is not an op's:
/// the dispatch counters leave it out).
pub(super) fn trial_run() -> bool {
    TRIAL.get()
}

/// Force every GEMM to run `tile` (`None`: back to tuning), instead of what `WGTORCH_GEMM_TILE`
/// says: any tile runs on any adapter (a register tile on a GPU, a shared tile on a CPU
/// adapter), except that a subgroup tile runs in its portable form where the adapter does not
/// offer subgroup tiles, and a tile staging f16 stages f32 in a GEMM that is not native f16. A
/// GEMM in a tile whose staged blocks pass the adapter's workgroup memory fails with
/// [`crate::Error::GpuLimit`].
///
/// ```
/// use wgtorch::backend::gpu::{kernels::Tile, tune::force_gemm_tile};
/// force_gemm_tile(Some(Tile::CANDIDATES[1]));
/// force_gemm_tile(None);
/// ```
pub fn force_gemm_tile(tile: Option<Tile>) {
    STATE.lock().policy = Some(tile.map_or(Policy::Tune, Policy::Fixed));
}

/// Let this process spend up to `budget` tuning in all (default [`BUDGET`]), e.g. to tune every
/// GEMM of a model in one warm-up step instead of over several runs.
///
/// ```
/// use std::time::Duration;
/// wgtorch::backend::gpu::tune::set_tuning_budget(Duration::from_secs(30));
/// ```
pub fn set_tuning_budget(budget: Duration) {
    STATE.lock().budget = budget;
}

/// The buckets tuned (or read from the disk cache) on GPU `ordinal`, by key
/// (`kernel|m|n|k|batches` with each size rounded up to a power of two).
pub fn tuned_gemm_tiles(ordinal: usize) -> Vec<(String, Tuned)> {
    let s = STATE.lock();
    let mut v: Vec<_> = s
        .tuned
        .get(&ordinal)
        .map(|(_, m)| m.iter().map(|(k, t)| (k.clone(), t.clone())).collect())
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Block until the pipelines that GPU `ordinal` compiles in the background are ready (or have
/// failed): the tuner's candidates, and tuned tiles read from the disk cache. The next GEMM of
/// each bucket then runs tuned, or is tuned; for benchmarks and tests, which want the tuned
/// kernels from a known step on.
///
/// ```
/// use wgtorch::backend::gpu::tune;
/// use wgtorch::{Device, Tensor};
/// if let Ok(gpu) = Device::gpu() {
///     let a = Tensor::randn([64, 64], &gpu)?;
///     a.matmul(&a)?; // the default tile
///     a.matmul(&a)?; // the default tile; the candidates compile meanwhile
///     tune::wait_for_compiles(0)?;
///     a.matmul(&a)?; // tuned (on a software adapter, within the budget)
/// }
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn wait_for_compiles(ordinal: usize) -> Result<()> {
    let ctx = super::context(ordinal)?;
    #[cfg(not(target_arch = "wasm32"))]
    ctx.wait_background_compiles();
    #[cfg(target_arch = "wasm32")]
    let _ = ctx;
    Ok(())
}

/// Forget what was tuned in this process (the next GEMM reads the disk cache again) and the
/// time spent; for tests and the bench.
#[doc(hidden)]
pub fn reset_gemm_tuning() {
    let mut s = STATE.lock();
    s.tuned.clear();
    s.skipped.clear();
    s.seen.clear();
    s.progress.clear();
    s.warm.clear();
    s.spent = Duration::ZERO;
}

fn policy() -> Policy {
    let mut s = STATE.lock();
    *s.policy.get_or_insert_with(|| {
        // A tile that does not parse is ignored (tuning, as unset) rather than failing every
        // GEMM; `Tile`'s parser names the form.
        match std::env::var("WGTORCH_GEMM_TILE").as_deref() {
            Ok("default") => Policy::Default,
            Ok(t) => t.parse().map_or(Policy::Tune, Policy::Fixed),
            Err(_) => Policy::Tune,
        }
    })
}

/// The bucket key of a GEMM of kernel family `family` (its key without the tile).
fn bucket(family: &str, [m, n, k, batches]: [usize; 4]) -> String {
    let p = |x: usize| x.max(1).checked_next_power_of_two().unwrap_or(x);
    format!("{family}|{}|{}|{}|{}", p(m), p(n), p(k), p(batches))
}

/// A GEMM to run with the tile chosen for it: `kernel(tile)` is its kernel in that tile and
/// `run(tile, bufs)` launches it over `bufs`, whose third (binding 3) is the output, written
/// whole by every run.
pub(super) struct TunedGemm<'a, K, R> {
    /// The op's name (for errors of the candidates' compilations; the tuner's alone).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub op: &'static str,
    /// Storage type of the output (the tuner's comparison).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub ty: GpuType,
    /// `[m, n, k, batches]`.
    pub dims: [usize; 4],
    pub bufs: &'a [&'a wgpu::Buffer],
    /// The tiles to time, the adapter's default first ([`GpuContext::gemm_tiles`]).
    pub tiles: &'a [Tile],
    pub kernel: K,
    pub run: R,
}

impl<K, R> TunedGemm<'_, K, R>
where
    K: Fn(Tile) -> Kernel,
    R: Fn(Tile, &[&wgpu::Buffer]) -> Result<()>,
{
    /// Run it in the tile that `WGTORCH_GEMM_TILE`, the tuned buckets or, once, the tuner pick.
    pub(super) fn launch(self, ctx: &Arc<GpuContext>) -> Result<()> {
        let key = match policy() {
            Policy::Fixed(t) => {
                // A subgroup tile runs in its portable form where the adapter's subgroups are
                // not 8 wide (or are off); a half tile stages f32 in a GEMM that is not native
                // f16.
                let mut t = t;
                if t.subgroup && !self.tiles.iter().any(|c| c.subgroup) {
                    t = t.portable();
                }
                if t.half && self.ty != GpuType::F16 {
                    t = t.staging_f32();
                }
                let have = ctx.limits.max_compute_workgroup_storage_size;
                if t.workgroup_bytes() > have {
                    return Err(crate::Error::GpuLimit {
                        op: self.op,
                        what: format!("the forced GEMM tile {t}'s workgroup memory"),
                        needed: t.workgroup_bytes() as u64,
                        limit: have as u64,
                        limit_name: "max_compute_workgroup_storage_size",
                        adapter: ctx.adapter_name().to_string(),
                    });
                }
                return (self.run)(t, self.bufs);
            }
            Policy::Default => return (self.run)(self.default(), self.bufs),
            Policy::Tune => {
                let suffix = format!("_{}", super::kernels::tile_key(&self.default()));
                let family = (self.kernel)(self.default()).key();
                // Buckets tuned with subgroup tiles are apart from those tuned without.
                let sg = if self.tiles.iter().any(|t| t.subgroup) {
                    "|s"
                } else {
                    ""
                };
                bucket(family.trim_end_matches(&suffix), self.dims) + sg
            }
        };
        if let Some(t) = known(ctx, &key).filter(|t| self.tiles.contains(t)) {
            return (self.run)(self.compiled(ctx, t, &key), self.bufs);
        }
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(ran) = self.tune(ctx, &key) {
            let mut s = STATE.lock();
            if let Some(tuned) = ran {
                s.tuned.entry(ctx.ordinal).or_default().1.insert(key, tuned);
            }
            let all = s.tuned.entry(ctx.ordinal).or_default().1.clone();
            let progress: Vec<_> = s
                .progress
                .iter()
                .filter(|((o, _), _)| *o == ctx.ordinal)
                .map(|((_, k), p)| (k.clone(), p.clone()))
                .collect();
            drop(s);
            disk::store(ctx, &all, &progress);
            // The default's run left the result in the output.
            return Ok(());
        }
        (self.run)(self.default(), self.bufs)
    }

    /// The adapter's default tile: the first of [`Self::tiles`].
    fn default(&self) -> Tile {
        self.tiles[0]
    }

    /// `tile` when its kernel is compiled; else the default, while `tile` compiles in the
    /// background from the bucket's second launch on (for good, if it fails to compile: the
    /// default is always right).
    fn compiled(&self, ctx: &Arc<GpuContext>, tile: Tile, key: &str) -> Tile {
        #[cfg(not(target_arch = "wasm32"))]
        if tile != self.default() {
            let k = (self.kernel)(tile);
            let ready = ctx.has_pipeline(&k.key())
                || (recurs(ctx, key)
                    && ctx.compile_behind(self.op, &k.key(), || k.source()) == Compiled::Ready);
            if !ready {
                return self.default();
            }
        }
        #[cfg(target_arch = "wasm32")]
        let _ = (ctx, key);
        tile
    }

    /// Time the candidates on this GEMM within what is left of the budget, going on from those
    /// timed before: `Some(Some(_))` when the last is timed (tuned), `Some(None)` when the budget
    /// ran out after some (kept, for the next attempt or process); in both the default's run
    /// wrote the output. `None` (the default then runs) when the budget is spent, another
    /// thread is tuning, the candidates are still compiling (queued here when the background
    /// worker is idle, so that it compiles one bucket's at a time), a candidate failed to
    /// compile or launch (the GEMM then runs, and reports its own errors, as untuned), or an
    /// attempt timed nothing new: such a bucket is not tried again in this process.
    #[cfg(not(target_arch = "wasm32"))]
    fn tune(&self, ctx: &Arc<GpuContext>, key: &str) -> Option<Option<Tuned>> {
        use std::time::Instant;
        let _lock = TUNING.try_lock()?;
        let skip = || {
            STATE.lock().skipped.insert((ctx.ordinal, key.to_string()));
        };
        let left = {
            let s = STATE.lock();
            if s.skipped.contains(&(ctx.ordinal, key.to_string())) {
                return None;
            }
            s.budget.saturating_sub(s.spent)
        };
        if left.is_zero() || self.bufs.len() < 3 {
            return None;
        }
        // The default is compiled by its own runs.
        let missing: Vec<Kernel> = self
            .tiles
            .iter()
            .filter(|&&t| t != self.default())
            .map(|&t| (self.kernel)(t))
            .filter(|k| !ctx.has_pipeline(&k.key()))
            .collect();
        if !missing.is_empty() {
            if recurs(ctx, key) && ctx.background_idle() {
                for k in missing {
                    if ctx.compile_behind(self.op, &k.key(), || k.source()) == Compiled::Failed {
                        skip();
                        return None;
                    }
                }
            }
            return None;
        }
        // Earlier work is not this GEMM's time, nor the budget's.
        ctx.submit();
        if ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .is_err()
        {
            return None;
        }
        let id = (ctx.ordinal, key.to_string());
        let before = STATE.lock().progress.get(&id).cloned();
        let start = Instant::now();
        let res = self
            .measure(ctx, start, left, before.as_ref())
            .ok()
            .flatten();
        TRIAL.set(false);
        let mut s = STATE.lock();
        s.spent += start.elapsed();
        let complete = |p: &Progress| p.times.len() == self.tiles.len();
        let Some((now, _)) = res.filter(|(p, new)| *new > 0 || complete(p)) else {
            drop(s);
            skip();
            return None;
        };
        if !complete(&now) {
            s.progress.insert(id, now);
            return Some(None);
        }
        s.progress.remove(&id);
        let tile = now
            .times
            .iter()
            .filter_map(|(t, us)| Some((*t, (*us)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(self.default(), |(t, _)| t);
        Some(Some(Tuned {
            tile,
            dims: self.dims,
            times_us: now.times,
            timestamps: now.timestamps,
        }))
    }

    /// Run the default and then each candidate not timed `before` twice (one run alone may
    /// include the driver's code generation), while two more runs of the default's time fit in
    /// what is `left`, refusing those whose output differs from the default's: the times so far,
    /// in the tiles' order (`before`'s kept when timed by the same clock), and how many
    /// candidates this call timed. Runs are timed by
    /// timestamp queries around their compute passes where the adapter has them (the kernels'
    /// own time), else by the wall clock around a wait for the queue.
    #[cfg(not(target_arch = "wasm32"))]
    fn measure(
        &self,
        ctx: &Arc<GpuContext>,
        start: std::time::Instant,
        left: Duration,
        before: Option<&Progress>,
    ) -> Result<Option<(Progress, usize)>> {
        use std::time::Instant;
        let wait = || ctx.device.poll(wgpu::PollType::wait_indefinitely()).is_ok();
        // The output's bytes, in whole words (copies move words).
        let [m, n, _, batches] = self.dims;
        let outputs = m * n * batches;
        let bytes = self.ty.bytes(outputs).next_multiple_of(4);
        let mut want = None;
        let mut times = Vec::new();
        // Whether the runs are timed by timestamps: decided by the first, held by the rest.
        let mut stamped = None;
        // One run for the default (the op's own: the bucket ran before, so the driver has its
        // code) and for a kernel a trial ran before; two for a kernel's first trial, whose first
        // run may include the driver's code generation.
        let warm_key = |t: Tile| (ctx.ordinal, (self.kernel)(t).key());
        let reps = |t: Tile| match t == self.default() || STATE.lock().warm.contains(&warm_key(t)) {
            true => 1,
            false => 2,
        };
        let (mut default_wall, mut full, mut new) = (0.0, false, 0);
        for (i, &tile) in self.tiles.iter().enumerate() {
            if i > 0 {
                let same_clock = before.filter(|b| Some(b.timestamps) == stamped);
                if let Some(t) = same_clock.and_then(|b| b.times.iter().find(|t| t.0 == tile)) {
                    times.push(*t);
                    continue;
                }
                let room = left.saturating_sub(start.elapsed()).as_secs_f64();
                full = full || reps(tile) as f64 * default_wall > room;
                if full {
                    continue;
                }
                new += 1;
            }
            // The default writes the result; the others a scratch buffer of its size, of their
            // own (a pooled one could still be read by work another thread recorded), NaN
            // everywhere first (all-ones bits in every float storage) so that an output the
            // candidate fails to write cannot pass for the default's.
            let mut b = self.bufs.to_vec();
            let scratch;
            if i > 0 {
                let (buf, err) = ctx.scoped(|| {
                    use wgpu::util::DeviceExt;
                    ctx.device
                        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                            label: Some("wgtorch-tuning-scratch"),
                            contents: &vec![0xff; bytes as usize],
                            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                        })
                });
                if err.is_some() {
                    return Ok(None);
                }
                scratch = buf;
                b[2] = &scratch;
            }
            let mut best = f64::INFINITY;
            for _ in 0..reps(tile) {
                // The default's run is the op's own; every other run is a trial.
                TRIAL.set(i > 0);
                let t0 = Instant::now();
                let (ran, watch) = ctx.with_stopwatch(|| (self.run)(tile, &b));
                TRIAL.set(false);
                ran?;
                ctx.submit();
                if !wait() {
                    return Ok(None);
                }
                let wall = t0.elapsed().as_secs_f64();
                let kernels = watch.and_then(|(set, n)| stamps(ctx, &set, n));
                let secs = match (*stamped.get_or_insert(kernels.is_some()), kernels) {
                    (true, Some(s)) => s,
                    (false, _) => wall,
                    // A run the timestamps missed (a profiler took its passes): not comparable.
                    (true, None) => return Ok(None),
                };
                best = best.min(secs);
                if i == 0 {
                    default_wall = wall;
                }
            }
            STATE.lock().warm.insert(warm_key(tile));
            let Some(got) = read(ctx, b[2], bytes) else {
                return Ok(None);
            };
            let same = match &want {
                None => {
                    want = Some(got);
                    true
                }
                Some(w) => agrees(self.ty, outputs, w, &got),
            };
            times.push((tile, same.then_some(best * 1e6)));
        }
        let now = Progress {
            timestamps: stamped == Some(true),
            times,
        };
        Ok(Some((now, new)))
    }
}

/// The kernel time, in seconds, of the passes a stopwatch timed: `n` timestamps in `set`, a
/// begin and an end per pass. `None` when the queries cannot be resolved or read, or read as
/// no time at all.
#[cfg(not(target_arch = "wasm32"))]
fn stamps(ctx: &GpuContext, set: &wgpu::QuerySet, n: u32) -> Option<f64> {
    let bytes = u64::from(n) * wgpu::QUERY_SIZE as u64;
    let (buf, err) = ctx.scoped(|| {
        let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgtorch-tuning-timestamps"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgtorch-tuning-timestamps"),
            });
        enc.resolve_query_set(set, 0..n, &buf, 0);
        ctx.queue.submit(Some(enc.finish()));
        buf
    });
    if err.is_some() {
        return None;
    }
    let raw = read(ctx, &buf, bytes)?;
    let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&raw);
    let total: u64 = ticks
        .chunks_exact(2)
        .map(|t| t[1].saturating_sub(t[0]))
        .sum();
    (total > 0).then(|| total as f64 * ctx.timestamp_period() * 1e-9)
}

/// The first `bytes` of `buf`, after the work submitted before. Its own copy and wait, not the
/// context's readback: that one would take and report an index check's failure or a pending
/// error that belongs to an earlier op, which must reach that op's caller. `None` when the copy
/// or the map fails.
#[cfg(not(target_arch = "wasm32"))]
fn read(ctx: &GpuContext, buf: &wgpu::Buffer, bytes: u64) -> Option<Vec<u8>> {
    let (staging, err) = ctx.scoped(|| {
        ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgtorch-tuning-readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    });
    if err.is_some() {
        return None;
    }
    let mut enc = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wgtorch-tuning-readback"),
        });
    enc.copy_buffer_to_buffer(buf, 0, &staging, 0, bytes);
    ctx.queue.submit(Some(enc.finish()));
    let (tx, rx) = std::sync::mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r.is_ok());
    });
    ctx.device.poll(wgpu::PollType::wait_indefinitely()).ok()?;
    if !rx.try_recv().unwrap_or(false) {
        return None;
    }
    let data = staging.get_mapped_range(..).ok()?.to_vec();
    Some(data)
}

/// Whether bucket `key` was launched before in this process (it is from now on). Pipelines for a
/// bucket compile in the background from its second launch on: a GEMM that does not recur is
/// not worth them, and a fresh process's first step (every bucket's first launch) keeps both
/// cores to itself.
#[cfg(not(target_arch = "wasm32"))]
fn recurs(ctx: &GpuContext, key: &str) -> bool {
    !STATE.lock().seen.insert((ctx.ordinal, key.to_string()))
}

/// The tile tuned for `key` in this process or read from the disk cache (read once per adapter).
fn known(ctx: &GpuContext, key: &str) -> Option<Tile> {
    let mut guard = STATE.lock();
    let s = &mut *guard;
    let entry = s.tuned.entry(ctx.ordinal).or_default();
    if !entry.0 {
        entry.0 = true;
        #[cfg(not(target_arch = "wasm32"))]
        {
            let cache = disk::load(ctx);
            for (k, tile) in cache.tuned {
                entry.1.entry(k).or_insert(Tuned {
                    tile,
                    dims: [0; 4],
                    times_us: Vec::new(),
                    timestamps: false,
                });
            }
            for (k, p) in cache.progress {
                s.progress.entry((ctx.ordinal, k)).or_insert(p);
            }
        }
    }
    entry.1.get(key).map(|t| t.tile)
}

/// Whether two outputs of the same GEMM in storage type `ty` agree. Every tile sums each output
/// over k in the same order, so they differ at most where the compiler contracted a multiply and
/// an add into one rounding: by far less than the tolerance here, the storage's rounding of the
/// value plus 1e-4 of the largest output. A wrong kernel misses by about the outputs' size.
#[cfg(not(target_arch = "wasm32"))]
fn agrees(ty: GpuType, outputs: usize, a: &[u8], b: &[u8]) -> bool {
    fn values(ty: GpuType, x: &[u8]) -> Vec<f32> {
        match ty {
            GpuType::F16 | GpuType::F16Packed => x
                .chunks_exact(2)
                .map(|w| half::f16::from_le_bytes([w[0], w[1]]).to_f32())
                .collect(),
            GpuType::BF16Packed => x
                .chunks_exact(2)
                .map(|w| half::bf16::from_le_bytes([w[0], w[1]]).to_f32())
                .collect(),
            _ => x
                .chunks_exact(4)
                .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
        }
    }
    if a == b {
        return true;
    }
    if a.len() != b.len() {
        return false;
    }
    let rel = match ty {
        GpuType::F16 | GpuType::F16Packed => 2e-3,
        GpuType::BF16Packed => 1.6e-2,
        _ => 1e-6,
    };
    let (mut x, mut y) = (values(ty, a), values(ty, b));
    // A packed half output of odd length ends in a half word of padding.
    x.truncate(outputs);
    y.truncate(outputs);
    let scale = x
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f32, |m, v| m.max(v.abs()));
    x.iter().zip(&y).all(|(p, q)| {
        // NaN only as the same NaN: the scratch's fill is one too.
        let both_nan = p.to_bits() == q.to_bits();
        let close = p.is_finite() && q.is_finite() && (p - q).abs() <= rel * p.abs() + 1e-4 * scale;
        p == q || both_nan || close
    })
}

/// The cache file (`tune/disk.rs`).
#[cfg(not(target_arch = "wasm32"))]
mod disk;

/// The platform's per-user cache directory.
fn platform_cache_dir() -> Option<PathBuf> {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library/Caches"))
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    }
}

/// The path of the tuning cache in use, if any (for the bench's report and the tests).
#[doc(hidden)]
pub fn gemm_cache_dir() -> Option<PathBuf> {
    match std::env::var_os("WGTORCH_CACHE_DIR") {
        Some(d) if d == "none" => None,
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => platform_cache_dir().map(|d| d.join("wgtorch")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn outputs_agree_within_rounding_and_not_beyond() {
        let a = [1.0f32, -2.0, 100.0, f32::NAN, f32::INFINITY];
        let close = [1.0f32 + 1e-6, -2.0, 100.0, f32::NAN, f32::INFINITY];
        assert!(agrees(GpuType::F32, 5, &bytes(&a), &bytes(&a)));
        assert!(agrees(GpuType::F32, 5, &bytes(&a), &bytes(&close)));
        for (i, v) in [(0, 1.5), (3, 0.0), (4, f32::NEG_INFINITY), (2, 100.1)] {
            let mut b = a;
            b[i] = v;
            assert!(!agrees(GpuType::F32, 5, &bytes(&a), &bytes(&b)), "{i}: {v}");
        }
        assert!(!agrees(GpuType::F32, 5, &bytes(&a), &bytes(&a[..4])));
        // Halves: one unit in the last place of the storage agrees, a tenth of the value not.
        let h = |v: &[f32]| -> Vec<u8> {
            v.iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect()
        };
        let x = [1.0f32, 3.0];
        assert!(agrees(
            GpuType::F16Packed,
            2,
            &h(&x),
            &h(&[1.0, 3.0 + 2e-3])
        ));
        assert!(!agrees(GpuType::F16Packed, 2, &h(&x), &h(&[1.0, 3.3])));
        // Padding past the outputs is not compared.
        assert!(agrees(
            GpuType::F16Packed,
            1,
            &h(&[1.0, 5.0]),
            &h(&[1.0, 7.0])
        ));
    }

    #[test]
    fn buckets_round_sizes_up_to_powers_of_two() {
        assert_eq!(bucket("mm", [40, 64, 65, 1]), "mm|64|64|128|1");
        assert_eq!(bucket("mm", [0, 1, 3, 2]), "mm|1|1|4|2");
    }
}
