//! The tuner's cache file: one per adapter, driver and wgtorch version. The first line names
//! the identity; then one line per bucket, `key<TAB>tile` for a tuned bucket, or
//! `key<TAB>partial<TAB>stamps|wall<TAB>tile=µs;tile=-;...` for one whose candidates were timed
//! in part (a process's budget ran out; the next goes on from there; `-`: refused).

use super::{GpuContext, Progress, Tile, Tuned};
use std::collections::HashMap;
use std::path::PathBuf;

/// What the file holds for an adapter.
#[derive(Default)]
pub(super) struct Cache {
    /// Tuned buckets.
    pub tuned: Vec<(String, Tile)>,
    /// Buckets timed in part.
    pub progress: Vec<(String, Progress)>,
}

/// The identity the file is for; a file whose first line differs is ignored.
fn header(ctx: &GpuContext) -> String {
    let i = &ctx.info;
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    format!(
        "wgtorch {} gemm tiles\tadapter {}\tdriver {} {}\tbackend {:?}",
        env!("CARGO_PKG_VERSION"),
        clean(&i.name),
        clean(&i.driver),
        clean(&i.driver_info),
        i.backend
    )
}

fn path(ctx: &GpuContext) -> Option<PathBuf> {
    // A file name from the identity: a hash, so that no adapter name reaches the file system.
    let h = header(ctx).bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    Some(super::gemm_cache_dir()?.join(format!("gemm-tiles-{h:016x}.tsv")))
}

/// Whether `t` is a tile the tuner may pick.
fn candidate(t: &Tile) -> bool {
    Tile::ALL.contains(t)
}

/// A partial line's timings: `tile=µs` or `tile=-` (refused), `;`-separated; `None` if any
/// does not parse or is not a candidate.
fn parse_times(s: &str) -> Option<Vec<(Tile, Option<f64>)>> {
    s.split(';')
        .map(|e| {
            let (t, us) = e.split_once('=')?;
            let tile: Tile = t.parse().ok()?;
            let us = match us {
                "-" => None,
                v => Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite() && *v >= 0.0)?,
                ),
            };
            candidate(&tile).then_some((tile, us))
        })
        .collect()
}

/// The buckets the file holds for this adapter: lines that do not parse, and tiles that are
/// not candidates, are skipped.
pub(super) fn load(ctx: &GpuContext) -> Cache {
    let mut cache = Cache::default();
    let Some(text) = path(ctx).and_then(|p| std::fs::read_to_string(p).ok()) else {
        return cache;
    };
    let mut lines = text.lines();
    if lines.next() != Some(header(ctx).as_str()) {
        return cache;
    }
    for l in lines {
        let mut f = l.split('\t');
        match (f.next(), f.next(), f.next(), f.next(), f.next()) {
            (Some(k), Some("partial"), Some(clock), Some(times), None) => {
                let timestamps = match clock {
                    "stamps" => true,
                    "wall" => false,
                    _ => continue,
                };
                if let Some(times) = parse_times(times) {
                    let p = Progress { timestamps, times };
                    cache.progress.push((k.to_string(), p));
                }
            }
            (Some(k), Some(t), None, ..) => {
                if let Some(tile) = t.parse().ok().filter(candidate) {
                    cache.tuned.push((k.to_string(), tile));
                }
            }
            _ => {}
        }
    }
    cache
}

/// Write every bucket known for this adapter, tuned or timed in part, atomically; a failure (a
/// read-only home, say) only costs the next process its tuning.
pub(super) fn store(
    ctx: &GpuContext,
    tuned: &HashMap<String, Tuned>,
    progress: &[(String, Progress)],
) {
    let Some(p) = path(ctx) else {
        return;
    };
    let mut rows: Vec<String> = tuned
        .iter()
        .map(|(k, t)| format!("{k}\t{}", t.tile))
        .collect();
    for (k, p) in progress {
        let times: Vec<String> = p
            .times
            .iter()
            .map(|(t, us)| match us {
                Some(us) => format!("{t}={us:.1}"),
                None => format!("{t}=-"),
            })
            .collect();
        let clock = if p.timestamps { "stamps" } else { "wall" };
        rows.push(format!("{k}\tpartial\t{clock}\t{}", times.join(";")));
    }
    rows.sort();
    let mut text = header(ctx);
    for r in rows {
        text += "\n";
        text += &r;
    }
    text.push('\n');
    if let Some(d) = p.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let _ = crate::io::write_atomic(&p, text.as_bytes());
}
