//! Trace Event Format JSON (the format of `chrome://tracing`, which Perfetto also opens): one
//! complete (`"ph": "X"`) event per profiler event on its thread's track, one per GPU kernel on
//! its device's track with a flow arrow (`"ph": "s"` / `"f"`) from the op that launched it, and
//! one counter (`"ph": "C"`) track of allocated bytes per device.

use super::{EventKind, Profile};
use crate::Device;
use std::collections::BTreeSet;
use std::fmt::Write;

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The track of a GPU's kernels: after every CPU thread's.
fn gpu_tid(d: Device) -> u64 {
    match d {
        Device::Gpu(n) => 1_000_000 + n as u64,
        Device::Cpu => 1_000_000,
    }
}

pub(super) fn chrome_trace(p: &Profile) -> String {
    let (events, memory) = (&p.events, &p.memory);
    // The browser has no process id (std's panics there).
    let pid = if cfg!(target_arch = "wasm32") {
        1
    } else {
        std::process::id()
    };
    let mut items: Vec<String> =
        Vec::with_capacity(events.len() + 3 * p.kernels.len() + memory.len() + 4);
    items.push(format!(
        r#"{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":"wgtorch"}}}}"#
    ));
    let threads: BTreeSet<u64> = events.iter().map(|e| e.thread).collect();
    for t in threads {
        items.push(format!(
            r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{t},"args":{{"name":"CPU thread {t}"}}}}"#
        ));
    }
    let gpus: BTreeSet<u64> = p.kernels.iter().map(|k| gpu_tid(k.device)).collect();
    for t in gpus {
        items.push(format!(
            r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{t},"args":{{"name":"GPU {} kernels"}}}}"#,
            t - 1_000_000
        ));
    }
    for e in events {
        let cat = match e.kind {
            EventKind::Op => "cpu_op",
            EventKind::Backward => "backward",
            EventKind::Scope => "user_annotation",
            EventKind::Runtime => "gpu_runtime",
        };
        let mut args = String::new();
        let mut arg = |k: &str, v: String| {
            if !args.is_empty() {
                args.push(',');
            }
            let _ = write!(args, "{}:{v}", json_str(k));
        };
        if !e.input_shapes.is_empty() {
            let dims: Vec<String> = e.input_shapes.iter().map(|s| format!("{s:?}")).collect();
            let types: Vec<String> = e
                .input_dtypes
                .iter()
                .map(|d| json_str(&d.to_string()))
                .collect();
            arg("Input Dims", format!("[{}]", dims.join(",")));
            arg("Input type", format!("[{}]", types.join(",")));
        }
        if let Some(d) = e.device {
            arg("Device", json_str(&d.to_string()));
        }
        if let Some(d) = &e.detail {
            arg("Kernel", json_str(d));
        }
        for (k, v) in [
            ("Bytes uploaded", e.bytes_uploaded as i64),
            ("Bytes read back", e.bytes_read_back as i64),
            ("Self CPU Mem", e.self_cpu_memory),
            ("Self GPU Mem", e.self_gpu_memory),
            ("Peak CPU Mem", e.peak_cpu_memory),
            ("Peak GPU Mem", e.peak_gpu_memory),
        ] {
            if v != 0 {
                arg(k, v.to_string());
            }
        }
        if !e.stack.is_empty() {
            let frames: Vec<String> = e.stack.iter().map(|f| json_str(f)).collect();
            arg("Call stack", format!("[{}]", frames.join(",")));
        }
        items.push(format!(
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{pid},"tid":{},"ts":{},"dur":{},"args":{{{args}}}}}"#,
            json_str(&e.name),
            e.thread,
            us(e.start_ns),
            us(e.dur_ns),
        ));
    }
    for (id, k) in p.kernels.iter().enumerate() {
        let tid = gpu_tid(k.device);
        let op = k.op.and_then(|i| events.get(i));
        let mut args = format!(r#""Device":{}"#, json_str(&k.device.to_string()));
        if let Some(e) = op {
            let _ = write!(args, r#","Launched by":{}"#, json_str(&e.name));
        }
        items.push(format!(
            r#"{{"ph":"X","cat":"kernel","name":{},"pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{{args}}}}}"#,
            json_str(&k.name),
            us(k.start_ns),
            us(k.dur_ns),
        ));
        if let Some(e) = op {
            // The arrow starts where the op recorded the dispatch (inside the op's slice, not
            // in a child's) and ends at the kernel's start, which comes after the batch's
            // submit, so the arrow never points back in time.
            let from = k.launch_ns.clamp(e.start_ns, e.start_ns + e.dur_ns);
            items.push(format!(
                r#"{{"ph":"s","cat":"ac2g","name":"launch","id":{id},"pid":{pid},"tid":{},"ts":{}}}"#,
                e.thread,
                us(from),
            ));
            items.push(format!(
                r#"{{"ph":"f","bp":"e","cat":"ac2g","name":"launch","id":{id},"pid":{pid},"tid":{tid},"ts":{}}}"#,
                us(k.start_ns.max(from)),
            ));
        }
    }
    for m in memory {
        items.push(format!(
            r#"{{"ph":"C","name":{},"pid":{pid},"tid":0,"ts":{},"args":{{"Total Allocated":{}}}}}"#,
            json_str(&format!("Memory {}", m.device)),
            us(m.ts_ns),
            m.bytes,
        ));
    }
    format!(
        "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n{}\n]}}\n",
        items.join(",\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_json() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(5), "0.005");
    }
}
