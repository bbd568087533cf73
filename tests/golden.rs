//! Runs every case of every op file (`../shared/golden/ops.json`, or $WGTORCH_GOLDEN_DIR, and the
//! repo's own `tests/golden/*.json`) on the CPU and on the GPU: forward outputs and input gradients
//! against PyTorch's numbers.

mod common;

use serde_json::Value;
use std::path::PathBuf;
use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Result, Tensor};

fn golden_dir() -> PathBuf {
    match std::env::var("WGTORCH_GOLDEN_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"),
    }
}

fn dtype_of(s: &str) -> DType {
    match s {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "i64" => DType::I64,
        "i32" => DType::I32,
        "bool" => DType::Bool,
        other => panic!("unknown dtype {other}"),
    }
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn data_of(v: &Value) -> Vec<f64> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| match x {
            Value::Bool(b) => *b as u8 as f64,
            Value::String(s) if s == "nan" => f64::NAN,
            Value::String(s) if s == "inf" => f64::INFINITY,
            Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
            _ => x.as_f64().unwrap(),
        })
        .collect()
}

fn tensor_of(v: &Value, dev: &Device) -> Result<Tensor> {
    Tensor::from_f64(
        &data_of(v),
        shape_of(v),
        dtype_of(v["dtype"].as_str().unwrap()),
        dev,
    )
}

fn ints(v: &Value) -> Vec<usize> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_u64().unwrap() as usize).collect(),
        Value::Number(n) => vec![n.as_u64().unwrap() as usize],
        _ => panic!("expected ints, got {v}"),
    }
}
fn sints(v: &Value) -> Vec<isize> {
    match v {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap() as isize).collect(),
        Value::Number(n) => vec![n.as_i64().unwrap() as isize],
        _ => panic!("expected ints, got {v}"),
    }
}
fn pair(v: &Value, default: usize) -> [usize; 2] {
    match v {
        Value::Null => [default, default],
        _ => {
            let i = ints(v);
            if i.len() == 1 {
                [i[0], i[0]]
            } else {
                [i[0], i[1]]
            }
        }
    }
}

fn apply_views(t: &Tensor, views: Option<&Value>) -> Result<Tensor> {
    let mut t = t.clone();
    for v in views.and_then(|v| v.as_array()).into_iter().flatten() {
        if let Some(p) = v.get("permute") {
            t = t.permute(sints(p))?;
        } else if let Some(s) = v.get("slice") {
            let dim = s["dim"].as_i64().unwrap() as isize;
            let n = t.dim_size(dim)?;
            let start = s["start"].as_u64().unwrap_or(0) as usize;
            let end = s["end"].as_u64().map(|e| e as usize).unwrap_or(n);
            let step = s["step"].as_u64().unwrap_or(1) as usize;
            t = t.slice(dim, start, end, step)?;
        } else if let Some(e) = v.get("expand") {
            t = t.expand(ints(e))?;
        } else {
            panic!("unknown view {v}");
        }
    }
    Ok(t)
}

/// A Python number as PyTorch reads it: an integer literal is an integer scalar.
fn scalar_of(v: &Value) -> wgtorch::Scalar {
    match v.as_i64() {
        Some(i) => wgtorch::Scalar::Int(i),
        None => wgtorch::Scalar::Float(v.as_f64().unwrap()),
    }
}

