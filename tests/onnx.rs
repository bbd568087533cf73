//! ONNX import: every model in ../shared/golden/onnx/ and tests/onnx/ (PyTorch exports, both
//! exporters, and graphs built with onnx.helper; tools/golden/onnx_models.py) through the
//! `onnx_run` example's check, on the CPU and the GPU; dynamic batch; fine-tuning against
//! wgtorch's own SimpleCNN; and hostile or wrong input at every entry point.

mod common;

#[path = "compiled/mod.rs"]
mod compiled;
#[allow(dead_code)]
#[path = "../examples/onnx_run.rs"]
mod onnx_run;

use prost::Message;
use std::path::{Path, PathBuf};
use wgtorch::nn::functional as F;
use wgtorch::nn::{Conv2d, Conv2dOptions, Linear, Module, ModuleExt};
use wgtorch::onnx::{proto, Model};
use wgtorch::{DType, Device, Tensor};

/// The example binary `name` that `cargo test` built beside this test binary, or `None` (with a
/// note) when it was not built.
fn example_bin(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent()?.parent()?.join("examples").join(name);
    if !bin.exists() {
        eprintln!("note: {} not built; skipped", bin.display());
        return None;
    }
    Some(bin)
}

fn shared_dir() -> PathBuf {
    std::env::var("WGTORCH_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"))
        .join("onnx")
}

fn own_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/onnx")
}

/// (model, io file) pairs: every `NAME.io*.safetensors` next to a `NAME.onnx`.
fn cases(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".onnx") {
            for io in &files {
                let io_name = io.file_name().unwrap().to_string_lossy();
                if io_name.starts_with(&format!("{stem}.io")) && io_name.ends_with(".safetensors") {
                    out.push((f.clone(), io.clone()));
                }
            }
        }
    }
    out
}

fn run_all(dir: &Path, dev: &Device, min: usize) {
    let cases = cases(dir);
    assert!(
        cases.len() >= min,
        "{}: {} models found, expected at least {min}",
        dir.display(),
        cases.len()
    );
    let mut failures = Vec::new();
    for (model, io) in &cases {
        match onnx_run::check(model, io, dev, 1e-4, 1e-4) {
            Ok((_, _, compared)) => {
                assert!(
                    !compared.is_empty(),
                    "{}: no reference outputs",
                    io.display()
                );
                for c in compared.iter().filter(|c| !c.ok) {
                    failures.push(format!("{}: {}", io.display(), c.line(1e-4, 1e-4)));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", model.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "on {}:\n{}",
        dev.describe(),
        failures.join("\n")
    );
}

#[test]
fn shared_golden_models_match_pytorch() {
    let dir = shared_dir();
    if !dir.exists() && !common::require_gpu() {
        eprintln!(
            "note: {} not found; shared ONNX goldens skipped",
            dir.display()
        );
        return;
    }
    for dev in common::devices() {
        run_all(&dir, &dev, 5);
    }
}

#[test]
fn own_models_cover_every_required_op() {
    // Both exporters, opsets 17/18/20, dynamic batch (io_batch3), auto_pad, Gemm attributes,
    // Dropout; see tests/onnx/README.md for which model covers which op.
    for dev in common::devices() {
        run_all(&own_dir(), &dev, 40);
    }
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(own_dir().join("index.json")).unwrap())
            .unwrap();
    let used: std::collections::BTreeSet<String> = index
        .as_object()
        .unwrap()
        .values()
        .flat_map(|m| {
            m["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap().to_string())
        })
        .collect();
    let required = "Add Sub Mul Div Pow Sqrt Neg Exp Log Erf Abs Relu Sigmoid Tanh HardSigmoid HardSwish \
        Clip LeakyRelu Gelu Softmax LogSoftmax MatMul Gemm Conv MaxPool AveragePool GlobalAveragePool \
        BatchNormalization LayerNormalization Flatten Reshape Transpose Squeeze Unsqueeze Concat Split \
        Slice Gather Expand Shape ConstantOfShape Constant Cast Equal Where Mod ReduceMean ReduceSum \
        ReduceMax Identity Dropout LSTM GRU";
    let supported = wgtorch::onnx::supported_ops();
    for op in required.split_whitespace() {
        assert!(used.contains(op), "no test model uses {op}");
        assert!(supported.contains(&op), "{op} is not supported");
    }
}

/// The `onnx_run` line format the checks read.
#[test]
fn onnx_run_reports_each_output() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0], [2], &Device::Cpu).unwrap();
    let b = Tensor::from_vec(vec![1.0f32, 2.5], [2], &Device::Cpu).unwrap();
    let c = onnx_run::compare("output.0", &a, &a, 1e-4, 1e-4).unwrap();
    assert_eq!(
        c.line(1e-4, 1e-4),
        "output.0: max abs diff 0.000e0 (rtol 1e-4, atol 1e-4) ok"
    );
    let c = onnx_run::compare("output.1", &a, &b, 1e-4, 1e-4).unwrap();
    assert!(!c.ok && c.line(1e-4, 1e-4).ends_with("FAIL") && c.max_abs_diff == 0.5);
    let short = Tensor::from_vec(vec![1.0f32], [1], &Device::Cpu).unwrap();
    assert!(!onnx_run::compare("o", &a, &short, 1e-4, 1e-4).unwrap().ok);
}

