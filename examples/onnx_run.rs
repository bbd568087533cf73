//! Runs an ONNX model on inputs from a safetensors file and checks it against reference outputs.
//!
//! ```text
//! cargo run --release --example onnx_run -- MODEL.onnx IO.safetensors [--device cpu|gpu] [--out OUT.safetensors]
//! ```
//!
//! The tensors in IO.safetensors named like the graph's inputs are its inputs; those named like
//! its outputs (PyTorch's results, say) are compared with wgtorch's, one line per output:
//! `output.0: max abs diff D (rtol R, atol A) ok|FAIL`, where an element passes when
//! `|ours − ref| ≤ atol + rtol·|ref|` (NaN matches NaN). Any failure makes the exit status
//! non-zero. `--out` writes the outputs (atomically) as safetensors.

use clap::Parser;
use std::path::{Path, PathBuf};
use wgtorch::{onnx, Device, Error, Result, Tensor};

#[derive(Parser, Debug)]
#[command(about = "Run an ONNX model with wgtorch and compare its outputs with reference values")]
struct Args {
    /// The ONNX model.
    model: PathBuf,
    /// Inputs (named like the graph's inputs) and, optionally, reference outputs.
    io: PathBuf,
    /// Where to run: cpu or gpu (the first adapter wgpu finds).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Write the outputs here (safetensors).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Relative tolerance.
    #[arg(long, default_value_t = 1e-4)]
    rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = 1e-4)]
    atol: f64,
}

/// One output compared with its reference.
#[derive(Debug)]
pub struct Compared {
    pub name: String,
    pub max_abs_diff: f64,
    pub ok: bool,
    /// Why it failed before any value was compared (shape or dtype).
    pub mismatch: Option<String>,
}

impl Compared {
    pub fn line(&self, rtol: f64, atol: f64) -> String {
        let verdict = if self.ok { "ok" } else { "FAIL" };
        match &self.mismatch {
            Some(m) => format!("{}: {m} FAIL", self.name),
            None => format!(
                "{}: max abs diff {:.3e} (rtol {rtol:e}, atol {atol:e}) {verdict}",
                self.name, self.max_abs_diff
            ),
        }
    }
}

/// The device named on the command line.
pub fn device(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "gpu" => Device::gpu(),
        other => Err(Error::msg(format!(
            "--device must be cpu or gpu, got '{other}'"
        ))),
    }
}

/// The loaded model, its outputs by name, and the comparisons with the references.
pub type Checked = (onnx::Model, Vec<(String, Tensor)>, Vec<Compared>);

/// Loads `model` and `io` on `dev`, runs the model, and compares every output that `io` holds.
pub fn check(model: &Path, io: &Path, dev: &Device, rtol: f64, atol: f64) -> Result<Checked> {
    let m = onnx::Model::load(model, dev)?;
    let tensors = wgtorch::io::load(io, &Device::Cpu)?;
    let find = |name: &str| {
        tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    };
    let inputs = m
        .inputs()
        .iter()
        .map(|s| {
            find(&s.name).ok_or_else(|| {
                Error::msg(format!(
                    "{} holds no tensor named '{}' (input {s})",
                    io.display(),
                    s.name
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let outputs: Vec<(String, Tensor)> = m
        .outputs()
        .into_iter()
        .map(|s| s.name)
        .zip(m.run(&inputs)?)
        .collect();
    let mut compared = Vec::new();
    for (name, ours) in &outputs {
        if let Some(reference) = find(name) {
            compared.push(compare(name, ours, &reference, rtol, atol)?);
        }
    }
    Ok((m, outputs, compared))
}

/// `|ours − ref| ≤ atol + rtol·|ref|` everywhere (NaN matches NaN), and the largest difference.
pub fn compare(
    name: &str,
    ours: &Tensor,
    reference: &Tensor,
    rtol: f64,
    atol: f64,
) -> Result<Compared> {
    let mismatch = if ours.shape() != reference.shape() {
        Some(format!(
            "shape {:?}, the reference has {:?}",
            ours.shape(),
            reference.shape()
        ))
    } else if ours.dtype().is_float() != reference.dtype().is_float() {
        Some(format!(
            "dtype {}, the reference has {}",
            ours.dtype(),
            reference.dtype()
        ))
    } else {
        None
    };
    if mismatch.is_some() {
        return Ok(Compared {
            name: name.into(),
            max_abs_diff: f64::INFINITY,
            ok: false,
            mismatch,
        });
    }
    let (a, b) = (ours.to_f64_vec()?, reference.to_f64_vec()?);
    let (mut max, mut ok) = (0.0f64, true);
    for (&x, &y) in a.iter().zip(&b) {
        if x.is_nan() && y.is_nan() || x == y {
            continue;
        }
        let d = (x - y).abs();
        if d.is_nan() || d > atol + rtol * y.abs() {
            ok = false;
        }
        max = max.max(if d.is_nan() { f64::INFINITY } else { d });
    }
    Ok(Compared {
        name: name.into(),
        max_abs_diff: max,
        ok,
        mismatch: None,
    })
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let args = Args::parse();
    let dev = device(&args.device)?;
    let (m, outputs, compared) = check(&args.model, &args.io, &dev, args.rtol, args.atol)?;
    let (nodes, folded) = m.node_counts();
    eprintln!(
        "{}: {} (opset {}), {nodes} nodes ({folded} folded at load, {} fused into a later node), on {}",
        args.model.display(),
        m.producer(),
        m.opset(),
        m.fused_nodes(),
        dev.describe()
    );
    for group in m.fused_groups() {
        eprintln!("  one kernel: {}", group.join(" -> "));
    }
    for c in &compared {
        println!("{}", c.line(args.rtol, args.atol));
    }
    if compared.is_empty() {
        eprintln!(
            "{} holds no reference outputs: nothing compared",
            args.io.display()
        );
    }
    if let Some(out) = &args.out {
        wgtorch::io::save(out, &outputs)?;
        eprintln!("wrote {} output(s) to {}", outputs.len(), out.display());
    }
    if compared.iter().any(|c| !c.ok) {
        std::process::exit(1);
    }
    Ok(())
}