/// Run one op; `Ok(None)` means the harness has no binding for it yet (reported as pending).
fn run_op(op: &str, kw: &Value, x: &[Tensor]) -> Result<Option<Vec<Tensor>>> {
    let f = |k: &str| kw[k].as_f64();
    let dim = || kw["dim"].as_i64().unwrap() as isize;
    let keep = || kw["keepdim"].as_bool().unwrap_or(false);
    let dims = || {
        if kw["dim"].is_null() {
            vec![]
        } else {
            sints(&kw["dim"])
        }
    };
    let red = || wgtorch::ops::Reduction::parse(kw["reduction"].as_str().unwrap_or("mean"));
    let one = |t: Tensor| Ok(Some(vec![t]));
    let tkw = |k: &str| {
        kw["tensor_kwargs"][k]
            .as_u64()
            .and_then(|i| x.get(i as usize).cloned())
    };
    match op {
        "torch.neg" => one(x[0].neg()?),
        "torch.abs" => one(x[0].abs()?),
        "torch.sign" => one(x[0].sign()?),
        "torch.exp" => one(x[0].exp()?),
        "torch.log" => one(x[0].log()?),
        "torch.sqrt" => one(x[0].sqrt()?),
        "torch.rsqrt" => one(x[0].rsqrt()?),
        "torch.sin" => one(x[0].sin()?),
        "torch.cos" => one(x[0].cos()?),
        "torch.tanh" => one(x[0].tanh()?),
        "torch.sigmoid" => one(x[0].sigmoid()?),
        "torch.nn.functional.relu" => one(x[0].relu()?),
        "torch.nn.functional.gelu" => one(if kw["approximate"].as_str() == Some("tanh") {
            x[0].gelu_tanh()?
        } else {
            x[0].gelu()?
        }),
        "torch.nn.functional.silu" => one(x[0].silu()?),
        "torch.nn.functional.elu" => one(x[0].elu(f("alpha").unwrap_or(1.0))?),
        "torch.nn.functional.leaky_relu" => {
            one(x[0].leaky_relu(f("negative_slope").unwrap_or(0.01))?)
        }
        "torch.nn.functional.softplus" => {
            one(x[0].softplus(f("beta").unwrap_or(1.0), f("threshold").unwrap_or(20.0))?)
        }
        "torch.square" => one(x[0].square()?),
        "torch.reciprocal" => one(x[0].reciprocal()?),
        "torch.clamp" => one(x[0].clamp(f("min"), f("max"))?),
        "torch.erf" => one(x[0].erf()?),
        "torch.pow" => match f("exponent") {
            Some(e) => one(x[0].pow_scalar(e)?),
            None => one(x[0].pow(&x[1])?),
        },
        "torch.add" => one(x[0].add_alpha(&x[1], f("alpha").unwrap_or(1.0))?),
        "torch.sub" => one(x[0].sub(&x[1])?),
        "torch.mul" => one(x[0].mul(&x[1])?),
        "torch.div" => one(x[0].div(&x[1])?),
        "torch.maximum" => one(x[0].maximum(&x[1])?),
        "torch.minimum" => one(x[0].minimum(&x[1])?),
        "torch.eq" => one(x[0].eq(&x[1])?),
        "torch.ne" if x.len() == 1 => one(x[0].ne_scalar(f("other").unwrap())?),
        "torch.le" if x.len() == 1 => one(x[0].le_scalar(f("other").unwrap())?),
        "torch.ge" if x.len() == 1 => one(x[0].ge_scalar(f("other").unwrap())?),
        "torch.ne" => one(x[0].ne(&x[1])?),
        "torch.lt" => one(x[0].lt(&x[1])?),
        "torch.le" => one(x[0].le(&x[1])?),
        "torch.gt" => one(x[0].gt(&x[1])?),
        "torch.ge" => one(x[0].ge(&x[1])?),
        "torch.where" => one(Tensor::where_cond(&x[0], &x[1], &x[2])?),
        "torch.Tensor.masked_fill" => one(x[0].masked_fill(&x[1], f("value").unwrap())?),
        "torch.masked_select" => one(x[0].masked_select(&x[1])?),
        "torch.sum" => one(x[0].sum_dims(dims(), keep())?),
        "torch.mean" => one(x[0].mean_dims(dims(), keep())?),
        "torch.amax" => one(x[0].amax(dims(), keep())?),
        "torch.amin" => one(x[0].amin(dims(), keep())?),
        "torch.max" => {
            let (v, i) = x[0].max_dim(dim(), keep())?;
            Ok(Some(vec![v, i]))
        }
        "torch.min" => {
            let (v, i) = x[0].min_dim(dim(), keep())?;
            Ok(Some(vec![v, i]))
        }
        "torch.argmax" => one(x[0].argmax(kw["dim"].as_i64().map(|d| d as isize), keep())?),
        "torch.argmin" => one(x[0].argmin(kw["dim"].as_i64().map(|d| d as isize), keep())?),
        "torch.var" => {
            one(x[0].var_dims(dims(), kw["unbiased"].as_bool().unwrap_or(true), keep())?)
        }
        "torch.std" => {
            one(x[0].std_dims(dims(), kw["unbiased"].as_bool().unwrap_or(true), keep())?)
        }
        "torch.logsumexp" => one(x[0].logsumexp(dims(), keep())?),
        "torch.prod" => one(x[0].prod_dim(dim(), keep())?),
        "torch.linalg.vector_norm" => {
            one(x[0].vector_norm(f("ord").unwrap_or(2.0), dims(), keep())?)
        }
        "torch.cumsum" => one(x[0].cumsum(dim())?),
        "torch.softmax" => one(x[0].softmax(dim())?),
        "torch.log_softmax" => one(x[0].log_softmax(dim())?),
        "torch.matmul" => one(x[0].matmul(&x[1])?),
        "torch.bmm" => one(x[0].bmm(&x[1])?),
        "torch.nn.functional.linear" => one(x[0].linear(&x[1], x.get(2))?),
        "torch.einsum" => one(Tensor::einsum(kw["equation"].as_str().unwrap(), x)?),
        "torch.reshape" => one(x[0].reshape(sints(&kw["shape"]))?),
        "torch.permute" => one(x[0].permute(sints(&kw["dims"]))?),
        "torch.transpose" => one(x[0].transpose(
            kw["dim0"].as_i64().unwrap() as isize,
            kw["dim1"].as_i64().unwrap() as isize,
        )?),
        "torch.squeeze" => one(if kw["dim"].is_null() {
            x[0].squeeze()?
        } else {
            x[0].squeeze_dim(dim())?
        }),
        "torch.unsqueeze" => one(x[0].unsqueeze(dim())?),
        "torch.flatten" => one(x[0].flatten(
            kw["start_dim"].as_i64().unwrap_or(0) as isize,
            kw["end_dim"].as_i64().unwrap_or(-1) as isize,
        )?),
        "torch.Tensor.expand" => one(x[0].expand(ints(&kw["size"]))?),
        "torch.narrow" => one(x[0].narrow(
            dim(),
            kw["start"].as_u64().unwrap() as usize,
            kw["length"].as_u64().unwrap() as usize,
        )?),
        "torch.cat" => one(Tensor::cat(x, dim())?),
        "torch.select" => one(x[0].select(dim(), kw["index"].as_i64().unwrap())?),
        "torch.unbind" => Ok(Some(x[0].unbind(dim())?)),
        "torch.movedim" => one(x[0].movedim(sints(&kw["source"]), sints(&kw["destination"]))?),
        // The input only names the device.
        "torch.linspace" => one(Tensor::linspace_dtype(
            f("start").unwrap(),
            f("end").unwrap(),
            kw["steps"].as_u64().unwrap() as usize,
            dtype_of(kw["dtype"].as_str().unwrap()),
            &x[0].device(),
        )?),
        "torch.stack" => one(Tensor::stack(x, dim())?),
        "torch.split" => Ok(Some(match &kw["split_size_or_sections"] {
            Value::Array(_) => x[0].split_sizes(ints(&kw["split_size_or_sections"]), dim())?,
            v => x[0].split(v.as_u64().unwrap() as usize, dim())?,
        })),
        "torch.chunk" => Ok(Some(
            x[0].chunk(kw["chunks"].as_u64().unwrap() as usize, dim())?,
        )),
        "torch.flip" => one(x[0].flip(sints(&kw["dims"]))?),
        "torch.Tensor.repeat" => one(x[0].repeat(ints(&kw["repeats"]))?),
        "torch.index_select" => one(x[0].index_select(dim(), &x[1])?),
        "torch.gather" => one(x[0].gather(dim(), &x[1])?),
        "torch.scatter_add" => one(x[0].scatter_add(dim(), &x[1], &x[2])?),
        "torch.nn.functional.embedding" => one(F::embedding_with(
            &x[0],
            &x[1],
            F::EmbeddingFuncOptions {
                padding_idx: kw["padding_idx"].as_i64().map(|p| p as isize),
            },
        )?),
        "torch.nn.functional.one_hot" => {
            one(x[0].one_hot(kw["num_classes"].as_u64().unwrap() as usize)?)
        }
        "torch.nn.functional.conv2d" => one(F::conv2d_with(
            &x[0],
            &x[1],
            x.get(2),
            F::Conv2dFuncOptions {
                stride: pair(&kw["stride"], 1).into(),
                padding: pair(&kw["padding"], 0).into(),
                dilation: pair(&kw["dilation"], 1).into(),
                groups: kw["groups"].as_u64().unwrap_or(1) as usize,
            },
        )?),
        "torch.nn.functional.max_pool2d" => {
            let opts = F::MaxPool2dOptions {
                stride: (!kw["stride"].is_null()).then(|| pair(&kw["stride"], 1).into()),
                padding: pair(&kw["padding"], 0).into(),
                dilation: pair(&kw["dilation"], 1).into(),
            };
            one(F::max_pool2d_with(
                &x[0],
                pair(&kw["kernel_size"], 1),
                opts,
            )?)
        }
        "torch.nn.functional.avg_pool2d" => {
            let opts = F::AvgPool2dOptions {
                stride: (!kw["stride"].is_null()).then(|| pair(&kw["stride"], 1).into()),
                padding: pair(&kw["padding"], 0).into(),
                count_include_pad: kw["count_include_pad"].as_bool().unwrap_or(true),
                divisor_override: kw["divisor_override"].as_u64().map(|d| d as usize),
            };
            one(F::avg_pool2d_with(
                &x[0],
                pair(&kw["kernel_size"], 1),
                opts,
            )?)
        }
        "torch.nn.functional.adaptive_avg_pool2d" => {
            one(F::adaptive_avg_pool2d(&x[0], pair(&kw["output_size"], 1))?)
        }
        "torch.nn.functional.batch_norm:train" | "torch.nn.functional.batch_norm:eval" => {
            let train = op.ends_with("train");
            // Inputs: x, weight, bias, running_mean, running_var. Running stats are buffers (no grad).
            let rm = x[3].detach().mul_scalar(1.0)?;
            let rv = x[4].detach().mul_scalar(1.0)?;
            let y = F::batch_norm_with(
                &x[0],
                Some(&rm),
                Some(&rv),
                F::BatchNormFuncOptions {
                    weight: Some(&x[1]),
                    bias: Some(&x[2]),
                    training: train,
                    momentum: f("momentum").unwrap_or(0.1),
                    eps: f("eps").unwrap_or(1e-5),
                },
            )?;
            Ok(Some(if train { vec![y, rm, rv] } else { vec![y] }))
        }
        "torch.nn.functional.layer_norm" => one(F::layer_norm_with(
            &x[0],
            &ints(&kw["normalized_shape"]),
            F::LayerNormFuncOptions {
                weight: x.get(1),
                bias: x.get(2),
                eps: f("eps").unwrap_or(1e-5),
            },
        )?),
        // losses (tools/golden/losses.py; tensor keywords are inputs named in `tensor_kwargs`)
        "torch.nn.functional.cross_entropy" => one(F::cross_entropy_with(
            &x[0],
            &x[1],
            F::CrossEntropyOptions {
                weight: tkw("weight"),
                ignore_index: kw["ignore_index"].as_i64().unwrap_or(-100),
                reduction: red()?,
                label_smoothing: f("label_smoothing").unwrap_or(0.0),
            },
        )?),
        "torch.nn.functional.nll_loss" => one(F::nll_loss_with(
            &x[0],
            &x[1],
            F::NllLossOptions {
                weight: tkw("weight"),
                ignore_index: kw["ignore_index"].as_i64().unwrap_or(-100),
                reduction: red()?,
            },
        )?),
        "torch.nn.functional.mse_loss" => one(F::mse_loss_with(
            &x[0],
            &x[1],
            F::MseLossOptions {
                reduction: red()?,
                weight: tkw("weight"),
            },
        )?),
        "torch.nn.functional.l1_loss" => one(F::l1_loss_with(
            &x[0],
            &x[1],
            F::L1LossOptions {
                reduction: red()?,
                weight: tkw("weight"),
            },
        )?),
        "torch.nn.functional.smooth_l1_loss" => one(F::smooth_l1_loss_with(
            &x[0],
            &x[1],
            F::SmoothL1LossOptions {
                reduction: red()?,
                beta: f("beta").unwrap_or(1.0),
            },
        )?),
        "torch.nn.functional.huber_loss" => one(F::huber_loss_with(
            &x[0],
            &x[1],
            F::HuberLossOptions {
                reduction: red()?,
                delta: f("delta").unwrap_or(1.0),
                weight: tkw("weight"),
            },
        )?),
        "torch.nn.functional.binary_cross_entropy" => one(F::binary_cross_entropy_with(
            &x[0],
            &x[1],
            F::BinaryCrossEntropyOptions {
                weight: tkw("weight"),
                reduction: red()?,
            },
        )?),
        "torch.nn.functional.binary_cross_entropy_with_logits" => {
            // The shared ops.json passes pos_weight as a third input.
            let pos_weight = if kw["tensor_kwargs"].is_null() {
                x.get(2).cloned()
            } else {
                tkw("pos_weight")
            };
            one(F::binary_cross_entropy_with_logits_with(
                &x[0],
                &x[1],
                F::BinaryCrossEntropyWithLogitsOptions {
                    weight: tkw("weight"),
                    reduction: red()?,
                    pos_weight,
                },
            )?)
        }
        "torch.nn.functional.kl_div" => one(F::kl_div_with(
            &x[0],
            &x[1],
            F::KlDivOptions {
                reduction: red()?,
                log_target: kw["log_target"].as_bool().unwrap_or(false),
            },
        )?),
        "torch.nn.functional.margin_ranking_loss" => one(F::margin_ranking_loss_with(
            &x[0],
            &x[1],
            &x[2],
            F::MarginRankingLossOptions {
                margin: f("margin").unwrap_or(0.0),
                reduction: red()?,
            },
        )?),
        "torch.nn.functional.cosine_similarity" => one(F::cosine_similarity_with(
            &x[0],
            &x[1],
            F::CosineSimilarityOptions {
                dim: kw["dim"].as_i64().unwrap_or(1) as isize,
                eps: f("eps").unwrap_or(1e-8),
            },
        )?),
        // seq
        "torch.nn.RNN"
        | "torch.nn.LSTM"
        | "torch.nn.GRU"
        | "torch.nn.MultiheadAttention"
        | "torch.nn.TransformerEncoderLayer"
        | "torch.nn.TransformerDecoderLayer"
        | "torch.nn.Transformer" => seq::module(op, kw, x).map(Some),
        "torch.nn.functional.scaled_dot_product_attention" => {
            let x = seq::Named::new(kw, x, &["query", "key", "value"]);
            let o = F::SdpaOptions {
                attn_mask: x.get("attn_mask"),
                dropout_p: 0.0,
                is_causal: kw["is_causal"].as_bool().unwrap_or(false),
                scale: kw["scale"].as_f64(),
                enable_gqa: kw["enable_gqa"].as_bool().unwrap_or(false),
            };
            let (q, k, v) = (x.req("query")?, x.req("key")?, x.req("value")?);
            one(F::scaled_dot_product_attention_with(q, k, v, o)?)
        }
        // ops_b
        "torch.index_add" => {
            let alpha = match &kw["alpha"] {
                Value::Null => wgtorch::Scalar::Int(1),
                v => scalar_of(v),
            };
            let opts = wgtorch::ops::IndexAddOptions { alpha };
            one(x[0].index_add_with(dim(), &x[1], &x[2], opts)?)
        }
        "torch.index_put" => {
            let mut next = x[2..].iter();
            let indices: Vec<Option<&Tensor>> = kw["indices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| if p.is_null() { None } else { next.next() })
                .collect();
            let acc = kw["accumulate"].as_bool().unwrap_or(false);
            one(x[0].index_put(&indices, &x[1], acc)?)
        }
        "torch.Tensor.masked_scatter" => one(x[0].masked_scatter(&x[1], &x[2])?),
        "torch.meshgrid" => {
            let ix = match kw["indexing"].as_str() {
                Some("xy") => wgtorch::ops::Indexing::Xy,
                _ => wgtorch::ops::Indexing::Ij,
            };
            Ok(Some(Tensor::meshgrid(&x.iter().collect::<Vec<_>>(), ix)?))
        }
        "torch.Tensor.view_as" => one(x[0].view_as(&x[1])?),
        "torch.Tensor.new_full" => one(x[0].new_full(ints(&kw["size"]), f("fill_value").unwrap())?),
        "torch.Tensor.new_zeros" => one(x[0].new_zeros(ints(&kw["size"]))?),
        "torch.Tensor.new_ones" => one(x[0].new_ones(ints(&kw["size"]))?),
        // ops_a
        "torch.tril" => one(x[0].tril(kw["diagonal"].as_i64().unwrap_or(0))?),
        "torch.triu" => one(x[0].triu(kw["diagonal"].as_i64().unwrap_or(0))?),
        "torch.sort" | "torch.argsort" => {
            let o = wgtorch::ops::SortOptions {
                dim: kw["dim"].as_i64().unwrap_or(-1) as isize,
                descending: kw["descending"].as_bool().unwrap_or(false),
                stable: kw["stable"].as_bool().unwrap_or(false),
            };
            if op == "torch.sort" {
                let (v, i) = x[0].sort_with(o)?;
                Ok(Some(vec![v, i]))
            } else {
                one(x[0].argsort_with(o)?)
            }
        }
        "torch.topk" => {
            let o = wgtorch::ops::TopkOptions {
                dim: kw["dim"].as_i64().unwrap_or(-1) as isize,
                largest: kw["largest"].as_bool().unwrap_or(true),
                sorted: kw["sorted"].as_bool().unwrap_or(true),
            };
            let (v, i) = x[0].topk_with(kw["k"].as_u64().unwrap() as usize, o)?;
            Ok(Some(vec![v, i]))
        }
        "torch.clamp_min" => one(x[0].clamp_min(&x[1])?),
        "torch.clamp_max" => one(x[0].clamp_max(&x[1])?),
        "torch.clamp:tensor" => one(x[0].clamp_tensor(Some(&x[1]), Some(&x[2]))?),
        "torch.all" | "torch.any" => {
            let all = op == "torch.all";
            one(match (kw["dim"].as_i64(), all) {
                (Some(d), true) => x[0].all_dim(d as isize, keep())?,
                (Some(d), false) => x[0].any_dim(d as isize, keep())?,
                (None, true) => x[0].all()?,
                (None, false) => x[0].any()?,
            })
        }
        "torch.Tensor.bool" => one(x[0].to_dtype(DType::Bool)?),
        "torch.logical_and" => one(x[0].logical_and(&x[1])?),
        "torch.logical_or" => one(x[0].logical_or(&x[1])?),
        "torch.isnan" => one(x[0].isnan()?),
        "torch.isinf" => one(x[0].isinf()?),
        "torch.isfinite" => one(x[0].isfinite()?),
        "torch.nan_to_num" => one(x[0].nan_to_num_with(wgtorch::ops::NanToNumOptions {
            nan: f("nan").unwrap_or(0.0),
            posinf: f("posinf"),
            neginf: f("neginf"),
        })?),
        // ops_d
        "torch.floor" => one(x[0].floor()?),
        "torch.ceil" => one(x[0].ceil()?),
        "torch.round" => one(x[0].round()?),
        "torch.trunc" => one(x[0].trunc()?),
        "torch.remainder" | "torch.fmod" => {
            let rem = op == "torch.remainder";
            one(match &kw["other"] {
                Value::Null if rem => x[0].remainder(&x[1])?,
                Value::Null => x[0].fmod(&x[1])?,
                v if rem => x[0].remainder_scalar(scalar_of(v))?,
                v => x[0].fmod_scalar(scalar_of(v))?,
            })
        }
        "torch.roll" => {
            let dims = match &kw["dims"] {
                Value::Null => vec![],
                d => sints(d),
            };
            one(x[0].roll(&sints(&kw["shifts"]), &dims)?)
        }
        _ => Ok(None),
    }
}

enum Outcome {
    /// Passed; in compiled mode, the reason the case ran eagerly, if it did.
    Pass(Option<String>),
    Fail(String),
    Pending(String),
}

/// How a case runs: eagerly, or through [`wgtorch::compile`] (one call traces, two more replay
/// the graph; every call's outputs are checked, and the gradients of the last).
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Eager,
    Compiled,
}

