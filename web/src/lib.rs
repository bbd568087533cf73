//! The browser demo's Rust side: a trainer for the SimpleCNN on the embedded digits, on WebGPU
//! when the browser offers it and on the CPU otherwise. Everything that waits for the GPU is
//! async, so the page's event loop keeps running between steps.

#![deny(missing_docs)]

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wgtorch::backend::gpu::kernels::GpuType;
use wgtorch::data::{random_split, Dataset, Digits, Subset};
use wgtorch::models::SimpleCnn;
use wgtorch::nn::{functional as F, ModuleExt};
use wgtorch::optim::{Adam, Optimizer};
use wgtorch::{Device, Tensor};

mod bench;
mod golden;
mod onnx;
pub use bench::{check_cpu_gemm, cpu_gemm_kernel, CpuMatmul, OnnxSession};
pub use golden::run_golden;
pub use onnx::run_onnx;

fn js(e: wgtorch::Error) -> JsValue {
    JsValue::from_str(&e.to_string())
}

/// WebGPU if `try_gpu` and the page has an adapter, else the CPU.
async fn page_device(try_gpu: bool) -> Device {
    match try_gpu && wgtorch::backend::gpu::init_gpu(0).await.is_ok() {
        true => Device::Gpu(0),
        false => Device::Cpu,
    }
}

struct State {
    device: Device,
    backend: String,
    model: SimpleCnn,
    opt: Adam,
    digits: Arc<Digits>,
    train: Subset,
    test: Subset,
    order: Vec<usize>,
    cursor: usize,
    epoch: u32,
    batch: usize,
}

/// Trains and queries the SimpleCNN.
#[wasm_bindgen]
pub struct Trainer(Rc<RefCell<State>>);

#[wasm_bindgen]
impl Trainer {
    /// Build on WebGPU if `try_gpu` and the browser has an adapter, else on the CPU.
    pub async fn create(try_gpu: bool, batch: u32, seed: u32) -> Result<Trainer, JsValue> {
        let (device, backend) = if try_gpu {
            match wgtorch::backend::gpu::init_gpu(0).await {
                Ok(ctx) => (Device::Gpu(0), format!("WebGPU — {}", ctx.describe())),
                Err(e) => (Device::Cpu, format!("CPU — WebGPU unavailable ({e})")),
            }
        } else {
            (Device::Cpu, "CPU — WebGPU not requested".to_string())
        };
        wgtorch::manual_seed(seed as u64);
        let digits = Arc::new(Digits::load().map_err(js)?);
        let all: Arc<dyn Dataset> = digits.clone();
        let (train, test) = random_split(all, 0.8, seed as u64).map_err(js)?;
        let model = SimpleCnn::new(&device).map_err(js)?;
        let opt = Adam::new(model.parameters(), 2e-3).map_err(js)?;
        let order = (0..train.len()).collect();
        Ok(Trainer(Rc::new(RefCell::new(State {
            device,
            backend,
            model,
            opt,
            digits,
            train,
            test,
            order,
            cursor: 0,
            epoch: 0,
            batch: batch as usize,
        }))))
    }

    /// Which backend runs the model.
    pub fn backend(&self) -> String {
        self.0.borrow().backend.clone()
    }
    /// True when training on WebGPU.
    pub fn on_gpu(&self) -> bool {
        self.0.borrow().device.is_gpu()
    }
    /// On WebGPU, the GEMM tile the f32 products run in (`ROWSxCOLS/WXxWY`; nothing is tuned in
    /// the browser, so this is the adapter's default); on the CPU, none.
    pub fn gemm_tile(&self) -> Option<String> {
        let Device::Gpu(n) = self.0.borrow().device else {
            return None;
        };
        let ctx = wgtorch::backend::gpu::context(n).ok()?;
        Some(ctx.gemm_tiles(GpuType::F32)[0].to_string())
    }
    /// Epochs completed.
    pub fn epoch(&self) -> u32 {
        self.0.borrow().epoch
    }
    /// Training samples.
    pub fn train_len(&self) -> u32 {
        self.0.borrow().train.len() as u32
    }

    /// One optimisation step on the next batch; resolves to the batch loss.
    pub async fn step(&self) -> Result<f64, JsValue> {
        let loss = self.record_step()?;
        // Waiting for the loss yields to the event loop while the GPU works.
        loss.item_async().await.map_err(js)
    }

