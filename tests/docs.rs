//! The documentation's own checks: every public module opens with a runnable example, and every
//! guide page in `docs/` is compiled as a doctest (the doctests themselves run in
//! `cargo test --doc`).

use std::fs;
use std::path::{Path, PathBuf};

/// The `//!` lines at the top of a module file.
fn inner_doc(src: &str) -> String {
    src.lines()
        .map(str::trim_start)
        .skip_while(|l| l.is_empty() || l.starts_with("#!["))
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `///` lines just above line `i` (attributes in between are skipped).
fn outer_doc(lines: &[&str], i: usize) -> String {
    let mut doc: Vec<&str> = lines[..i]
        .iter()
        .rev()
        .map(|l| l.trim_start())
        .skip_while(|l| l.starts_with("#["))
        .take_while(|l| l.starts_with("///"))
        .map(|l| l.trim_start_matches("///"))
        .collect();
    doc.reverse();
    doc.join("\n")
}

/// A Rust code block that rustdoc runs: a fence with no language, `rust`, or `rust,...`
/// without `ignore`/`no_run`/`compile_fail`.
fn has_runnable_example(doc: &str) -> bool {
    let mut in_block = false;
    for l in doc.lines().map(str::trim) {
        if let Some(info) = l.strip_prefix("```") {
            if in_block {
                in_block = false;
                continue;
            }
            in_block = true;
            let tags: Vec<&str> = info.split(',').map(str::trim).collect();
            let rust = info.is_empty() || tags.contains(&"rust");
            let skipped = tags
                .iter()
                .any(|t| matches!(*t, "ignore" | "no_run" | "compile_fail" | "text"));
            if rust && !skipped {
                return true;
            }
        }
    }
    false
}

/// Public modules of the crate rooted at `root` (a `lib.rs`): (path, its doc).
fn public_modules(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let src = fs::read_to_string(root).unwrap();
    out.push(("crate root".to_string(), inner_doc(&src)));
    walk(root.parent().unwrap(), "", &src, &mut out);
    out
}

fn walk(dir: &Path, prefix: &str, src: &str, out: &mut Vec<(String, String)>) {
    let lines: Vec<&str> = src.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("pub mod ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let path = format!("{prefix}{name}");
        if rest.trim_end().ends_with('{') {
            // An inline module: its doc is the `///` block above it.
            if !line.contains("cfg(doctest)") && !lines[i.saturating_sub(1)].contains("doctest") {
                out.push((path, outer_doc(&lines, i)));
            }
            continue;
        }
        let (file, sub): (PathBuf, PathBuf) = if dir.join(format!("{name}.rs")).exists() {
            (dir.join(format!("{name}.rs")), dir.join(&name))
        } else {
            (dir.join(&name).join("mod.rs"), dir.join(&name))
        };
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        if text.starts_with("// @generated") {
            // Generated code (ONNX's protobuf types): its documentation is its schema, and the
            // module that re-exports it carries the example.
            continue;
        }
        out.push((path.clone(), inner_doc(&text)));
        walk(&sub, &format!("{path}::"), &text, out);
    }
}

#[test]
fn every_public_module_has_a_runnable_example() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut count = 0;
    for (module, doc) in public_modules(&manifest.join("src/lib.rs")) {
        count += 1;
        if !has_runnable_example(&doc) {
            missing.push(module);
        }
    }
    assert!(
        count >= 20,
        "found only {count} public modules: is the walk broken?"
    );
    assert!(
        missing.is_empty(),
        "public modules whose doc has no runnable example:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_guide_page_is_a_doctest_and_linked() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(manifest.join("src/lib.rs")).unwrap();
    let index = fs::read_to_string(manifest.join("docs/README.md")).unwrap();
    let readme = fs::read_to_string(manifest.join("README.md")).unwrap();
    assert!(
        readme.contains("docs/"),
        "README.md does not link the guide"
    );
    let mut pages = 0;
    for entry in fs::read_dir(manifest.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.ends_with(".md") || name == "README.md" {
            continue;
        }
        pages += 1;
        assert!(
            lib.contains(&format!("include_str!(\"../docs/{name}\")")),
            "docs/{name} is not included in src/lib.rs's `guide` module, so its snippets are not tested"
        );
        assert!(
            index.contains(&format!("({name})")),
            "docs/README.md does not link {name}"
        );
        let page = fs::read_to_string(manifest.join("docs").join(&name)).unwrap();
        assert!(
            has_runnable_example(&page),
            "docs/{name} has no runnable Rust snippet"
        );
    }
    assert!(pages >= 6, "expected the six guide pages, found {pages}");
}

#[test]
fn the_example_checker_tells_runnable_from_skipped() {
    assert!(has_runnable_example("x\n```\nlet a = 1;\n```"));
    assert!(has_runnable_example("```rust\nlet a = 1;\n```"));
    assert!(!has_runnable_example(
        "```text\nhi\n```\n```rust,ignore\nx\n```"
    ));
    assert!(!has_runnable_example(
        "```sh\ncargo run\n```\n```rust,no_run\nx\n```"
    ));
    assert!(!has_runnable_example("no code at all"));
}
