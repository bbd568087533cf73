//! `prof.key_averages()` and its `table()`: events grouped by name (and input shapes), with
//! PyTorch's columns and formatting. As in PyTorch, an op's `GPU total` is the run time of the
//! kernels it and the ops under it launched, its `Self GPU` that of the kernels it launched
//! itself; the kernels are rows of their own, and `Self GPU time total` sums those.

use super::Profile;
use std::collections::HashMap;
use std::fmt::Write;

/// The column a [`KeyAverages::table`] is sorted by, largest first (PyTorch's `sort_by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    /// `"self_cpu_time_total"`.
    #[default]
    SelfCpuTimeTotal,
    /// `"cpu_time_total"`.
    CpuTimeTotal,
    /// `"count"`.
    Count,
    /// `"self_cpu_memory_usage"`.
    SelfCpuMemoryUsage,
    /// `"cpu_memory_usage"`.
    CpuMemoryUsage,
    /// `"self_gpu_memory_usage"`.
    SelfGpuMemoryUsage,
    /// `"self_cuda_time_total"`: the kernels that ran longest first.
    SelfGpuTimeTotal,
    /// `"cuda_time_total"`.
    GpuTimeTotal,
}

/// One row of [`KeyAverages`]: every event with the same name (and input shapes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyAverage {
    /// The events' name.
    pub name: String,
    /// Their input shapes, when grouped by input shape.
    pub input_shapes: Option<Vec<Vec<usize>>>,
    /// Number of events.
    pub count: u64,
    /// Summed wall time, children included, nanoseconds.
    pub cpu_time_total_ns: u64,
    /// Summed wall time minus the children's, nanoseconds.
    pub self_cpu_time_total_ns: u64,
    /// CPU bytes allocated net of frees, children included.
    pub cpu_memory_usage: i64,
    /// CPU bytes allocated net of frees by the events themselves.
    pub self_cpu_memory_usage: i64,
    /// GPU bytes allocated net of frees, children included.
    pub gpu_memory_usage: i64,
    /// GPU bytes allocated net of frees by the events themselves.
    pub self_gpu_memory_usage: i64,
    /// The highest CPU memory peak of one event (see [`Event::peak_cpu_memory`](super::Event)).
    pub peak_cpu_memory: i64,
    /// The highest GPU memory peak of one event.
    pub peak_gpu_memory: i64,
    /// Summed run time on the GPU of the kernels these events launched, and those of the
    /// events under them, nanoseconds.
    pub gpu_time_total_ns: u64,
    /// Summed run time of the kernels these events launched themselves (for a kernel's row, its
    /// own run time), nanoseconds.
    pub self_gpu_time_total_ns: u64,
    /// Bytes the events copied to GPUs themselves.
    pub bytes_uploaded: u64,
    /// Bytes the events read back from GPUs themselves.
    pub bytes_read_back: u64,
    /// Whether this row is a GPU kernel (launches of one kernel) rather than CPU events.
    pub gpu_kernel: bool,
}

impl KeyAverage {
    /// Mean wall time per call, nanoseconds.
    pub fn cpu_time_avg_ns(&self) -> u64 {
        self.cpu_time_total_ns / self.count.max(1)
    }
    /// Mean GPU time per call, nanoseconds.
    pub fn gpu_time_avg_ns(&self) -> u64 {
        self.gpu_time_total_ns / self.count.max(1)
    }
}

/// Events grouped by key: [`Profile::key_averages`](super::Profile::key_averages).
#[derive(Clone, Debug)]
pub struct KeyAverages {
    rows: Vec<KeyAverage>,
    by_shape: bool,
    /// GPU kernels ran: the table has GPU columns.
    gpu: bool,
    /// Why some GPU time is missing (adapters without timestamps).
    gpu_unavailable: Vec<String>,
}

/// A row's key: the name, the input shapes when grouped by them, and whether it is a kernel's
/// (an op never shares a row with a kernel of the same name).
type Key = (String, Option<Vec<Vec<usize>>>, bool);

/// The row of `key`, appended (in first-seen order) if new.
fn row<'a>(
    index: &mut HashMap<Key, usize>,
    rows: &'a mut Vec<KeyAverage>,
    key: Key,
) -> &'a mut KeyAverage {
    let at = *index.entry(key.clone()).or_insert_with(|| {
        let (name, input_shapes, gpu_kernel) = key;
        rows.push(KeyAverage {
            name,
            input_shapes,
            gpu_kernel,
            ..Default::default()
        });
        rows.len() - 1
    });
    &mut rows[at]
}