fn check(
    what: &str,
    got: &Tensor,
    want: &Value,
    rtol: f64,
    atol: f64,
) -> std::result::Result<(), String> {
    if got.shape() != shape_of(want).as_slice() {
        return Err(format!(
            "{what}: shape {:?}, expected {:?}",
            got.shape(),
            shape_of(want)
        ));
    }
    let g = got.to_f64_vec().map_err(|e| format!("{what}: {e}"))?;
    let w = data_of(want);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            return Err(format!(
                "{what}[{i}] = {a}, expected {b} (rtol {rtol}, atol {atol})"
            ));
        }
    }
    Ok(())
}

fn run_case(case: &Value, dev: &Device, mode: Mode) -> Outcome {
    let name = case["name"].as_str().unwrap();
    let op = case["op"].as_str().unwrap();
    let (rtol, atol) = (
        case["rtol"].as_f64().unwrap(),
        case["atol"].as_f64().unwrap(),
    );
    let specs = case["inputs"].as_array().unwrap();
    let mut eager_reason = None;
    let result = (|| -> Result<std::result::Result<(), String>> {
        let mut leaves = Vec::new();
        for inp in specs {
            let mut t = tensor_of(inp, dev)?;
            if inp["requires_grad"].as_bool().unwrap_or(false) {
                t = t.requires_grad_(true);
            }
            leaves.push(t);
        }
        // The case as a function of its leaves: the views, then the op.
        let f = |bases: &[Tensor]| -> Result<Vec<Tensor>> {
            let inputs = bases
                .iter()
                .zip(specs)
                .map(|(t, inp)| apply_views(t, inp.get("view")))
                .collect::<Result<Vec<_>>>()?;
            run_op(op, &case["kwargs"], &inputs)?
                .ok_or_else(|| wgtorch::Error::msg(format!("pending: no binding for {op} yet")))
        };
        let want = case["output"].as_array().unwrap();
        let check_all = |outs: &[Tensor], call: &str| -> std::result::Result<(), String> {
            if outs.len() != want.len() {
                return Err(format!("{} outputs, expected {}", outs.len(), want.len()));
            }
            for (i, (g, w)) in outs.iter().zip(want).enumerate() {
                check(&format!("{call}output[{i}]"), g, w, rtol, atol)?;
            }
            Ok(())
        };
        let outs = match mode {
            Mode::Eager => {
                let outs = match f(&leaves) {
                    Err(e) if e.to_string().starts_with("pending: ") => {
                        return Ok(Err(e.to_string()))
                    }
                    r => r?,
                };
                if let Err(e) = check_all(&outs, "") {
                    return Ok(Err(e));
                }
                outs
            }
            Mode::Compiled => {
                let fast = wgtorch::compile(f);
                let mut last = Vec::new();
                for call in ["traced ", "replayed ", "replayed again "] {
                    last = match fast.call(&leaves) {
                        Err(e) if e.to_string().starts_with("pending: ") => {
                            return Ok(Err(e.to_string()))
                        }
                        r => r?,
                    };
                    if let Err(e) = check_all(&last, call) {
                        return Ok(Err(e));
                    }
                }
                let x = fast.explain();
                if let Some((_, why)) = x.eager.first() {
                    // A graph that differs from the eager pass is a compiler bug, not a
                    // reason to run eagerly.
                    if why.contains("please report") {
                        return Ok(Err(why.clone()));
                    }
                    eager_reason = Some(why.clone());
                }
                last
            }
        };
        // Gradients: backpropagate sum(out_i * grad_output_i) over the differentiable outputs.
        if let (Some(gos), Some(grads)) = (case["grad_output"].as_array(), case["grads"].as_array())
        {
            let mut total: Option<Tensor> = None;
            let diff: Vec<&Tensor> = outs.iter().filter(|t| t.requires_grad()).collect();
            for (o, go) in diff.iter().zip(gos) {
                let term = o.mul(&tensor_of(go, dev)?)?.sum_all()?;
                total = Some(match total {
                    Some(t) => t.add(&term)?,
                    None => term,
                });
            }
            if let Some(t) = total {
                t.backward()?;
            }
            for (i, (leaf, want)) in leaves.iter().zip(grads).enumerate() {
                if want.is_null() {
                    continue;
                }
                let Some(g) = leaf.grad() else {
                    // PyTorch reports zeros for inputs it does not differentiate (buffers).
                    if data_of(want).iter().all(|&v| v == 0.0) {
                        continue;
                    }
                    return Ok(Err(format!("grad[{i}] missing")));
                };
                if let Err(e) = check(&format!("grad[{i}]"), &g, want, rtol, atol) {
                    return Ok(Err(e));
                }
            }
        }
        Ok(Ok(()))
    })();
    match result {
        Ok(Ok(())) => Outcome::Pass(eager_reason),
        Ok(Err(e)) if e.starts_with("pending: ") => {
            Outcome::Pending(format!("{name}: {}", &e[9..]))
        }
        Ok(Err(e)) => Outcome::Fail(format!("{name} ({op}): {e}")),
        Err(e) => Outcome::Fail(format!("{name} ({op}): error: {e}")),
    }
}

