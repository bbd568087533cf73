//! Training checkpoints: model, optimizer, scheduler, epoch, RNG state and metrics in one
//! safetensors file (tensors under `model.` and `optim.`, the rest in its metadata).

use super::{bad, file, from_safetensors_bytes, to_safetensors_bytes, write_atomic};
use crate::optim::OptimState;
use crate::{Device, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Everything needed to continue a run exactly where it stopped, in one safetensors file
/// (PyTorch's `torch.save({"model": ..., "optimizer": ..., "epoch": ...}, path)` idiom). Build it
/// from the live objects and [`Checkpoint::save`]; to resume, [`Checkpoint::load`] and hand each
/// part back: the scheduler's state (its epoch and base rates, or ReduceLROnPlateau's counters)
/// travels whole, so the order in which the parts are restored does not matter.
///
/// ```
/// use wgtorch::io::Checkpoint;
/// use wgtorch::nn::{Linear, ModuleExt};
/// use wgtorch::optim::{Adam, LrScheduler, Optimizer, Schedule};
/// use wgtorch::{Device, Result, Tensor};
///
/// fn train_step(model: &Linear, opt: &mut Adam, x: &Tensor) -> Result<f64> {
///     opt.zero_grad();
///     let loss = model.forward(x)?.square()?.mean_all()?;
///     loss.backward()?;
///     opt.step()?;
///     loss.item()
/// }
///
/// let dev = Device::Cpu;
/// let dir = std::env::temp_dir().join(format!("wgtorch-doc-ckpt-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("run.ckpt");
/// let gamma = Schedule::ExponentialLR { gamma: 0.5 };
///
/// wgtorch::manual_seed(0);
/// let x = Tensor::randn([8, 3], &dev)?;
/// let model = Linear::new(3, 1, &dev)?;
/// let mut opt = Adam::new(model.parameters(), 0.01)?;
/// let mut sched = LrScheduler::new(&opt, gamma.clone())?;
/// let mut loss = 0.0;
/// for _ in 0..2 {
///     loss = train_step(&model, &mut opt, &x)?;
///     sched.step()?;
/// }
/// Checkpoint {
///     model: model.state_dict(),
///     optim: opt.state_dict(),
///     scheduler: sched.state_dict(),
///     epoch: 2,
///     rng: wgtorch::with_default_generator(|g| g.state()),
///     metrics: vec![("train_loss".to_string(), loss)],
/// }
/// .save(&path)?;
///
/// // Resume: objects built as at the start of a run, then the checkpoint's state.
/// let ck = Checkpoint::load(&path, &dev)?;
/// let mut model2 = Linear::new(3, 1, &dev)?;
/// model2.load_state_dict(&ck.model, true)?;
/// let mut opt2 = Adam::new(model2.parameters(), 0.01)?;
/// opt2.load_state_dict(&ck.optim)?; // moments, step counts and the current rates
/// let mut sched2 = LrScheduler::new(&opt2, gamma)?;
/// sched2.load_state_dict(&ck.scheduler)?; // epoch and base rates
/// assert_eq!(sched2.last_epoch, 2);
/// wgtorch::with_default_generator(|g| g.set_state(ck.rng));
/// assert_eq!((ck.epoch, ck.metrics[0].1), (2, loss));
/// assert_eq!(opt2.param_groups()[0].lr.get(), 0.0025);
///
/// // Both runs continue identically.
/// train_step(&model, &mut opt, &x)?;
/// sched.step()?;
/// train_step(&model2, &mut opt2, &x)?;
/// sched2.step()?;
/// assert_eq!(model2.weight.to_vec::<f32>()?, model.weight.to_vec::<f32>()?);
/// assert_eq!(opt2.param_groups()[0].lr.get(), opt.param_groups()[0].lr.get());
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    /// `model.state_dict()`
    pub model: Vec<(String, Tensor)>,
    /// `optimizer.state_dict()`
    pub optim: OptimState,
    /// The scheduler's `state_dict()` ([`crate::optim::LrScheduler`]'s epoch and base rates,
    /// or [`crate::optim::ReduceLROnPlateau`]'s counters and best metric); empty without one.
    /// Saved as metadata under `scheduler.`; restored by the scheduler's `load_state_dict`,
    /// which checks it.
    pub scheduler: crate::optim::SchedState,
    /// Epochs completed.
    pub epoch: usize,
    /// Default generator's state when saved (`with_default_generator(|g| g.state())`; restore
    /// with `g.set_state`).
    pub rng: [u64; 4],
    /// Named metrics (losses, accuracies) so far. Names must be distinct (`train_loss.3`, one
    /// per epoch): they are metadata keys, and [`Checkpoint::load`] returns them sorted by name.
    pub metrics: Vec<(String, f64)>,
}