#[test]
fn dynamic_batch_takes_any_batch_and_checks_the_rest() {
    let model = Model::load(own_dir().join("mlp_layernorm.onnx"), &Device::Cpu).unwrap();
    let spec = &model.inputs()[0];
    assert_eq!(spec.shape, Some(vec![None, Some(16)]), "{spec}");
    for batch in [1, 3, 5] {
        let out = model
            .run(&[Tensor::randn([batch, 16], &Device::Cpu).unwrap()])
            .unwrap();
        assert_eq!(out[0].shape(), &[batch, 6]);
    }
    let err = model
        .run(&[Tensor::randn([2, 15], &Device::Cpu).unwrap()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("input.0") && err.contains("[2, 15]") && err.contains("[?, 16]"),
        "{err}"
    );
    let err = model.run(&[Tensor::zeros([2, 16], &Device::Cpu)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()]);
    assert!(err.unwrap_err().to_string().contains("must be float32"));
    let err = model.run(&[]).unwrap_err().to_string();
    assert!(
        err.contains("takes 1 input") && err.contains("got 0"),
        "{err}"
    );
    let x = Tensor::randn([2, 16], &Device::Cpu).unwrap();
    let named = model.run_named(&[("input.0", x.clone())]).unwrap();
    assert_eq!(named[0].0, "output.0");
    assert!(model
        .run_named(&[("nope", x)])
        .unwrap_err()
        .to_string()
        .contains("no input named 'nope'"));
}

/// The golden `simple_cnn.onnx`'s network (16 and 32 channels, fc 2048 → 64 → 10) in wgtorch.
#[derive(Module)]
struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    fc1: Linear,
    fc2: Linear,
}

impl Cnn {
    fn new(dev: &Device) -> wgtorch::Result<Cnn> {
        let same = Conv2dOptions {
            padding: 1.into(),
            ..Default::default()
        };
        Ok(Cnn {
            conv1: Conv2d::with_options(3, 16, 3, same, dev)?,
            conv2: Conv2d::with_options(16, 32, 3, same, dev)?,
            fc1: Linear::new(2048, 64, dev)?,
            fc2: Linear::new(64, 10, dev)?,
        })
    }
    fn forward(&self, x: &Tensor) -> wgtorch::Result<Tensor> {
        let x = F::max_pool2d(&self.conv1.forward(x)?.relu()?, 2)?;
        let x = F::max_pool2d(&self.conv2.forward(&x)?.relu()?, 2)?;
        self.fc2
            .forward(&self.fc1.forward(&x.flatten(1, -1)?)?.relu()?)
    }
}

/// The golden SimpleCNN exported by PyTorch, loaded trainable, is the same network built from
/// wgtorch's layers: the same
/// parameters by name, outputs, gradients, and an SGD step; then on the GPU too.
#[test]
fn fine_tuning_matches_the_native_module() {
    let path = shared_dir().join("simple_cnn.onnx");
    if !path.exists() && !common::require_gpu() {
        return;
    }
    let dev = Device::Cpu;
    let mut imported = Model::load_trainable(&path, &dev).unwrap();
    let params = imported.named_parameters();
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "conv1.weight",
            "conv1.bias",
            "conv2.weight",
            "conv2.bias",
            "fc1.weight",
            "fc1.bias",
            "fc2.weight",
            "fc2.bias"
        ]
    );
    assert!(params.iter().all(|(_, p)| p.requires_grad()));
    let mut native = Cnn::new(&dev).unwrap();
    native
        .load_state_dict(&imported.state_dict(), true)
        .unwrap();
    let x = Tensor::randn([2, 3, 32, 32], &dev).unwrap();
    let target = Tensor::from_vec(vec![1i64, 7], [2], &dev).unwrap();
    let loss_of = |logits: &Tensor| F::cross_entropy(logits, &target).unwrap();
    let (a, b) = (
        imported.run(std::slice::from_ref(&x)).unwrap().remove(0),
        native.forward(&x).unwrap(),
    );
    common::assert_close("logits", &common::vals(&a), &common::vals(&b), 1e-5, 1e-5);
    loss_of(&a).backward().unwrap();
    loss_of(&b).backward().unwrap();
    for ((name, p), (_, q)) in imported
        .named_parameters()
        .iter()
        .zip(native.named_parameters())
    {
        let (gp, gq) = (p.grad().unwrap(), q.grad().unwrap());
        common::assert_close(name, &common::vals(&gp), &common::vals(&gq), 1e-4, 1e-5);
    }
    let mut opt = wgtorch::optim::Sgd::new(imported.parameters(), 0.01).unwrap();
    use wgtorch::optim::Optimizer;
    let before = loss_of(&imported.run(std::slice::from_ref(&x)).unwrap()[0])
        .item()
        .unwrap();
    for _ in 0..3 {
        opt.zero_grad();
        loss_of(&imported.run(std::slice::from_ref(&x)).unwrap()[0])
            .backward()
            .unwrap();
        opt.step().unwrap();
    }
    let after = loss_of(&imported.run(std::slice::from_ref(&x)).unwrap()[0])
        .item()
        .unwrap();
    assert!(after < before, "loss {before} -> {after}");
    if let Some(gpu) = common::gpu() {
        imported.to_device(&gpu).unwrap();
        assert_eq!(imported.device(), gpu);
        let on_gpu = imported.run(std::slice::from_ref(&x)).unwrap().remove(0);
        imported.to_device(&Device::Cpu).unwrap();
        let on_cpu = imported.run(&[x]).unwrap().remove(0);
        common::assert_close(
            "gpu vs cpu",
            &common::vals(&on_gpu),
            &common::vals(&on_cpu),
            1e-4,
            1e-4,
        );
    }
}