impl KeyAverages {
    pub(super) fn new(profile: &Profile, by_shape: bool) -> KeyAverages {
        let events = &profile.events;
        // Children start after their parent, so one pass from the end folds every subtree into
        // its root: time of the direct children, memory and GPU time of all descendants.
        let mut child_ns = vec![0u64; events.len()];
        let mut self_gpu_ns = vec![0u64; events.len()];
        for k in &profile.kernels {
            if let Some(i) = k.op {
                self_gpu_ns[i] += k.dur_ns;
            }
        }
        let mut gpu_ns = self_gpu_ns.clone();
        let mut mem: Vec<(i64, i64)> = events
            .iter()
            .map(|e| (e.self_cpu_memory, e.self_gpu_memory))
            .collect();
        for (i, e) in events.iter().enumerate().rev() {
            if let Some(p) = e.parent {
                child_ns[p] += e.dur_ns;
                gpu_ns[p] += gpu_ns[i];
                mem[p].0 += mem[i].0;
                mem[p].1 += mem[i].1;
            }
        }
        let mut index: HashMap<Key, usize> = HashMap::new();
        let mut rows: Vec<KeyAverage> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            let shapes = by_shape.then(|| e.input_shapes.clone());
            let row = row(&mut index, &mut rows, (e.name.clone(), shapes, false));
            row.count += 1;
            row.cpu_time_total_ns += e.dur_ns;
            row.self_cpu_time_total_ns += e.dur_ns.saturating_sub(child_ns[i]);
            row.cpu_memory_usage += mem[i].0;
            row.self_cpu_memory_usage += e.self_cpu_memory;
            row.gpu_memory_usage += mem[i].1;
            row.self_gpu_memory_usage += e.self_gpu_memory;
            row.peak_cpu_memory = row.peak_cpu_memory.max(e.peak_cpu_memory);
            row.peak_gpu_memory = row.peak_gpu_memory.max(e.peak_gpu_memory);
            row.gpu_time_total_ns += gpu_ns[i];
            row.self_gpu_time_total_ns += self_gpu_ns[i];
            row.bytes_uploaded += e.bytes_uploaded;
            row.bytes_read_back += e.bytes_read_back;
        }
        for k in &profile.kernels {
            let row = row(&mut index, &mut rows, (k.name.clone(), None, true));
            row.count += 1;
            row.gpu_time_total_ns += k.dur_ns;
            row.self_gpu_time_total_ns += k.dur_ns;
        }
        KeyAverages {
            rows,
            by_shape,
            gpu: !profile.kernels.is_empty() || !profile.gpu_unavailable.is_empty(),
            gpu_unavailable: profile.gpu_unavailable.clone(),
        }
    }

    /// The rows, in the order their keys first occurred.
    pub fn rows(&self) -> &[KeyAverage] {
        &self.rows
    }

    /// The row named `name` (the first, when grouped by input shape).
    pub fn get(&self, name: &str) -> Option<&KeyAverage> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// Summed self CPU time of every event: the table's "Self CPU time total".
    pub fn self_cpu_time_total_ns(&self) -> u64 {
        self.rows.iter().map(|r| r.self_cpu_time_total_ns).sum()
    }

    /// Summed run time of every GPU kernel: the table's "Self GPU time total".
    pub fn self_gpu_time_total_ns(&self) -> u64 {
        self.rows
            .iter()
            .filter(|r| r.gpu_kernel)
            .map(|r| r.self_gpu_time_total_ns)
            .sum()
    }

    /// `key_averages().table(sort_by=..., row_limit=...)`: PyTorch's table, sorted by `sort_by`
    /// (largest first), at most `row_limit` rows (0: all). Memory columns appear when memory was
    /// recorded, `Input Shapes` when grouped by input shape.
    pub fn table(&self, sort_by: SortBy, row_limit: usize) -> String {
        let mut rows: Vec<&KeyAverage> = self.rows.iter().collect();
        let key = |r: &KeyAverage| -> i128 {
            match sort_by {
                SortBy::SelfCpuTimeTotal => r.self_cpu_time_total_ns as i128,
                SortBy::CpuTimeTotal => r.cpu_time_total_ns as i128,
                SortBy::Count => r.count as i128,
                SortBy::SelfCpuMemoryUsage => r.self_cpu_memory_usage as i128,
                SortBy::CpuMemoryUsage => r.cpu_memory_usage as i128,
                SortBy::SelfGpuMemoryUsage => r.self_gpu_memory_usage as i128,
                SortBy::SelfGpuTimeTotal => r.self_gpu_time_total_ns as i128,
                SortBy::GpuTimeTotal => r.gpu_time_total_ns as i128,
            }
        };
        rows.sort_by_key(|r| std::cmp::Reverse(key(r)));
        if row_limit > 0 {
            rows.truncate(row_limit);
        }
        let total = self.self_cpu_time_total_ns();
        let pct = |ns: u64| format!("{:.2}%", 100.0 * ns as f64 / total.max(1) as f64);
        let gpu_total = self.self_gpu_time_total_ns();
        // No kernel could be timed: the GPU columns say so instead of showing zeros.
        let timed = self.rows.iter().any(|r| r.gpu_kernel);
        let gpu_cell = |ns: u64, pct: bool| -> String {
            if !timed {
                "n/a".into()
            } else if pct {
                format!("{:.2}%", 100.0 * ns as f64 / gpu_total.max(1) as f64)
            } else {
                format_time(ns)
            }
        };
        let cpu_mem = self
            .rows
            .iter()
            .any(|r| r.cpu_memory_usage != 0 || r.self_cpu_memory_usage != 0);
        let gpu_mem = self
            .rows
            .iter()
            .any(|r| r.gpu_memory_usage != 0 || r.self_gpu_memory_usage != 0);

        let mut header = vec![
            "Self CPU %",
            "Self CPU",
            "CPU total %",
            "CPU total",
            "CPU time avg",
        ];
        if self.gpu {
            header.extend(["Self GPU", "Self GPU %", "GPU total", "GPU time avg"]);
        }
        if cpu_mem {
            header.extend(["CPU Mem", "Self CPU Mem"]);
        }
        if gpu_mem {
            header.extend(["GPU Mem", "Self GPU Mem"]);
        }
        header.push("# of Calls");
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let mut c = vec![
                    pct(r.self_cpu_time_total_ns),
                    format_time(r.self_cpu_time_total_ns),
                    pct(r.cpu_time_total_ns),
                    format_time(r.cpu_time_total_ns),
                    format_time(r.cpu_time_avg_ns()),
                ];
                if self.gpu {
                    c.push(gpu_cell(r.self_gpu_time_total_ns, false));
                    c.push(gpu_cell(r.self_gpu_time_total_ns, true));
                    c.push(gpu_cell(r.gpu_time_total_ns, false));
                    c.push(gpu_cell(r.gpu_time_avg_ns(), false));
                }
                if cpu_mem {
                    c.push(format_memory(r.cpu_memory_usage));
                    c.push(format_memory(r.self_cpu_memory_usage));
                }
                if gpu_mem {
                    c.push(format_memory(r.gpu_memory_usage));
                    c.push(format_memory(r.self_gpu_memory_usage));
                }
                c.push(r.count.to_string());
                c
            })
            .collect();
        let shapes: Vec<String> = rows
            .iter()
            .map(|r| {
                r.input_shapes
                    .as_ref()
                    .map_or(String::new(), |s| format!("{s:?}"))
            })
            .collect();

        const NAME_MAX: usize = 55;
        let name_w = rows
            .iter()
            .map(|r| r.name.chars().count().min(NAME_MAX))
            .chain([4])
            .max()
            .unwrap_or(4);
        let col_w = 12;
        let shape_w = shapes
            .iter()
            .map(|s| s.len())
            .chain([12])
            .max()
            .unwrap_or(12);
        let mut rule = "-".repeat(name_w);
        for _ in &header {
            rule.push_str("  ");
            rule.push_str(&"-".repeat(col_w));
        }
        if self.by_shape {
            rule.push_str("  ");
            rule.push_str(&"-".repeat(shape_w));
        }
        let mut out = String::new();
        let _ = writeln!(out, "{rule}");
        let _ = write!(out, "{:>name_w$}", "Name");
        for h in &header {
            let _ = write!(out, "  {h:>col_w$}");
        }
        if self.by_shape {
            let _ = write!(out, "  {:<shape_w$}", "Input Shapes");
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "{rule}");
        for ((r, c), s) in rows.iter().zip(&cells).zip(&shapes) {
            let name: String = if r.name.chars().count() > NAME_MAX {
                let mut n: String = r.name.chars().take(NAME_MAX - 3).collect();
                n.push_str("...");
                n
            } else {
                r.name.clone()
            };
            let _ = write!(out, "{name:>name_w$}");
            for v in c {
                let _ = write!(out, "  {v:>col_w$}");
            }
            if self.by_shape {
                let _ = write!(out, "  {s:<shape_w$}");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "{rule}");
        let _ = writeln!(out, "Self CPU time total: {}", format_time(total));
        if timed {
            let _ = writeln!(out, "Self GPU time total: {}", format_time(gpu_total));
        }
        for why in &self.gpu_unavailable {
            let _ = writeln!(out, "GPU time unavailable: {why}");
        }
        out
    }
}