#[test]
fn golden_ops_match_pytorch() {
    let (failed, _) = run_file(&golden_dir().join("ops.json"), Mode::Eager);
    assert_eq!(failed, 0, "golden cases failed (see FAIL lines above)");
}

/// Every case again through `wgtorch::compile`: traced, replayed twice, gradients through the
/// graph. Cases the recorder cannot capture run eagerly (their reasons are printed); the
/// others must run as graphs.
#[test]
fn golden_ops_match_pytorch_compiled() {
    let (failed, graphs) = run_file(&golden_dir().join("ops.json"), Mode::Compiled);
    assert_eq!(
        failed, 0,
        "compiled golden cases failed (see FAIL lines above)"
    );
    assert!(graphs > 0, "no golden case ran as a graph");
}

/// The repo's own cases (`tests/golden/*.json`, written by the generators in `tools/golden/`).
#[test]
fn golden_repo_ops_match_pytorch() {
    run_repo_files(Mode::Eager);
}

/// The repo's own cases through `wgtorch::compile`.
#[test]
fn golden_repo_ops_match_pytorch_compiled() {
    run_repo_files(Mode::Compiled);
}

fn run_repo_files(mode: Mode) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden files in {}", dir.display());
    let mut failed = Vec::new();
    for f in files {
        failed.push((f.display().to_string(), run_file(&f, mode).0));
    }
    failed.retain(|(_, n)| *n > 0);
    assert!(
        failed.is_empty(),
        "golden cases failed (see FAIL lines above): {failed:?}"
    );
}