impl Checkpoint {
    /// Write atomically to `path` (see [`super::write_atomic`]): tensors under `model.` and
    /// `optim.`, the rest as metadata. Errors are [`crate::Error::Io`] naming the path.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut tensors: Vec<(String, Tensor)> = self
            .model
            .iter()
            .map(|(k, t)| (format!("model.{k}"), t.clone()))
            .collect();
        tensors.extend(
            self.optim
                .tensors
                .iter()
                .map(|(k, t)| (format!("optim.{k}"), t.clone())),
        );
        let mut meta = HashMap::new();
        meta.insert("format".to_string(), "wgtorch-checkpoint/1".to_string());
        meta.insert("epoch".into(), self.epoch.to_string());
        meta.insert(
            "rng".into(),
            self.rng
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
        for (k, v) in &self.scheduler {
            meta.insert(format!("scheduler.{k}"), format!("{v:?}"));
        }
        for (k, v) in &self.optim.scalars {
            meta.insert(format!("optim.{k}"), format!("{v:?}"));
        }
        for (k, v) in &self.metrics {
            meta.insert(format!("metric.{k}"), format!("{v:?}"));
        }
        let bytes = to_safetensors_bytes(&tensors, Some(meta))?;
        write_atomic(path.as_ref(), &bytes)
    }

    /// Read from `path`, placing tensors on `device`. Every scalar in the metadata must parse
    /// exactly (an epoch of "-5" or "1e300" is refused, naming the key), so a damaged checkpoint
    /// is an error here rather than a wrong resume. Tensors come back under their state_dict
    /// names, sorted by name; a file without the `wgtorch-checkpoint/1` format tag, or a missing
    /// epoch or RNG state, is an [`crate::Error::Io`].
    pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Checkpoint> {
        let path = path.as_ref();
        let bytes = file::read_safetensors(path)?;
        let (tensors, meta) = from_safetensors_bytes(path, &bytes, device)?;
        if meta.get("format").map(String::as_str) != Some("wgtorch-checkpoint/1") {
            return Err(bad(
                path,
                "not a wgtorch checkpoint (missing format wgtorch-checkpoint/1 in the metadata)",
            ));
        }
        let invalid = |k: &str, v: &str, what: &str| {
            bad(
                path,
                format!("checkpoint metadata {k} = {v:?} is not {what}"),
            )
        };
        let count = |k: &str, v: &str| -> Result<usize> {
            v.parse()
                .map_err(|_| invalid(k, v, "a non-negative integer that fits in usize"))
        };
        let epoch = meta
            .get("epoch")
            .ok_or_else(|| bad(path, "checkpoint metadata lacks the epoch"))?;
        let mut c = Checkpoint {
            epoch: count("epoch", epoch)?,
            ..Default::default()
        };
        let rng = meta
            .get("rng")
            .ok_or_else(|| bad(path, "checkpoint metadata lacks the rng state"))?;
        let words: Vec<u64> = rng
            .split(',')
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()
            .filter(|w: &Vec<u64>| w.len() == 4)
            .ok_or_else(|| invalid("rng", rng, "four comma-separated u64 words"))?;
        c.rng.copy_from_slice(&words);
        for (k, v) in &meta {
            let number = || v.parse::<f64>().map_err(|_| invalid(k, v, "a number"));
            if let Some(name) = k.strip_prefix("optim.") {
                c.optim.scalars.push((name.to_string(), number()?));
            } else if let Some(name) = k.strip_prefix("metric.") {
                c.metrics.push((name.to_string(), number()?));
            } else if let Some(name) = k.strip_prefix("scheduler.") {
                c.scheduler.push((name.to_string(), number()?));
            }
        }
        c.optim.scalars.sort_by(|a, b| a.0.cmp(&b.0));
        c.scheduler.sort_by(|a, b| a.0.cmp(&b.0));
        c.metrics.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, t) in tensors {
            if let Some(n) = k.strip_prefix("model.") {
                c.model.push((n.to_string(), t));
            } else if let Some(n) = k.strip_prefix("optim.") {
                c.optim.tensors.push((n.to_string(), t));
            }
        }
        Ok(c)
    }
}