#[test]
fn conv_relu_chains_fuse_where_nothing_else_reads_them() {
    // tests/onnx/conv_relu_fusion: four Conv → [Add →] Relu chains fuse (7 nodes: the residual
    // as the Add's second or first operand, computed after the Conv, and a Conv without bias or
    // residual); a Conv whose output is also a graph output, one with a broadcast residual and a
    // Relu that reads a fused chain's Relu stay out of the convolution (elementwise fusion takes
    // them). onnxruntime's outputs are checked by own_models_cover_every_required_op; here
    // the fused run must equal, bit for bit, the same graph run op by op (a trainable load, whose
    // parameters need gradients, runs each op) on the CPU and on each GPU (fused in the
    // convolution kernel there), and the GPU's match the CPU's, NaN and infinities included.
    let path = own_dir().join("conv_relu_fusion.onnx");
    let frozen = Model::load(&path, &Device::Cpu).unwrap();
    // Left to elementwise fusion: the broadcast residual's Add with its Relu, and the Relu
    // after a fused chain with the Sub after it (one kernel each).
    assert_eq!(
        frozen.fused_groups(),
        [["Add", "Relu"], ["Relu", "Sub"]].map(|g| g.map(String::from).to_vec())
    );
    assert_eq!(frozen.fused_nodes(), 9 + 2, "{frozen:?}");
    let trainable = Model::load_trainable(&path, &Device::Cpu).unwrap();
    let mut io = wgtorch::io::load(
        own_dir().join("conv_relu_fusion.io.safetensors"),
        &Device::Cpu,
    )
    .unwrap()
    .into_iter()
    .filter(|(n, _)| n.starts_with("input."))
    .map(|(_, t)| t)
    .collect::<Vec<_>>();
    // NaN, an infinity and -0 in the image (NaN stays NaN through the relu; 0·inf is NaN too).
    let mut x = io[0].to_vec::<f32>().unwrap();
    (x[5], x[40], x[77]) = (f32::NAN, f32::INFINITY, -0.0);
    io[0] = Tensor::from_vec(x, io[0].shape(), &Device::Cpu).unwrap();
    let bits = |t: &Tensor| -> Vec<u32> {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
            .collect()
    };
    let fused = frozen.run(&io).unwrap();
    let by_ops = trainable.run(&io).unwrap();
    assert_eq!(fused.len(), 8);
    for (k, (a, b)) in fused.iter().zip(&by_ops).enumerate() {
        assert_eq!(a.shape(), b.shape(), "output.{k}");
        assert_eq!(
            bits(a),
            bits(b),
            "output.{k}: fused and op-by-op results differ"
        );
        assert!(
            a.to_vec::<f32>().unwrap().iter().any(|v| v.is_nan()),
            "output.{k}"
        );
    }
    // Gradients reach the parameters through a fused node of the trainable model.
    by_ops[0].sum_all().unwrap().backward().unwrap();
    let grads: Vec<String> = trainable
        .named_parameters()
        .iter()
        .filter(|(_, p)| p.grad().is_some())
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(grads, ["W", "B"]);
    for dev in common::devices().into_iter().filter(Device::is_gpu) {
        let m = Model::load(&path, &dev).unwrap();
        let ins: Vec<Tensor> = io.iter().map(|t| t.to(&dev).unwrap()).collect();
        let on_gpu = m.run(&ins).unwrap();
        let gpu_ops = Model::load_trainable(&path, &dev)
            .unwrap()
            .run(&ins)
            .unwrap();
        for (k, (a, b)) in on_gpu.iter().zip(&gpu_ops).enumerate() {
            assert_eq!(
                bits(a),
                bits(b),
                "output.{k} on {}: fused and op-by-op differ",
                dev.describe()
            );
        }
        for (k, (a, b)) in on_gpu.iter().zip(&fused).enumerate() {
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                    "output.{k}[{i}] on {}: {x} vs {y}",
                    dev.describe()
                );
            }
        }
    }
}

