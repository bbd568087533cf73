//! `with_stack=True`: where an op was called from, from a backtrace.

/// Crates whose frames are not the caller's code.
const SKIP: &[&str] = &[
    "wgtorch::",
    "std::",
    "core::",
    "alloc::",
    "rayon",
    "backtrace::",
    "__rust",
    "__libc",
    "_start",
    "test::",
];

/// The frames of the calling code, innermost first, as `function (file:line)` (the location
/// when debug info has it); at most 16. Empty where backtraces are unsupported (the browser).
pub(super) fn callers() -> Vec<String> {
    let text = std::backtrace::Backtrace::force_capture().to_string();
    parse(&text)
}

/// Parses std's backtrace text: `  N: function` lines, each followed by an optional
/// `at file:line:col` line.
fn parse(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut keep = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(at) = t.strip_prefix("at ") {
            if keep {
                if let Some(last) = out.last_mut() {
                    let loc = at.rsplit_once(':').map_or(at, |(l, _col)| l);
                    last.push_str(&format!(" ({loc})"));
                }
            }
            keep = false;
            continue;
        }
        let Some((num, name)) = t.split_once(": ") else {
            continue;
        };
        if !num.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        // `<wgtorch::nn::Conv2d as wgtorch::nn::Module>::forward` belongs to its first path.
        let path = name.trim_start_matches('<');
        // Rust paths only: the C runtime's frames (`start_thread`, `clone3`) are not the caller.
        keep = path.contains("::") && !SKIP.iter().any(|s| path.starts_with(s));
        if keep {
            if out.len() == 16 {
                break;
            }
            out.push(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_the_callers_frames() {
        let text = "   0: std::backtrace::Backtrace::force_capture
             at /rustc/library/std/src/backtrace.rs:312:13
   1: wgtorch::profiler::begin
             at ./src/profiler/mod.rs:240:9
   2: <wgtorch::nn::Linear as wgtorch::nn::Module>::forward
             at ./src/nn/linear.rs:50:9
   3: train_cnn::step
             at ./examples/train_cnn.rs:120:17
   4: train_cnn::main
   5: core::ops::function::FnOnce::call_once
  11: start_thread
             at ./nptl/pthread_create.c:442:8
";
        assert_eq!(
            super::parse(text),
            [
                "train_cnn::step (./examples/train_cnn.rs:120)",
                "train_cnn::main"
            ]
        );
    }
}