/// PyTorch's `_format_time`: microseconds with three decimals, as ms or s past 1e3 / 1e6 us.
pub(super) fn format_time(ns: u64) -> String {
    let us = ns as f64 / 1e3;
    if us >= 1e6 {
        format!("{:.3}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3}ms", us / 1e3)
    } else {
        format!("{us:.3}us")
    }
}

/// PyTorch's `_format_memory`: `Gb`, `Mb`, `Kb` with two decimals, else bytes.
pub(super) fn format_memory(bytes: i64) -> String {
    const K: f64 = 1024.0;
    let b = bytes as f64;
    if b.abs() >= K * K * K {
        format!("{:.2} Gb", b / (K * K * K))
    } else if b.abs() >= K * K {
        format!("{:.2} Mb", b / (K * K))
    } else if b.abs() >= K {
        format!("{:.2} Kb", b / K)
    } else {
        format!("{bytes} b")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_pytorch() {
        assert_eq!(format_time(1_500), "1.500us");
        assert_eq!(format_time(2_345_000), "2.345ms");
        assert_eq!(format_time(3_000_000_000), "3.000s");
        assert_eq!(format_memory(512), "512 b");
        assert_eq!(format_memory(-2048), "-2.00 Kb");
        assert_eq!(format_memory(3 << 20), "3.00 Mb");
    }
}