    /// Profiles `steps` training steps with wgtorch's profiler (CPU and GPU activity) and
    /// resolves to a JSON summary: `{ steps, step_ms, gpu_timed, unavailable, kernels, ops,
    /// table, trace }`. `kernels` are the kernels that ran longest on this page's adapter
    /// (`{ name, calls, total_ms }`), measured by the adapter's timestamp queries; where the
    /// adapter cannot time kernels `gpu_timed` is false and `unavailable` says why (no figures
    /// are made up). `ops` are the ops by CPU time, `table` is the profiler's table and `trace`
    /// the Chrome trace (Trace Event Format JSON). On WebGPU, `dispatches_per_step` and
    /// `submits_per_step` count what a step hands the browser, and `gpu_busy_ms_per_step` is the
    /// kernels' share of `step_ms` (the rest is recording, the JS boundary and waiting).
    pub async fn profile_steps(&self, steps: u32) -> Result<String, JsValue> {
        use wgtorch::profiler::{ProfileOptions, Profiler, SortBy};
        let ctx = match self.0.borrow().device {
            Device::Gpu(n) => Some(wgtorch::backend::gpu::context(n).map_err(js)?),
            Device::Cpu => None,
        };
        let before = ctx.as_ref().map(|c| c.stats()).unwrap_or_default();
        let p = Profiler::start(ProfileOptions {
            record_shapes: true,
            ..Default::default()
        })
        .map_err(js)?;
        for _ in 0..steps.max(1) {
            // The step's scope spans the wait for its loss, so that its time is the step's wall
            // time, GPU work included (recording alone takes a fraction of it).
            let _step = wgtorch::profiler::record_function("train_step");
            let loss = self.record_step()?;
            loss.item_async().await.map_err(js)?;
        }
        let prof = p.stop_async().await;
        let after = ctx.as_ref().map(|c| c.stats()).unwrap_or_default();
        let n = f64::from(steps.max(1));
        let avg = prof.key_averages();
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut kernels: Vec<_> = avg.rows().iter().filter(|r| r.gpu_kernel).collect();
        kernels.sort_by_key(|r| std::cmp::Reverse(r.self_gpu_time_total_ns));
        // The step scope's own time is its wait for the GPU: it is `step_ms`, not an op.
        let mut ops: Vec<_> = avg
            .rows()
            .iter()
            .filter(|r| !r.gpu_kernel && r.name != "train_step")
            .collect();
        ops.sort_by_key(|r| std::cmp::Reverse(r.self_cpu_time_total_ns));
        let step = avg.get("train_step").map_or(0, |r| r.cpu_time_avg_ns());
        let on_gpu = self.on_gpu();
        let summary = serde_json::json!({
            "steps": steps.max(1),
            "step_ms": ms(step),
            "dispatches_per_step": (after.dispatches - before.dispatches) as f64 / n,
            "submits_per_step": (after.submits - before.submits) as f64 / n,
            "gpu_busy_ms_per_step": ms(avg.self_gpu_time_total_ns()) / n,
            "gpu_timed": on_gpu && !kernels.is_empty(),
            "unavailable": prof.gpu_time_unavailable(),
            "kernels": kernels.iter().take(8).map(|r| serde_json::json!({
                "name": r.name, "calls": r.count, "total_ms": ms(r.self_gpu_time_total_ns),
            })).collect::<Vec<_>>(),
            "ops": ops.iter().take(8).map(|r| serde_json::json!({
                "name": r.name, "calls": r.count, "self_cpu_ms": ms(r.self_cpu_time_total_ns),
                "gpu_total_ms": ms(r.gpu_time_total_ns),
            })).collect::<Vec<_>>(),
            "table": avg.table(if on_gpu { SortBy::SelfGpuTimeTotal } else { SortBy::SelfCpuTimeTotal }, 15),
            "trace": prof.chrome_trace(),
        });
        Ok(summary.to_string())
    }

    /// Accuracy on the held-out 20%.
    pub async fn evaluate(&self) -> Result<f64, JsValue> {
        let (hits, n) = {
            let mut s = self.0.borrow_mut();
            s.model.eval();
            let _g = wgtorch::no_grad();
            let mut hits: Option<Tensor> = None;
            let n = s.test.len();
            for start in (0..n).step_by(256) {
                let idx: Vec<usize> = (start..(start + 256).min(n)).collect();
                let (x, y) = batch(&s.test, &idx, &s.device).map_err(js)?;
                let h = s
                    .model
                    .forward(&x)
                    // Counted in f32 on the device: int64 sums are added exactly through the
                    // host on a GPU, which cannot block in the browser.
                    .and_then(|l| {
                        let hits = l.argmax(Some(1), false)?.eq(&y)?.sum_all()?;
                        hits.to_dtype(wgtorch::DType::F32)
                    })
                    .map_err(js)?;
                hits = Some(match hits {
                    Some(t) => t.add(&h).map_err(js)?,
                    None => h,
                });
            }
            s.model.train();
            (hits, n)
        };
        let hits = match hits {
            Some(h) => h.item_async().await.map_err(js)?,
            None => 0.0,
        };
        Ok(hits / n.max(1) as f64)
    }