// ---- hostile and wrong models ----

fn simple_cnn_proto() -> proto::ModelProto {
    let bytes = wgtorch::onnx::doc_example_model();
    proto::ModelProto::decode(bytes.as_slice()).unwrap()
}

fn load_err(m: &proto::ModelProto) -> String {
    Model::load_bytes(&m.encode_to_vec(), &Device::Cpu)
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_files_are_errors() {
    let bytes = wgtorch::onnx::doc_example_model();
    assert!(Model::load_bytes(&bytes, &Device::Cpu).is_ok());
    for cut in [1, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            Model::load_bytes(&bytes[..cut], &Device::Cpu).is_err(),
            "truncated at {cut} loaded"
        );
    }
    let err = Model::load_bytes(b"\xff\xff\xff\xff garbage", &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not parse"), "{err}");
    let err = Model::load("/dev/null", &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file"), "{err}");
    let err = Model::load("/nonexistent/model.onnx", &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/model.onnx"), "{err}");
}

#[test]
fn unsupported_models_are_refused_at_load_naming_op_node_and_opset() {
    let mut m = simple_cnn_proto();
    m.graph.as_mut().unwrap().node[0].op_type = Some("NonZero".into());
    let err = load_err(&m);
    assert!(
        err.contains("NonZero") && err.contains("Relu_0") && err.contains("opset 18"),
        "{err}"
    );

    let mut m = simple_cnn_proto();
    m.opset_import[0].version = Some(11);
    let err = load_err(&m);
    assert!(
        err.contains("opset 11") && err.contains("13 to 21"),
        "{err}"
    );

    let mut m = simple_cnn_proto();
    m.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
    assert!(load_err(&m).contains("com.microsoft"));
}

#[test]
fn broken_graphs_are_refused_at_load() {
    // A cycle: Relu reads Add's output, Add reads Relu's.
    let mut m = simple_cnn_proto();
    m.graph.as_mut().unwrap().node[0].input[0] = "y".into();
    m.graph.as_mut().unwrap().input.clear();
    let err = load_err(&m);
    assert!(err.contains("cycle"), "{err}");
    // A missing initializer.
    let mut m = simple_cnn_proto();
    m.graph.as_mut().unwrap().initializer.clear();
    let err = load_err(&m);
    assert!(
        err.contains("'one'") && err.contains("neither a graph input, an initializer"),
        "{err}"
    );
    // A value defined twice.
    let mut m = simple_cnn_proto();
    let n = m.graph.as_ref().unwrap().node[0].clone();
    m.graph.as_mut().unwrap().node.push(n);
    assert!(load_err(&m).contains("defined twice"));
    // Inconsistent shapes: [1, 2] + [3].
    let mut m = simple_cnn_proto();
    let three = proto::TensorProto {
        dims: vec![3],
        data_type: Some(1),
        float_data: vec![1.0; 3],
        name: Some("one".into()),
        ..Default::default()
    };
    m.graph.as_mut().unwrap().initializer = vec![three];
    let err = load_err(&m);
    assert!(
        err.contains("Add") && err.contains("cannot be broadcast"),
        "{err}"
    );
    // An output declared with another shape than the graph computes.
    let mut m = simple_cnn_proto();
    let out = &mut m.graph.as_mut().unwrap().output[0];
    if let Some(proto::type_proto::Value::TensorType(t)) =
        out.r#type.as_mut().unwrap().value.as_mut()
    {
        t.shape.as_mut().unwrap().dim[1].value =
            Some(proto::tensor_shape_proto::dimension::Value::DimValue(5));
    }
    assert!(load_err(&m).contains("declared"));
}

#[test]
fn initializers_are_checked_against_their_dims() {
    let with = |t: proto::TensorProto| {
        let mut m = simple_cnn_proto();
        m.graph.as_mut().unwrap().initializer = vec![t];
        load_err(&m)
    };
    let base = proto::TensorProto {
        name: Some("one".into()),
        data_type: Some(1),
        ..Default::default()
    };
    // Huge dims with little data: an error, not an allocation.
    let err = with(proto::TensorProto {
        dims: vec![1 << 40, 1 << 40],
        raw_data: Some(vec![0; 4]),
        ..base.clone()
    });
    assert!(err.contains("'one'"), "{err}");
    let err = with(proto::TensorProto {
        dims: vec![i64::MAX, 4],
        raw_data: Some(vec![0; 4]),
        ..base.clone()
    });
    assert!(err.contains("overflow") || err.contains("need"), "{err}");
    let err = with(proto::TensorProto {
        dims: vec![-1],
        raw_data: Some(vec![0; 4]),
        ..base.clone()
    });
    assert!(err.contains("negative"), "{err}");
    let err = with(proto::TensorProto {
        dims: vec![3],
        raw_data: Some(vec![0; 8]),
        ..base.clone()
    });
    assert!(err.contains("8 bytes") && err.contains("12"), "{err}");
    let err = with(proto::TensorProto {
        dims: vec![3],
        float_data: vec![1.0; 2],
        ..base.clone()
    });
    assert!(err.contains("holds 2 values"), "{err}");
    let err = with(proto::TensorProto {
        dims: vec![1],
        data_type: Some(8),
        ..base.clone()
    });
    assert!(err.contains("STRING"), "{err}");
}

#[test]
fn external_data_stays_inside_the_model_folder() {
    let dir = std::env::temp_dir().join(format!("wgtorch-onnx-ext-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("model")).unwrap();
    std::fs::write(dir.join("model/weights.bin"), 2.5f32.to_le_bytes()).unwrap();
    std::fs::write(dir.join("secret.bin"), 9.0f32.to_le_bytes()).unwrap();
    let write = |location: &str| -> PathBuf {
        let mut m = simple_cnn_proto();
        let kv = |k: &str, v: &str| proto::StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v.into()),
        };
        m.graph.as_mut().unwrap().initializer = vec![proto::TensorProto {
            name: Some("one".into()),
            data_type: Some(1),
            data_location: Some(proto::tensor_proto::DataLocation::External as i32),
            external_data: vec![kv("location", location), kv("length", "4")],
            ..Default::default()
        }];
        let path = dir.join("model/model.onnx");
        std::fs::write(&path, m.encode_to_vec()).unwrap();
        path
    };
    // Inside the folder: loads and is used.
    let model = Model::load(write("weights.bin"), &Device::Cpu).unwrap();
    let x = Tensor::from_vec(vec![-1.0f32, 1.0], [1, 2], &Device::Cpu).unwrap();
    assert_eq!(
        model.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap(),
        [2.5, 3.5]
    );
    // From bytes: refused, pointing to load(path).
    let bytes = std::fs::read(dir.join("model/model.onnx")).unwrap();
    assert!(Model::load_bytes(&bytes, &Device::Cpu)
        .unwrap_err()
        .to_string()
        .contains("Model::load"));
    // Escapes: parent dirs, absolute paths, a symlink out of the folder.
    for loc in [
        "../secret.bin",
        dir.join("secret.bin").to_str().unwrap(),
        "missing.bin",
    ] {
        assert!(
            Model::load(write(loc), &Device::Cpu).is_err(),
            "{loc} loaded"
        );
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.join("secret.bin"), dir.join("model/link.bin")).unwrap();
        let err = Model::load(write("link.bin"), &Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the model's folder"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An index out of range in data is an error on every device, never a number.
#[test]
fn gather_out_of_range_is_an_error_on_every_device() {
    let path = shared_dir().join("lstm_tagger.onnx");
    if !path.exists() && !common::require_gpu() {
        return;
    }
    for dev in common::devices() {
        let model = Model::load(&path, &dev).unwrap();
        let ids = Tensor::from_vec(
            vec![
                1i64, 2, 3, 40, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7,
            ],
            [3, 7],
            &dev,
        )
        .unwrap();
        let r = model.run(&[ids]).and_then(|o| o[0].to_vec::<f32>());
        assert!(
            r.is_err(),
            "index 40 of 40 rows gave numbers on {}",
            dev.describe()
        );
        let ids = Tensor::from_vec(vec![-1i64; 21], [3, 7], &dev).unwrap();
        assert!(
            model.run(&[ids]).and_then(|o| o[0].to_vec::<f32>()).is_ok(),
            "-1 counts from the end"
        );
    }
}

// ---- export ----

use wgtorch::nn::{
    Embedding, LayerNorm, RNNOptions, TransformerEncoder, TransformerEncoderLayer, LSTM,
};
use wgtorch::onnx::ExportOptions;

/// The golden `mlp_gelu_layernorm`: Linear(24, 48), LayerNorm, GELU, Linear(48, 5), LogSoftmax.
#[derive(Module)]
struct Mlp {
    l1: Linear,
    ln: LayerNorm,
    l2: Linear,
}

impl Mlp {
    fn new(dev: &Device) -> wgtorch::Result<Mlp> {
        Ok(Mlp {
            l1: Linear::new(24, 48, dev)?,
            ln: LayerNorm::new(&[48], dev)?,
            l2: Linear::new(48, 5, dev)?,
        })
    }
    fn forward(&self, x: &Tensor) -> wgtorch::Result<Tensor> {
        self.l2
            .forward(&self.ln.forward(&self.l1.forward(x)?)?.gelu()?)?
            .log_softmax(-1)
    }
}

/// The golden `lstm_tagger`: Embedding(40, 12), LSTM(12, 16, batch_first), tanh, Linear(16, 6).
#[derive(Module)]
struct Tagger {
    emb: Embedding,
    lstm: LSTM,
    out: Linear,
}

impl Tagger {
    fn new(dev: &Device) -> wgtorch::Result<Tagger> {
        let opts = RNNOptions {
            batch_first: true,
            ..Default::default()
        };
        Ok(Tagger {
            emb: Embedding::new(40, 12, dev)?,
            lstm: LSTM::with_options(12, 16, opts, dev)?,
            out: Linear::new(16, 6, dev)?,
        })
    }
    fn forward(&self, ids: &Tensor) -> wgtorch::Result<Tensor> {
        let (h, _) = self
            .lstm
            .forward_with_state(&self.emb.forward(ids)?, None)?;
        self.out.forward(&h.tanh()?)
    }
}

/// The golden `transformer_encoder`: Embedding(50, 32) + a learned position table, two
/// post-norm GELU encoder layers (4 heads, feed-forward 64, batch first), mean over the
/// sequence, Linear(32, 3).
#[derive(Module)]
struct Encoder {
    emb: Embedding,
    #[param]
    pos: Tensor,
    enc: TransformerEncoder,
    cls: Linear,
}

impl Encoder {
    fn new(dev: &Device) -> wgtorch::Result<Encoder> {
        let opts = wgtorch::nn::TransformerLayerOptions {
            dim_feedforward: 64,
            dropout: 0.0,
            activation: wgtorch::nn::Activation::Gelu,
            batch_first: true,
            ..Default::default()
        };
        let layer = TransformerEncoderLayer::with_options(32, 4, opts, dev)?;
        Ok(Encoder {
            emb: Embedding::new(50, 32, dev)?,
            pos: Tensor::zeros([1, 16, 32], dev)?.requires_grad_(true),
            enc: TransformerEncoder::new(layer, 2)?,
            cls: Linear::new(32, 3, dev)?,
        })
    }
    fn forward(&self, ids: &Tensor) -> wgtorch::Result<Tensor> {
        let s = ids.shape()[1];
        let x = self.emb.forward(ids)?.add(&self.pos.narrow(1, 0, s)?)?;
        let x = self.enc.forward(&x, Default::default())?;
        self.cls.forward(&x.mean_dims([1], false)?)
    }
}

/// Loads the golden state_dict into `module`, exports it, and checks the file three ways: it
/// reproduces PyTorch's outputs (through wgtorch's importer), it round-trips (export → import →
/// the module's outputs at another batch size too), and onnxruntime agrees within 1e-5.
fn export_case<M: Module>(
    name: &str,
    module: &mut M,
    forward: impl Fn(&M, &Tensor) -> wgtorch::Result<Tensor>,
) {
    let dir = shared_dir();
    let state = wgtorch::io::load(
        dir.join(format!("{name}.state_dict.safetensors")),
        &Device::Cpu,
    )
    .unwrap();
    module.load_state_dict(&state, true).unwrap();
    module.eval();
    let io = wgtorch::io::load(dir.join(format!("{name}.io.safetensors")), &Device::Cpu).unwrap();
    let get = |k: &str| io.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let (x, want) = (get("input.0"), get("output.0"));
    let out_dir = std::env::temp_dir().join(format!("wgtorch-export-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let path = out_dir.join(format!("{name}.onnx"));
    let m = &*module;
    wgtorch::onnx::export_with(
        m,
        std::slice::from_ref(&x),
        |xs| Ok(vec![forward(m, &xs[0])?]),
        &path,
        ExportOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    // The initializers carry the state_dict names.
    let proto = proto::ModelProto::decode(std::fs::read(&path).unwrap().as_slice()).unwrap();
    let inits: Vec<String> = proto
        .graph
        .as_ref()
        .unwrap()
        .initializer
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    for (k, _) in &state {
        assert!(
            inits.contains(k),
            "{name}: initializer {k} missing from {inits:?}"
        );
    }
    // PyTorch's outputs, through wgtorch's importer, on every device.
    for dev in common::devices() {
        let model = Model::load(&path, &dev).unwrap();
        let got = model.run(&[x.to(&dev).unwrap()]).unwrap().remove(0);
        common::assert_close(
            &format!("{name} on {}", dev.describe()),
            &common::vals(&got),
            &common::vals(&want),
            1e-4,
            1e-4,
        );
    }
    // A dynamic batch: one more row, against the module itself.
    let bigger = Tensor::cat(&[x.clone(), x.narrow(0, 0, 1).unwrap()], 0).unwrap();
    let model = Model::load(&path, &Device::Cpu).unwrap();
    let got = model.run(std::slice::from_ref(&bigger)).unwrap().remove(0);
    let expected = forward(m, &bigger).unwrap();
    common::assert_close(
        &format!("{name} at batch + 1"),
        &common::vals(&got),
        &common::vals(&expected),
        1e-5,
        1e-5,
    );
    // onnxruntime, an independent runtime, on the exported file.
    let io_path = out_dir.join(format!("{name}.io.safetensors"));
    wgtorch::io::save(
        &io_path,
        &[("input.0".into(), bigger), ("output.0".into(), got)],
    )
    .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/onnx_export/ort_check.py");
    let run = std::process::Command::new("python3")
        .arg(&script)
        .arg(&path)
        .arg(&io_path)
        .output();
    match run {
        Ok(o) if o.status.code() == Some(0) => {
            eprintln!(
                "{name}: onnxruntime {}",
                String::from_utf8_lossy(&o.stdout).trim()
            );
        }
        Ok(o) if o.status.code() == Some(3) && !common::require_gpu() => {
            eprintln!("note: onnxruntime not installed; {name}'s independent check skipped");
        }
        Ok(o) => panic!(
            "{name}: onnxruntime check failed ({}):\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) if !common::require_gpu() => {
            eprintln!("note: python3 not available ({e}); {name}'s independent check skipped")
        }
        Err(e) => panic!("{name}: python3: {e}"),
    }
}

#[test]
fn export_reproduces_pytorch_and_onnxruntime_agrees() {
    if !shared_dir().exists() && !common::require_gpu() {
        return;
    }
    let dev = Device::Cpu;
    export_case("simple_cnn", &mut Cnn::new(&dev).unwrap(), |m, x| {
        m.forward(x)
    });
    export_case(
        "mlp_gelu_layernorm",
        &mut Mlp::new(&dev).unwrap(),
        |m, x| m.forward(x),
    );
    export_case("lstm_tagger", &mut Tagger::new(&dev).unwrap(), |m, x| {
        m.forward(x)
    });
    export_case(
        "transformer_encoder",
        &mut Encoder::new(&dev).unwrap(),
        |m, x| m.forward(x),
    );
}

#[test]
fn export_refuses_what_it_cannot_write() {
    let dev = Device::Cpu;
    let fc = Linear::new(4, 2, &dev).unwrap();
    let x = Tensor::randn([3, 4], &dev).unwrap();
    let bad = |f: &dyn Fn(&Tensor) -> wgtorch::Result<Tensor>| {
        wgtorch::onnx::export_bytes(
            &fc,
            std::slice::from_ref(&x),
            |xs| Ok(vec![f(&xs[0])?]),
            ExportOptions::default(),
        )
        .unwrap_err()
        .to_string()
    };
    // An op without an ONNX form here (cumsum) is an error naming it, not a constant.
    let err = bad(&|x| fc.forward(&x.cumsum(1)?));
    assert!(
        err.contains("does not record") || err.contains("no ONNX form"),
        "{err}"
    );
    // A shape that depends on the batch twice cannot be one -1.
    let err = bad(&|x| {
        let y = fc.forward(x)?;
        let n = y.shape()[0];
        y.reshape([1, 2 * n])?.expand([n, 2 * n])
    });
    assert!(err.contains("batch") || err.contains("differ"), "{err}");
    // A value read on the host (a data-dependent branch) and a random draw would be frozen
    // into the file: both are errors.
    let err = bad(&|x| {
        let y = fc.forward(x)?;
        if y.sum_all()?.item()? > 0.0 {
            y.relu()
        } else {
            Ok(y)
        }
    });
    assert!(
        err.contains("ONNX export") && err.contains("on the host (item)"),
        "{err}"
    );
    let err = bad(&|x| fc.forward(x)?.add(&Tensor::randn([3, 2], &dev)?));
    assert!(err.contains("random"), "{err}");
    // A detached value computed from the input would be the example's constant.
    let err = bad(&|x| {
        let y = fc.forward(x)?;
        y.sub(&y.amax([1], true)?.detach())
    });
    assert!(err.contains("(a detach"), "{err}");
    // NaN where the module gives NaN (the log of negative values: every output) is agreement,
    // not a mismatch.
    wgtorch::onnx::export_bytes(
        &fc,
        std::slice::from_ref(&x),
        |xs| {
            Ok(vec![fc
                .forward(&xs[0])?
                .abs()?
                .add_scalar(1.0)?
                .neg()?
                .log()?])
        },
        ExportOptions::default(),
    )
    .unwrap();
    // A parameter read on the host is a constant of the file, as the parameter is: allowed
    // (a compiled graph, which reads the live parameters, refuses it).
    wgtorch::onnx::export_bytes(
        &fc,
        std::slice::from_ref(&x),
        |xs| {
            let scale = fc.weight.to_vec::<f32>()?[0] as f64;
            Ok(vec![fc.forward(&xs[0])?.mul_scalar(scale)?])
        },
        ExportOptions::default(),
    )
    .unwrap();
    let err = wgtorch::onnx::export_bytes(
        &fc,
        std::slice::from_ref(&x),
        |xs| Ok(vec![fc.forward(&xs[0])?]),
        ExportOptions {
            opset: 9,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("opset 9"), "{err}");
}

/// `train_cnn --export-onnx` writes the trained SimpleCNN, which loads and classifies.
#[test]
fn train_cnn_exports_its_model() {
    let Some(bin) = example_bin("train_cnn") else {
        return;
    };
    let path = std::env::temp_dir().join(format!("wgtorch-train-cnn-{}.onnx", std::process::id()));
    let out = std::process::Command::new(&bin)
        .args([
            "--epochs",
            "1",
            "--max-batches",
            "2",
            "--device",
            "cpu",
            "--export-onnx",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("exported the model"));
    let model = Model::load(&path, &Device::Cpu).unwrap();
    assert_eq!(
        model.inputs()[0].to_string(),
        "input.0 float32 [?, 3, 32, 32]"
    );
    let logits = model
        .run(&[Tensor::randn([4, 3, 32, 32], &Device::Cpu).unwrap()])
        .unwrap();
    assert_eq!(logits[0].shape(), &[4, 10]);
    let names: Vec<String> = Model::load_trainable(&path, &Device::Cpu)
        .unwrap()
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "conv1.weight",
            "conv1.bias",
            "conv2.weight",
            "conv2.bias",
            "fc1.weight",
            "fc1.bias",
            "fc2.weight",
            "fc2.bias"
        ]
    );
    let _ = std::fs::remove_file(&path);
}

/// A forward pass that panics during an export leaves nothing behind: the next export on the
/// thread starts clean.
#[test]
fn export_after_a_panicking_forward_starts_clean() {
    let dev = Device::Cpu;
    let fc = Linear::new(4, 2, &dev).unwrap();
    let x = Tensor::randn([3, 4], &dev).unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wgtorch::onnx::export_bytes(
            &fc,
            std::slice::from_ref(&x),
            |_| panic!("boom"),
            ExportOptions::default(),
        )
    }));
    assert!(panicked.is_err());
    let bytes = wgtorch::onnx::export_bytes(
        &fc,
        &[x],
        |xs| Ok(vec![fc.forward(&xs[0])?]),
        ExportOptions::default(),
    );
    assert!(bytes.is_ok(), "{:?}", bytes.err());
}

/// An LSTM node whose initial states' shapes are known only at run time (all their dims
/// symbolic): a state that does not match the input's batch, the hidden size or the number of
/// directions is an error naming it and the shape it must have when the model runs (an extra
/// direction was dropped unseen before), and the matching states run.
#[test]
fn lstm_state_of_the_wrong_shape_is_an_error_at_run_time() {
    use proto::tensor_shape_proto::{dimension::Value as Dim, Dimension};
    let value = |name: &str, dims: Vec<Dim>| proto::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(1),
                    shape: Some(proto::TensorShapeProto {
                        dim: dims
                            .into_iter()
                            .map(|d| Dimension {
                                value: Some(d),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sym = |s: &str| Dim::DimParam(s.into());
    let (input, hidden) = (3i64, 4i64);
    let init = |name: &str, dims: Vec<i64>| proto::TensorProto {
        float_data: vec![0.1; dims.iter().product::<i64>() as usize],
        dims,
        data_type: Some(1),
        name: Some(name.into()),
        ..Default::default()
    };
    let graph = proto::GraphProto {
        name: Some("lstm".into()),
        node: vec![proto::NodeProto {
            op_type: Some("LSTM".into()),
            name: Some("lstm_0".into()),
            input: ["x", "w", "r", "b", "", "h0", "c0"]
                .map(String::from)
                .to_vec(),
            output: vec!["y".into()],
            attribute: vec![proto::AttributeProto {
                name: Some("hidden_size".into()),
                i: Some(hidden),
                r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
                ..Default::default()
            }],
            ..Default::default()
        }],
        initializer: vec![
            init("w", vec![1, 4 * hidden, input]),
            init("r", vec![1, 4 * hidden, hidden]),
            init("b", vec![1, 8 * hidden]),
        ],
        input: vec![
            value("x", vec![sym("T"), sym("B"), Dim::DimValue(input)]),
            value("h0", vec![sym("d"), sym("b"), sym("h")]),
            value("c0", vec![sym("d2"), sym("b2"), sym("h2")]),
        ],
        output: vec![proto::ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let m = proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let dev = Device::Cpu;
    let model = Model::load_bytes(&m.encode_to_vec(), &dev).unwrap();
    let x = Tensor::randn([5, 2, 3], &dev).unwrap();
    let state = |shape: [usize; 3]| Tensor::zeros(shape, &dev).unwrap();
    let y = model
        .run(&[x.clone(), state([1, 2, 4]), state([1, 2, 4])])
        .unwrap();
    assert_eq!(y[0].shape(), &[5, 1, 2, 4]);
    // Another batch, another hidden size, a second direction the node does not have.
    for (h0, c0, bad) in [
        ([1, 3, 4], [1, 2, 4], "initial_h [1, 3, 4]"),
        ([1, 2, 4], [1, 2, 5], "initial_c [1, 2, 5]"),
        ([1, 2, 4], [2, 2, 4], "initial_c [2, 2, 4]"),
    ] {
        let err = model
            .run(&[x.clone(), state(h0), state(c0)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("LSTM") && err.contains(bad) && err.contains("must be [1, 2, 4]"),
            "{err}"
        );
    }
}
