//! ONNX models in the page: `Model::load_bytes` and `run_async` on WebGPU (or the wasm CPU), each
//! output checked against the reference the io file holds (`onnx_run`'s rule: |ours − ref| ≤
//! atol + rtol·|ref|, NaN matching NaN).

use std::path::Path;
use wasm_bindgen::prelude::*;
use wgtorch::onnx::Model;
use wgtorch::{DType, Device, Result, Tensor};

/// `t` on the host as f32 (converted from its dtype first).
pub(crate) async fn host_f32(t: &Tensor) -> Result<Vec<f32>> {
    let f = if t.dtype() == DType::F32 {
        t.clone()
    } else {
        t.to_dtype(DType::F32)?
    };
    f.to_vec_async::<f32>().await
}

async fn host(t: &Tensor) -> Result<Vec<f64>> {
    Ok(host_f32(t).await?.into_iter().map(f64::from).collect())
}

/// The tensors of an io file (safetensors bytes), on the CPU, by name.
pub(crate) fn io_tensors(io: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let (tensors, _) =
        wgtorch::io::from_safetensors_bytes(Path::new("io.safetensors"), io, &Device::Cpu)?;
    Ok(tensors)
}

/// The io file's tensors named like `m`'s inputs, in the graph's order.
pub(crate) fn graph_inputs(m: &Model, tensors: &[(String, Tensor)]) -> Result<Vec<Tensor>> {
    m.inputs()
        .iter()
        .map(|s| find(tensors, &s.name).ok_or_else(|| wgtorch::Error::msg(format!("no input {s}"))))
        .collect()
}

fn find(tensors: &[(String, Tensor)], name: &str) -> Option<Tensor> {
    tensors
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t.clone())
}

async fn check(model: &[u8], io: &[u8], dev: &Device) -> Result<serde_json::Value> {
    let m = Model::load_bytes(model, dev)?;
    let tensors = io_tensors(io)?;
    let outs = m.run_async(&graph_inputs(&m, &tensors)?).await?;
    let mut rows = Vec::new();
    for (spec, ours) in m.outputs().iter().zip(&outs) {
        let Some(reference) = find(&tensors, &spec.name) else {
            continue;
        };
        let (a, b) = (host(ours).await?, host(&reference).await?);
        let same_shape = ours.shape() == reference.shape();
        let (mut max, mut ok) = (0.0f64, same_shape);
        for (&x, &y) in a.iter().zip(&b) {
            if (x.is_nan() && y.is_nan()) || x == y {
                continue;
            }
            let d = (x - y).abs();
            ok &= d <= 1e-4 + 1e-4 * y.abs();
            max = max.max(if d.is_nan() { f64::INFINITY } else { d });
        }
        rows.push(serde_json::json!({ "name": spec.name, "max_abs_diff": max, "ok": ok }));
    }
    Ok(serde_json::json!({ "device": dev.to_string(), "outputs": rows }))
}

/// Loads `model` (ONNX bytes) on WebGPU when the page has it (else the CPU), runs it on the
/// inputs in `io` (safetensors bytes) and compares with the reference outputs there; resolves to
/// `{"device", "outputs": [{"name", "max_abs_diff", "ok"}]}` as JSON.
#[wasm_bindgen]
pub async fn run_onnx(
    model: Vec<u8>,
    io: Vec<u8>,
    try_gpu: bool,
) -> std::result::Result<String, JsValue> {
    check(&model, &io, &crate::page_device(try_gpu).await)
        .await
        .map(|v| v.to_string())
        .map_err(|e| JsValue::from_str(&e.to_string()))
}