/// Run every case of one op file on every device (`GOLDEN_ONLY=substr` filters by name); the
/// number of failures, and of case runs that ran as compiled graphs. The GPU runs twice: native
/// f16 kernels (where the adapter has them) and the packed path.
fn run_file(path: &std::path::Path, mode: Mode) -> (usize, usize) {
    let mut runs: Vec<(Device, Option<bool>)> = Vec::new();
    for dev in common::devices() {
        match dev {
            Device::Gpu(n) => {
                // Not by switching it on: another test's run may be under way.
                if wgtorch::backend::gpu::context(n).unwrap().has_shader_f16() {
                    runs.push((dev, Some(true)));
                }
                runs.push((dev, Some(false)));
            }
            Device::Cpu => runs.push((dev, None)),
        }
    }
    run_cases(path, &runs, &|_| true, None, mode)
}

/// Held by each GPU run: the f16 path and the tile policy are the process's, so that a run in
/// a forced tile and another's run on the other f16 path do not overlap.
static GPU_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run the cases of one op file that `keep` keeps on each of `runs` (a device, and for a GPU
/// which f16 path), the GPU's GEMMs in `tile` when given; the number of failures, and of case
/// runs that ran as compiled graphs.
fn run_cases(
    path: &std::path::Path,
    runs: &[(Device, Option<bool>)],
    keep: &dyn Fn(&Value) -> bool,
    tile: Option<wgtorch::backend::gpu::kernels::Tile>,
    mode: Mode,
) -> (usize, usize) {
    use wgtorch::backend::gpu::tune;
    let file = path.file_name().map(std::path::Path::new).unwrap_or(path);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    let only = std::env::var("GOLDEN_ONLY").ok();
    let (mut failed_total, mut graphs_total) = (0, 0);
    for &(dev, native) in runs {
        let _gpu = matches!(dev, Device::Gpu(_))
            .then(|| GPU_RUN.lock().unwrap_or_else(|e| e.into_inner()));
        if let (Device::Gpu(n), Some(on)) = (dev, native) {
            wgtorch::backend::gpu::context(n)
                .unwrap()
                .set_native_f16(on);
        }
        /// Back to tuning when the run ends, panicking or not.
        struct Unforce;
        impl Drop for Unforce {
            fn drop(&mut self) {
                tune::force_gemm_tile(None);
            }
        }
        let (label, _unforce) = match tile {
            Some(t) if matches!(dev, Device::Gpu(_)) => {
                tune::force_gemm_tile(Some(t));
                (format!(" in {t}"), Some(Unforce))
            }
            _ => (String::new(), None),
        };
        let path = match native {
            Some(true) => format!("{label} [native f16]"),
            Some(false) => format!("{label} [packed f16/bf16]"),
            None => label.to_string(),
        };
        let (mut pass, mut fail, mut pending) = (0, 0, 0);
        let mut eager: Vec<(String, String)> = Vec::new();
        for case in cases.iter().filter(|c| keep(c)) {
            if let Some(o) = &only {
                if !case["name"].as_str().unwrap().contains(o.as_str()) {
                    continue;
                }
            }
            match run_case(case, &dev, mode) {
                Outcome::Pass(None) => pass += 1,
                Outcome::Pass(Some(why)) => {
                    pass += 1;
                    eager.push((case["name"].as_str().unwrap().to_string(), why));
                }
                Outcome::Fail(m) => {
                    fail += 1;
                    println!("FAIL [{dev}{path}] {m}");
                }
                Outcome::Pending(m) => {
                    pending += 1;
                    println!("pending [{dev}] {m}");
                }
            }
        }
        let compiled = match mode {
            Mode::Eager => String::new(),
            Mode::Compiled => {
                let graphs = pass - eager.len();
                graphs_total += graphs;
                // The reasons, each once, with the cases that gave it.
                let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
                for (name, why) in &eager {
                    match reasons.iter_mut().find(|(w, _)| w == why) {
                        Some((_, names)) => names.push(name),
                        None => reasons.push((why, vec![name])),
                    }
                }
                for (why, names) in reasons {
                    println!(
                        "eager [{dev}] {} cases ({}): {why}",
                        names.len(),
                        names.join(" ")
                    );
                }
                format!(" (compiled: {graphs} as graphs, {} eagerly)", eager.len())
            }
        };
        println!(
            "{}: golden ops on {}{path}: {pass} passed, {fail} failed, {pending} pending{compiled}",
            file.display(),
            dev.describe()
        );
        failed_total += fail;
    }
    (failed_total, graphs_total)
}

/// The cases that run GEMM kernels (matmuls, convolutions, linear and sequence layers,
/// attention), in every tile the tuner may pick on any adapter, forced in turn on the GPU:
/// register tiles (subgroup ones with subgroups where the adapter offers them) and the
/// shared-memory tiles of real GPUs (those staging f16 with native f16 kernels, where the
/// adapter has them: the f16 cases), against PyTorch's numbers.
#[test]
fn golden_gemm_cases_in_every_tile() {
    use wgtorch::backend::gpu::kernels::Tile;
    let Some(gpu) = common::gpu() else {
        return;
    };
    let gemm_ops = [
        "bmm",
        "einsum",
        "matmul",
        "linear",
        "conv2d",
        "LSTM",
        "GRU",
        "RNN",
        "Multihead",
        "Transformer",
        "scaled_dot_product",
    ];
    let keep = |c: &Value| {
        let op = c["op"].as_str().unwrap();
        gemm_ops.iter().any(|g| op.contains(g))
    };
    // A tile staging f16 stages it in f16 GEMMs only (the others run its f32 form, a tile the
    // loop runs anyway).
    let f16 = |c: &Value| {
        let inputs = c["inputs"].as_array().unwrap();
        keep(c) && inputs.iter().any(|i| i["dtype"].as_str() == Some("f16"))
    };
    let mut files = vec![golden_dir().join("ops.json")];
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    files.extend(["layers.json", "seq.json"].map(|f| repo.join(f)));
    let mut failed = Vec::new();
    // Native f16 kernels where the adapter has them (the tiles' bodies are the same on both
    // paths, but only native f16 GEMMs stage f16).
    let native = wgtorch::backend::gpu::context(0).unwrap().has_shader_f16();
    for tile in Tile::ALL {
        for f in &files {
            let cases: &dyn Fn(&Value) -> bool = if tile.half { &f16 } else { &keep };
            let (n, _) = run_cases(f, &[(gpu, Some(native))], cases, Some(tile), Mode::Eager);
            if n > 0 {
                failed.push(format!("{tile}: {n} in {}", f.display()));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "golden GEMM cases failed (see FAIL lines above): {failed:?}"
    );
}

// seq: the sequence layers' cases (tools/golden/seq.py). Data tensors first (names in
// `kwargs.inputs`), then the module's parameters in state_dict order (names in `kwargs.params`).
mod seq {
    use super::Value;
    use wgtorch::nn::*;
    use wgtorch::{Error, Result, Tensor};

    /// The case's data tensors by name.
    pub struct Named<'a> {
        names: Vec<String>,
        x: &'a [Tensor],
    }

    impl<'a> Named<'a> {
        pub fn new(kw: &Value, x: &'a [Tensor], default: &[&str]) -> Named<'a> {
            let names = match kw["inputs"].as_array() {
                Some(a) => a.iter().map(|v| v.as_str().unwrap().to_string()).collect(),
                None => default.iter().map(|s| s.to_string()).collect(),
            };
            Named { names, x }
        }
        pub fn get(&self, name: &str) -> Option<&'a Tensor> {
            self.names
                .iter()
                .position(|n| n == name)
                .map(|i| &self.x[i])
        }
        pub fn req(&self, name: &str) -> Result<&'a Tensor> {
            self.get(name).ok_or_else(|| Error::InvalidArgument {
                op: "golden",
                msg: format!("case has no input {name}"),
            })
        }
        fn params(&self) -> &'a [Tensor] {
            &self.x[self.names.len()..]
        }
    }

    /// Put the case's parameter leaves into the module's slots, checking PyTorch's names.
    fn load<M: Module>(mut m: M, kw: &Value, x: &Named) -> Result<M> {
        let params = x.params();
        let want: Option<Vec<&str>> = kw["params"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect());
        let mut got = Vec::new();
        m.visit_mut(&mut |n, t, _| {
            if let Some(p) = params.get(got.len()) {
                *t = p.clone();
            }
            got.push(n.to_string());
        });
        if got.len() != params.len() || want.is_some_and(|w| w != got) {
            return Err(Error::InvalidArgument {
                op: "golden",
                msg: format!("parameter names {got:?}, PyTorch's {:?}", kw["params"]),
            });
        }
        if kw["eval"].as_bool().unwrap_or(false) {
            m.eval();
        }
        Ok(m)
    }

    pub fn module(op: &str, kw: &Value, x: &[Tensor]) -> Result<Vec<Tensor>> {
        let u = |k: &str| kw[k].as_u64().map(|v| v as usize);
        let b = |k: &str, d: bool| kw[k].as_bool().unwrap_or(d);
        let f = |k: &str, d: f64| kw[k].as_f64().unwrap_or(d);
        let d = |k: &str| u(k).unwrap();
        let x = Named::new(kw, x, &["input", "h0", "c0"]);
        let dev = x.req(x.names[0].as_str())?.device();
        let rnn = RNNOptions {
            num_layers: u("num_layers").unwrap_or(1),
            nonlinearity: match kw["nonlinearity"].as_str() {
                Some("relu") => Nonlinearity::Relu,
                _ => Nonlinearity::Tanh,
            },
            bias: b("bias", true),
            batch_first: b("batch_first", false),
            dropout: f("dropout", 0.0),
            bidirectional: b("bidirectional", false),
            proj_size: u("proj_size").unwrap_or(0),
        };
        let mha = MultiheadAttentionOptions {
            dropout: f("dropout", 0.0),
            bias: b("bias", true),
            add_bias_kv: b("add_bias_kv", false),
            add_zero_attn: b("add_zero_attn", false),
            kdim: u("kdim"),
            vdim: u("vdim"),
            batch_first: b("batch_first", false),
        };
        let layer = TransformerLayerOptions {
            dim_feedforward: u("dim_feedforward").unwrap_or(2048),
            dropout: f("dropout", 0.1),
            activation: match kw["activation"].as_str() {
                Some("gelu") => Activation::Gelu,
                _ => Activation::Relu,
            },
            layer_norm_eps: f("layer_norm_eps", 1e-5),
            batch_first: b("batch_first", false),
            norm_first: b("norm_first", false),
            bias: b("bias", true),
        };
        let (input, h0) = (x.get("input"), x.get("h0"));
        Ok(match op {
            "torch.nn.RNN" | "torch.nn.GRU" => {
                let (i, h) = (d("input_size"), d("hidden_size"));
                let (out, h_n) = if op == "torch.nn.RNN" {
                    let m = load(RNN::with_options(i, h, rnn, &dev)?, kw, &x)?;
                    m.forward_with_state(x.req("input")?, h0)?
                } else {
                    let m = load(GRU::with_options(i, h, rnn, &dev)?, kw, &x)?;
                    m.forward_with_state(x.req("input")?, h0)?
                };
                vec![out, h_n]
            }
            "torch.nn.LSTM" => {
                let m = LSTM::with_options(d("input_size"), d("hidden_size"), rnn, &dev)?;
                let m = load(m, kw, &x)?;
                let state = h0.zip(x.get("c0"));
                let (out, (h, c)) = m.forward_with_state(input.unwrap(), state)?;
                vec![out, h, c]
            }
            "torch.nn.MultiheadAttention" => {
                let m =
                    MultiheadAttention::with_options(d("embed_dim"), d("num_heads"), mha, &dev)?;
                let m = load(m, kw, &x)?;
                let args = MhaArgs {
                    key_padding_mask: x.get("key_padding_mask"),
                    need_weights: b("need_weights", true),
                    attn_mask: x.get("attn_mask"),
                    average_attn_weights: b("average_attn_weights", true),
                    is_causal: b("is_causal", false),
                };
                let (q, k, v) = (x.req("query")?, x.req("key")?, x.req("value")?);
                let (o, w) = m.forward(q, k, v, args)?;
                std::iter::once(o).chain(w).collect()
            }
            "torch.nn.TransformerEncoderLayer" => {
                let m =
                    TransformerEncoderLayer::with_options(d("d_model"), d("nhead"), layer, &dev)?;
                let args = EncoderArgs {
                    src_mask: x.get("src_mask"),
                    src_key_padding_mask: x.get("src_key_padding_mask"),
                    is_causal: b("is_causal", false),
                };
                vec![load(m, kw, &x)?.forward(x.req("src")?, args)?]
            }
            "torch.nn.TransformerDecoderLayer" => {
                let m =
                    TransformerDecoderLayer::with_options(d("d_model"), d("nhead"), layer, &dev)?;
                vec![load(m, kw, &x)?.forward(x.req("tgt")?, x.req("memory")?, dec_args(kw, &x))?]
            }
            "torch.nn.Transformer" => {
                let opts = TransformerOptions {
                    num_encoder_layers: d("num_encoder_layers"),
                    num_decoder_layers: d("num_decoder_layers"),
                    layer,
                };
                let m = load(
                    Transformer::with_options(d("d_model"), d("nhead"), opts, &dev)?,
                    kw,
                    &x,
                )?;
                let a = dec_args(kw, &x);
                let args = TransformerArgs {
                    src_mask: x.get("src_mask"),
                    tgt_mask: a.tgt_mask,
                    memory_mask: a.memory_mask,
                    src_key_padding_mask: x.get("src_key_padding_mask"),
                    tgt_key_padding_mask: a.tgt_key_padding_mask,
                    memory_key_padding_mask: a.memory_key_padding_mask,
                    src_is_causal: b("src_is_causal", false),
                    tgt_is_causal: a.tgt_is_causal,
                    memory_is_causal: a.memory_is_causal,
                };
                vec![m.forward(x.req("src")?, x.req("tgt")?, args)?]
            }
            other => unreachable!("{other}"),
        })
    }

    fn dec_args<'a>(kw: &Value, x: &Named<'a>) -> DecoderArgs<'a> {
        DecoderArgs {
            tgt_mask: x.get("tgt_mask"),
            memory_mask: x.get("memory_mask"),
            tgt_key_padding_mask: x.get("tgt_key_padding_mask"),
            memory_key_padding_mask: x.get("memory_key_padding_mask"),
            tgt_is_causal: kw["tgt_is_causal"].as_bool().unwrap_or(false),
            memory_is_causal: kw["memory_is_causal"].as_bool().unwrap_or(false),
        }
    }
}
