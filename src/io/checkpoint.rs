//! Training checkpoints: model, optimizer, scheduler, epoch, RNG state and metrics in one
//! safetensors file (tensors under `model.` and `optim.`, the rest in its metadata).

use super::{bad, file, from_safetensors_bytes, to_safetensors_bytes, write_atomic};
use crate::optim::OptimState;
use crate::{Device, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Everything needed to continue a run exactly where it stopped.
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    /// `model.state_dict()`
    pub model: Vec<(String, Tensor)>,
    /// `optimizer.state_dict()`
    pub optim: OptimState,
    /// Scheduler's `last_epoch`, if there is a scheduler.
    pub scheduler_epoch: Option<usize>,
    /// Epochs completed.
    pub epoch: usize,
    /// Default generator's state when saved.
    pub rng: [u64; 4],
    /// Named metrics (losses, accuracies) so far.
    pub metrics: Vec<(String, f64)>,
}

impl Checkpoint {
    /// Write atomically to `path`.
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
        if let Some(e) = self.scheduler_epoch {
            meta.insert("scheduler.last_epoch".into(), e.to_string());
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
    /// is an error here rather than a wrong resume.
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
        if let Some(v) = meta.get("scheduler.last_epoch") {
            c.scheduler_epoch = Some(count("scheduler.last_epoch", v)?);
        }
        for (k, v) in &meta {
            let number = || v.parse::<f64>().map_err(|_| invalid(k, v, "a number"));
            if let Some(name) = k.strip_prefix("optim.") {
                c.optim.scalars.push((name.to_string(), number()?));
            } else if let Some(name) = k.strip_prefix("metric.") {
                c.metrics.push((name.to_string(), number()?));
            }
        }
        c.optim.scalars.sort_by(|a, b| a.0.cmp(&b.0));
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
