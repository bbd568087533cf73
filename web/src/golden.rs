//! Golden op cases in the browser: a case from `ops.json` runs on the page's device, forward and
//! gradients, and the result is compared with PyTorch's numbers here. Covers at least one op per
//! kernel family; the page reports the summary to the end-to-end test.

use serde_json::Value;
use wasm_bindgen::prelude::*;
use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Result, Tensor};

fn tensor(v: &Value, dev: &Device) -> Result<Tensor> {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            x.as_f64()
                .unwrap_or_else(|| x.as_bool().map(|b| b as u8 as f64).unwrap_or(f64::NAN))
        })
        .collect();
    let dt = match v["dtype"].as_str().unwrap() {
        "i64" => DType::I64,
        "i32" => DType::I32,
        "bool" => DType::Bool,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    };
    Tensor::from_f64(&data, shape, dt, dev)
}

fn dims(v: &Value) -> Vec<isize> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap() as isize).collect(),
        Value::Number(n) => vec![n.as_i64().unwrap() as isize],
        _ => vec![],
    }
}

fn run(op: &str, kw: &Value, x: &[Tensor]) -> Result<Option<Tensor>> {
    let pair = |k: &str, d: usize| -> [usize; 2] {
        match &kw[k] {
            Value::Number(n) => [n.as_u64().unwrap() as usize; 2],
            Value::Array(a) => [
                a[0].as_u64().unwrap() as usize,
                a[1].as_u64().unwrap() as usize,
            ],
            _ => [d, d],
        }
    };
    let dim = || kw["dim"].as_i64().unwrap_or(0) as isize;
    let keep = kw["keepdim"].as_bool().unwrap_or(false);
    Ok(Some(match op {
        "torch.exp" => x[0].exp()?,
        "torch.sigmoid" => x[0].sigmoid()?,
        "torch.add" => x[0].add_alpha(&x[1], kw["alpha"].as_f64().unwrap_or(1.0))?,
        "torch.mul" => x[0].mul(&x[1])?,
        "torch.where" => Tensor::where_cond(&x[0], &x[1], &x[2])?,
        "torch.sum" => x[0].sum_dims(dims(&kw["dim"]), keep)?,
        "torch.amax" => x[0].amax(dims(&kw["dim"]), keep)?,
        "torch.argmax" => x[0].argmax(kw["dim"].as_i64().map(|d| d as isize), keep)?,
        "torch.cumsum" => x[0].cumsum(dim())?,
        "torch.softmax" => x[0].softmax(dim())?,
        "torch.matmul" => x[0].matmul(&x[1])?,
        "torch.permute" => x[0].permute(dims(&kw["dims"]))?.contiguous()?,
        "torch.index_select" => x[0].index_select(dim(), &x[1])?,
        "torch.gather" => x[0].gather(dim(), &x[1])?,
        "torch.scatter_add" => x[0].scatter_add(dim(), &x[1], &x[2])?,
        "torch.nn.functional.conv2d" => F::conv2d_with(
            &x[0],
            &x[1],
            x.get(2),
            F::Conv2dFuncOptions {
                stride: pair("stride", 1).into(),
                padding: pair("padding", 0).into(),
                dilation: pair("dilation", 1).into(),
                groups: kw["groups"].as_u64().unwrap_or(1) as usize,
            },
        )?,
        "torch.nn.functional.max_pool2d" => {
            let k = pair("kernel_size", 1);
            let s = if kw["stride"].is_null() {
                k
            } else {
                pair("stride", 1)
            };
            F::max_pool2d_with(
                &x[0],
                k,
                F::MaxPool2dOptions {
                    stride: Some(s.into()),
                    padding: pair("padding", 0).into(),
                    ..Default::default()
                },
            )?
        }
        "torch.nn.functional.cross_entropy" => F::cross_entropy_with(
            &x[0],
            &x[1],
            F::CrossEntropyOptions {
                reduction: F::Reduction::parse(kw["reduction"].as_str().unwrap_or("mean"))?,
                ignore_index: kw["ignore_index"].as_i64().unwrap_or(-100),
                label_smoothing: kw["label_smoothing"].as_f64().unwrap_or(0.0),
                weight: None,
            },
        )?,
        _ => return Ok(None),
    }))
}

fn close(a: &[f64], b: &[f64], rtol: f64, atol: f64) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= atol + rtol * y.abs())
}

async fn values(t: &Tensor) -> Result<Vec<f64>> {
    let t = if t.dtype() == DType::F32 || t.dtype() == DType::I32 || t.dtype() == DType::Bool {
        t.clone()
    } else {
        t.to_dtype(DType::F32)?
    };
    Ok(match t.dtype() {
        DType::I32 => t
            .to_vec_async::<i32>()
            .await?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        DType::Bool => t
            .to_vec_async::<bool>()
            .await?
            .into_iter()
            .map(|v| v as u8 as f64)
            .collect(),
        _ => t
            .to_vec_async::<f32>()
            .await?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
    })
}

async fn case(c: &Value, dev: &Device) -> Result<Option<bool>> {
    if c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i.get("view").is_some())
    {
        return Ok(None);
    }
    let mut xs = Vec::new();
    for i in c["inputs"].as_array().unwrap() {
        let t = tensor(i, dev)?;
        xs.push(if i["requires_grad"].as_bool().unwrap_or(false) {
            t.requires_grad_(true)
        } else {
            t
        });
    }
    let Some(out) = run(c["op"].as_str().unwrap(), &c["kwargs"], &xs)? else {
        return Ok(None);
    };
    let (rtol, atol) = (c["rtol"].as_f64().unwrap(), c["atol"].as_f64().unwrap());
    let want = &c["output"][0];
    let want_v: Vec<f64> = want["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            x.as_f64()
                .unwrap_or_else(|| x.as_bool().map(|b| b as u8 as f64).unwrap_or(f64::NAN))
        })
        .collect();
    if !close(&values(&out).await?, &want_v, rtol, atol) {
        return Ok(Some(false));
    }
    if let (Some(go), Some(grads)) = (c["grad_output"].as_array(), c["grads"].as_array()) {
        if out.requires_grad() {
            out.mul(&tensor(&go[0], dev)?)?.sum_all()?.backward()?;
            for (x, g) in xs.iter().zip(grads) {
                if g.is_null() {
                    continue;
                }
                let gv: Vec<f64> = g["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                let got = match x.grad() {
                    Some(t) => values(&t).await?,
                    None => vec![0.0; gv.len()],
                };
                if !close(&got, &gv, rtol, atol) {
                    return Ok(Some(false));
                }
            }
        }
    }
    Ok(Some(true))
}

/// Run every case of `ops_json` this runner has a binding for on WebGPU (or the CPU without it);
/// resolves to `{"device", "passed": [...], "failed": [...]}` as JSON.
#[wasm_bindgen]
pub async fn run_golden(ops_json: String) -> std::result::Result<String, JsValue> {
    let dev = crate::page_device(true).await;
    let doc: Value =
        serde_json::from_str(&ops_json).map_err(|e| JsValue::from_str(&e.to_string()))?;
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for c in doc["cases"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or("?").to_string();
        match case(c, &dev).await {
            Ok(Some(true)) => passed.push(name),
            Ok(Some(false)) => failed.push(name),
            Ok(None) => {}
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    Ok(
        serde_json::json!({ "device": dev.to_string(), "passed": passed, "failed": failed })
            .to_string(),
    )
}
