//! Trace Event Format JSON (the format of `chrome://tracing`, which Perfetto also opens): one
//! complete (`"ph": "X"`) event per profiler event on its thread's track, and one counter
//! (`"ph": "C"`) track of allocated tensor bytes per device.

use super::{Event, EventKind, MemorySample};
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

pub(super) fn chrome_trace(events: &[Event], memory: &[MemorySample]) -> String {
    let pid = std::process::id();
    let mut items: Vec<String> = Vec::with_capacity(events.len() + memory.len() + 4);
    items.push(format!(
        r#"{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":"wgtorch"}}}}"#
    ));
    let threads: BTreeSet<u64> = events.iter().map(|e| e.thread).collect();
    for t in threads {
        items.push(format!(
            r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{t},"args":{{"name":"CPU thread {t}"}}}}"#
        ));
    }
    for e in events {
        let cat = match e.kind {
            EventKind::Op => "cpu_op",
            EventKind::Backward => "backward",
            EventKind::Scope => "user_annotation",
        };
        let mut args = String::new();
        if !e.input_shapes.is_empty() {
            let dims: Vec<String> = e.input_shapes.iter().map(|s| format!("{s:?}")).collect();
            let types: Vec<String> = e
                .input_dtypes
                .iter()
                .map(|d| json_str(&d.to_string()))
                .collect();
            let _ = write!(
                args,
                r#""Input Dims":[{}],"Input type":[{}]"#,
                dims.join(","),
                types.join(",")
            );
        }
        if let Some(d) = e.device {
            if !args.is_empty() {
                args.push(',');
            }
            let _ = write!(args, r#""Device":{}"#, json_str(&d.to_string()));
        }
        items.push(format!(
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{pid},"tid":{},"ts":{},"dur":{},"args":{{{args}}}}}"#,
            json_str(&e.name),
            e.thread,
            us(e.start_ns),
            us(e.dur_ns),
        ));
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
