//! What the benchmark page (`web/bench/`) times besides training: the CPU backend's matrix
//! product, and ONNX models loaded once and run many times (as onnxruntime-web's sessions are).

use crate::onnx::{graph_inputs, host_f32, io_tensors};
use crate::{js, page_device};
use wasm_bindgen::prelude::*;
use wgtorch::onnx::Model;
use wgtorch::{Device, Tensor};

/// The CPU backend's GEMM kernel in this build (e.g. `"simd128 4×8"`).
#[wasm_bindgen]
pub fn cpu_gemm_kernel() -> String {
    wgtorch::backend::cpu::gemm_kernel()
}

/// An `n×n` by `n×n` f32 product on the CPU, built once and run by the page's timer.
#[wasm_bindgen]
pub struct CpuMatmul {
    a: Tensor,
    b: Tensor,
}

#[wasm_bindgen]
impl CpuMatmul {
    /// Two random `n×n` matrices.
    #[wasm_bindgen(constructor)]
    pub fn new(n: u32) -> Result<CpuMatmul, JsValue> {
        let n = n as usize;
        Ok(CpuMatmul {
            a: Tensor::randn([n, n], &Device::Cpu).map_err(js)?,
            b: Tensor::randn([n, n], &Device::Cpu).map_err(js)?,
        })
    }
    /// One product; returns its first element (so that it is computed and used).
    pub fn run(&self) -> Result<f32, JsValue> {
        let c = self.a.matmul(&self.b).map_err(js)?;
        let first = c
            .reshape([-1])
            .and_then(|c| c.narrow(0, 0, 1))
            .map_err(js)?;
        Ok(first.to_vec::<f32>().map_err(js)?[0])
    }
}

/// An ONNX model loaded on the page's device with the inputs of its io file; each [`run`]
/// uploads the inputs, runs the graph and reads every output back, as a session's `run` does.
///
/// [`run`]: OnnxSession::run
#[wasm_bindgen]
pub struct OnnxSession {
    model: Model,
    device: Device,
    inputs: Vec<Tensor>,
}

#[wasm_bindgen]
impl OnnxSession {
    /// Loads `model` (ONNX bytes) on WebGPU if `try_gpu` and the page has an adapter, else on
    /// the CPU, and takes the tensors named like the graph's inputs from `io` (safetensors).
    pub async fn create(
        model: Vec<u8>,
        io: Vec<u8>,
        try_gpu: bool,
    ) -> Result<OnnxSession, JsValue> {
        let device = page_device(try_gpu).await;
        let model = Model::load_bytes(&model, &device).map_err(js)?;
        let inputs = io_tensors(&io)
            .and_then(|t| graph_inputs(&model, &t))
            .map_err(js)?;
        Ok(OnnxSession {
            model,
            device,
            inputs,
        })
    }
    /// The device the model runs on (`cpu` or `gpu:0`).
    pub fn device(&self) -> String {
        self.device.to_string()
    }
    /// The graph's output names, in order.
    pub fn output_names(&self) -> Vec<String> {
        self.model.outputs().into_iter().map(|s| s.name).collect()
    }
    /// One inference: resolves to the outputs as f32 arrays, in [`output_names`] order.
    ///
    /// [`output_names`]: OnnxSession::output_names
    pub async fn run(&self) -> Result<js_sys::Array, JsValue> {
        let inputs = self
            .inputs
            .iter()
            .map(|t| t.to(&self.device))
            .collect::<wgtorch::Result<Vec<_>>>()
            .map_err(js)?;
        let outs = self.model.run_async(&inputs).await.map_err(js)?;
        let arr = js_sys::Array::new();
        for t in &outs {
            let v = host_f32(t).await.map_err(js)?;
            arr.push(&js_sys::Float32Array::from(v.as_slice()));
        }
        Ok(arr)
    }
}

/// Checks the CPU backend's matrix product in this build (the SIMD128 kernel on wasm) against
/// an f64 reference, over shapes that cross the kernel's 4×8 tile and the GEMM's cache blocks
/// (KC 384, MC 240, NC 384), with plain and transposed operands. Resolves to JSON `{ kernel,
/// cases, failed: ["m×k×n …: max error e > tolerance t"] }`; the browser test requires no
/// failures.
#[wasm_bindgen]
pub fn check_cpu_gemm() -> Result<String, JsValue> {
    let shapes = [
        (1, 1, 1),
        (1, 7, 9),
        (5, 3, 7),
        (6, 8, 8),
        (7, 9, 17),
        (12, 16, 16),
        (13, 300, 31),
        (3, 385, 5),
        (50, 400, 45),
        (241, 20, 390),
        (64, 288, 256),
    ];
    let mut failed = Vec::new();
    let mut cases = 0;
    let mut g = wgtorch::Generator::new(7);
    for &(m, k, n) in &shapes {
        for (ta, tb) in [(false, false), (false, true), (true, false)] {
            let a: Vec<f32> = (0..m * k)
                .map(|_| g.below(2001) as f32 / 1000.0 - 1.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|_| g.below(2001) as f32 / 1000.0 - 1.0)
                .collect();
            // Element (i, p) of A and (p, j) of B, whichever way they are stored.
            let at = |i: usize, p: usize| if ta { a[p * m + i] } else { a[i * k + p] };
            let bt = |p: usize, j: usize| if tb { b[j * k + p] } else { b[p * n + j] };
            let tensor = |v: &[f32], rows, cols, t: bool| -> wgtorch::Result<Tensor> {
                let x = Tensor::from_vec(v.to_vec(), [rows, cols], &Device::Cpu)?;
                if t {
                    x.t()
                } else {
                    Ok(x)
                }
            };
            let ours = tensor(&a, if ta { k } else { m }, if ta { m } else { k }, ta)
                .and_then(|x| {
                    x.matmul(&tensor(
                        &b,
                        if tb { n } else { k },
                        if tb { k } else { n },
                        tb,
                    )?)
                })
                .and_then(|c| c.to_vec::<f32>())
                .map_err(js)?;
            let (mut worst, mut tol_at) = (0.0f64, 0.0f64);
            let mut ok = ours.len() == m * n;
            for i in 0..m {
                for j in 0..n {
                    let (mut exact, mut mag) = (0.0f64, 0.0f64);
                    for p in 0..k {
                        let t = f64::from(at(i, p)) * f64::from(bt(p, j));
                        exact += t;
                        mag += t.abs();
                    }
                    // f32 accumulation: k roundings of at most 2^-24 of the running magnitude.
                    let tol = 4.0 * k as f64 * f64::from(f32::EPSILON) * mag + 1e-30;
                    let err = (f64::from(*ours.get(i * n + j).unwrap_or(&f32::NAN)) - exact).abs();
                    // NaN (a lost or unwritten element) fails too.
                    if err.is_nan() || err > tol {
                        ok = false;
                    }
                    if err.is_nan() || err > worst {
                        (worst, tol_at) = (err, tol);
                    }
                }
            }
            cases += 1;
            if !ok {
                failed.push(format!(
                    "{m}×{k}×{n} (A{} B{}): max error {worst:e} > tolerance {tol_at:e}",
                    if ta { "ᵀ" } else { "" },
                    if tb { "ᵀ" } else { "" }
                ));
            }
        }
    }
    Ok(
        serde_json::json!({ "kernel": cpu_gemm_kernel(), "cases": cases, "failed": failed })
            .to_string(),
    )
}