    /// Class probabilities for a drawn digit: `bitmap` is 32×32 on/off pixels (row-major), reduced
    /// as the data set was made (on-pixel counts of 4×4 blocks), then fed like the training data.
    pub async fn predict(&self, bitmap: Vec<u8>) -> Result<Vec<f32>, JsValue> {
        if bitmap.len() != 1024 {
            return Err(JsValue::from_str("predict expects 32x32 = 1024 pixels"));
        }
        let probs = {
            let mut s = self.0.borrow_mut();
            s.model.eval();
            let _g = wgtorch::no_grad();
            let mut counts = [0u8; 64];
            for (i, &p) in bitmap.iter().enumerate() {
                if p != 0 {
                    counts[(i / 32 / 4) * 8 + (i % 32) / 4] += 1;
                }
            }
            let mut img = vec![0f32; 3 * 1024];
            for c in 0..3 {
                for i in 0..1024 {
                    img[c * 1024 + i] = counts[(i / 32 / 4) * 8 + (i % 32) / 4] as f32 / 16.0;
                }
            }
            let x = Tensor::from_vec(img, [1, 3, 32, 32], &s.device).map_err(js)?;
            let p = s.model.forward(&x).and_then(|l| l.softmax(1)).map_err(js)?;
            s.model.train();
            p
        };
        probs.to_vec_async::<f32>().await.map_err(js)
    }

    /// A held-out digit as a 32×32 on/off bitmap (the data set's 4×4-block counts spread back out)
    /// and its label: what the page draws when the test injects a digit.
    pub fn test_digit(&self, k: u32) -> Result<Vec<u8>, JsValue> {
        let s = self.0.borrow();
        let i = s.test.indices[k as usize % s.test.len()];
        let img = s.digits.image32(i).map_err(js)?;
        let mut out = vec![0u8; 1024];
        for by in 0..8 {
            for bx in 0..8 {
                // Turn on as many pixels of the 4×4 block as the count says.
                let count = (img[by * 4 * 32 + bx * 4] * 16.0).round() as usize;
                for p in 0..count.min(16) {
                    out[(by * 4 + p / 4) * 32 + bx * 4 + p % 4] = 1;
                }
            }
        }
        Ok(out)
    }
    /// The label of held-out digit `k`.
    pub fn test_label(&self, k: u32) -> u32 {
        let s = self.0.borrow();
        s.digits.labels()[s.test.indices[k as usize % s.test.len()]] as u32
    }
}

impl Trainer {
    /// Records the next batch's training step; returns its loss (not waited for).
    fn record_step(&self) -> Result<Tensor, JsValue> {
        Ok({
            let mut s = self.0.borrow_mut();
            if s.cursor == 0 {
                // A new epoch: reshuffle with the epoch as seed.
                let mut g = wgtorch::Generator::new(0x5eed ^ s.epoch as u64);
                let n = s.order.len();
                for i in (1..n).rev() {
                    let j = g.below(i as u64 + 1) as usize;
                    s.order.swap(i, j);
                }
            }
            let end = (s.cursor + s.batch).min(s.order.len());
            let idx: Vec<usize> = s.order[s.cursor..end].to_vec();
            let (x, y) = batch(&s.train, &idx, &s.device).map_err(js)?;
            let loss = F::cross_entropy(&s.model.forward(&x).map_err(js)?, &y).map_err(js)?;
            s.opt.zero_grad();
            loss.backward().map_err(js)?;
            s.opt.step().map_err(js)?;
            s.cursor = if end >= s.order.len() { 0 } else { end };
            if s.cursor == 0 {
                s.epoch += 1;
            }
            loss
        })
    }
}

fn batch(ds: &Subset, idx: &[usize], dev: &Device) -> wgtorch::Result<(Tensor, Tensor)> {
    let mut data = Vec::with_capacity(idx.len() * 3072);
    let mut labels = Vec::with_capacity(idx.len());
    for &i in idx {
        let (x, y) = ds.get(i)?;
        data.extend(x.to_vec::<f32>()?);
        labels.push(y);
    }
    Ok((
        Tensor::from_vec(data, [idx.len(), 3, 32, 32], dev)?,
        Tensor::from_vec(labels, [idx.len()], dev)?,
    ))
}
