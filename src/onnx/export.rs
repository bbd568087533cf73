//! [`export`]: a module's forward pass, traced, written as an ONNX model whose initializers
//! carry the state_dict names.

use super::proto::{self, ModelProto};
use super::trace::{self, Tracer};
use crate::nn::Module;
use crate::{DType, Device, Error, Result, Tensor};
use prost::Message;
use std::path::Path;

/// `export`'s options; `Default` is opset 18 with a dynamic batch.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The default-domain opset to write (13 to 21).
    pub opset: i64,
    /// Whether dim 0 of every input and output is a dynamic `batch` (PyTorch's
    /// `dynamic_axes={"input.0": {0: "batch"}, ...}`). The exporter traces twice (the example
    /// batch and one more) and turns the sizes that follow the batch into `-1`; a model whose
    /// shapes depend on the batch in a way one `-1` cannot say is an error.
    pub dynamic_batch: bool,
    /// Graph input names; `input.0`, `input.1`, ... when empty.
    pub input_names: Vec<String>,
    /// Graph output names; `output.0`, ... when empty.
    pub output_names: Vec<String>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            opset: 18,
            dynamic_batch: true,
            input_names: Vec::new(),
            output_names: Vec::new(),
        }
    }
}

/// Writes `module` as an ONNX model at `path` (atomically): its forward pass on
/// `example_inputs` is traced op by op, parameters and buffers become initializers under their
/// state_dict names. Before writing, the file is loaded back with [`super::Model`] and run on
/// fresh inputs next to the module itself; any difference is an error, never a wrong file.
///
/// ```
/// use wgtorch::nn::{Linear, Module};
/// use wgtorch::{onnx, Device, Tensor};
/// let dev = Device::Cpu;
/// let fc = Linear::new(4, 2, &dev)?;
/// let path = std::env::temp_dir().join("wgtorch-doc-linear.onnx");
/// onnx::export(&fc, &[Tensor::randn([3, 4], &dev)?], &path, onnx::ExportOptions::default())?;
/// let model = onnx::Model::load(&path, &dev)?;
/// assert_eq!(model.inputs()[0].to_string(), "input.0 float32 [?, 4]");
/// let x = Tensor::randn([5, 4], &dev)?;
/// let (a, b) = (model.run(&[x.clone()])?.remove(0), fc.forward(&x)?);
/// assert!(a.sub(&b)?.abs()?.amax([0, 1], false)?.item()? < 1e-6);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn export<M: crate::nn::Forward>(
    module: &M,
    example_inputs: &[Tensor],
    path: impl AsRef<Path>,
    options: ExportOptions,
) -> Result<()> {
    if example_inputs.len() != 1 {
        return Err(Error::msg(format!(
            "ONNX export: a Forward module takes one input, got {} (use export_with)",
            example_inputs.len()
        )));
    }
    export_with(
        module,
        example_inputs,
        |xs| Ok(vec![module.forward(&xs[0])?]),
        path,
        options,
    )
}

/// [`export`] for any forward computation: `forward` gets the inputs and returns the outputs.
pub fn export_with(
    module: &dyn Module,
    example_inputs: &[Tensor],
    forward: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    path: impl AsRef<Path>,
    options: ExportOptions,
) -> Result<()> {
    let bytes = export_bytes(module, example_inputs, forward, options)?;
    crate::io::write_atomic(path.as_ref(), &bytes)
}

/// [`export_with`], returning the model's bytes instead of writing a file.
pub fn export_bytes(
    module: &dyn Module,
    example_inputs: &[Tensor],
    forward: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    options: ExportOptions,
) -> Result<Vec<u8>> {
    let traced = trace_model(
        Some(module),
        example_inputs,
        forward,
        &options,
        "ONNX export",
        false,
    )?;
    let bytes = traced.model.encode_to_vec();
    // The file must compute what the module computes: run it with the importer on the example
    // inputs, and on the second batch size when the batch is dynamic.
    let check = super::Model::load_bytes(&bytes, &Device::Cpu)?;
    for (inputs, expected) in traced.cases {
        let cpu: Vec<Tensor> = inputs
            .iter()
            .map(|t| t.to(&Device::Cpu))
            .collect::<Result<_>>()?;
        let got = check.run(&cpu)?;
        same_outputs("ONNX export", &got, &expected, &traced.output_names)?;
    }
    Ok(bytes)
}

/// A traced forward pass: the graph, and the module's own outputs on each traced batch.
pub(crate) struct Traced {
    pub model: ModelProto,
    /// (inputs, the module's outputs) for each batch size traced.
    pub cases: Vec<(Vec<Tensor>, Vec<Tensor>)>,
    pub output_names: Vec<String>,
    /// Tensors from outside the forward pass that the graph reads live (a compile capture).
    pub captured: Vec<(String, Tensor)>,
    /// What the graph holds as it was at capture (a compile capture).
    pub guards: Vec<super::trace::Guard>,
}

/// Traces `forward` on `example_inputs` (twice with `dynamic_batch`) into a model whose
/// initializers are `module`'s parameters and buffers under their state_dict names. `what` and
/// `live_params` go to [`trace::capture`].
pub(crate) fn trace_model(
    module: Option<&dyn Module>,
    example_inputs: &[Tensor],
    forward: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    options: &ExportOptions,
    what: &'static str,
    live_params: bool,
) -> std::result::Result<Traced, trace::Failed> {
    if !super::OPSETS.contains(&options.opset) {
        return Err(Error::msg(format!(
            "{what}: opset {} is not one of 13 to 21",
            options.opset
        ))
        .into());
    }
    let names = |given: &[String], n: usize, prefix: &str| -> Vec<String> {
        if given.is_empty() {
            (0..n).map(|i| format!("{prefix}.{i}")).collect()
        } else {
            given.to_vec()
        }
    };
    let input_names = names(&options.input_names, example_inputs.len(), "input");
    if input_names.len() != example_inputs.len() {
        return Err(Error::msg(format!("{what}: input_names must name every input")).into());
    }
    let mut params = Vec::new();
    if let Some(m) = module {
        m.visit(&mut |n, t, _| params.push((n.to_string(), t.clone())));
    }
    let opset = options.opset;
    let run = |inputs: &[Tensor]| {
        let (outs, tracer) = trace::capture(
            inputs,
            &input_names,
            params.clone(),
            opset,
            what,
            live_params,
            &forward,
        )?;
        if let Some(e) = tracer.error {
            return Err(trace::Failed::from(e));
        }
        Ok((outs, tracer))
    };
    let (outs, mut tracer) = run(example_inputs)?;
    let output_names = names(&options.output_names, outs.len(), "output");
    if output_names.len() != outs.len() {
        return Err(Error::msg(format!("{what}: output_names must name every output")).into());
    }
    let mut second = None;
    if options.dynamic_batch {
        let bigger = example_inputs
            .iter()
            .map(grow_batch)
            .collect::<Result<Vec<_>>>()?;
        let (outs2, tracer2) = run(&bigger)?;
        generalise_batch(&mut tracer, &tracer2)?;
        second = Some((bigger, outs2));
    }
    // Graph outputs: each output value renamed through an Identity.
    for (o, name) in outs.iter().zip(&output_names) {
        let src = tracer.traced(o).ok_or_else(|| {
            let from = o.grad_fn().map_or(String::new(), |g| {
                format!(
                    " (it comes from {}, which the recorder does not know)",
                    g.name()
                )
            });
            Error::msg(format!(
                "{what}: an output is not computed from the inputs by recorded ops{from}"
            ))
        })?;
        tracer.raw("Identity", vec![src], vec![name.clone()], vec![]);
    }
    if tracer.unrecorded_read {
        return Err(tracer.unrecorded_read_error().into());
    }
    let captured = std::mem::take(&mut tracer.captured);
    let guards = std::mem::take(&mut tracer.guards).into_values().collect();
    let dyn_dim = options.dynamic_batch;
    let vi = |name: &str, t: &Tensor| value_info(name, t, dyn_dim);
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        producer_name: Some("wgtorch".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        graph: Some(proto::GraphProto {
            name: Some("wgtorch".into()),
            node: tracer.nodes,
            initializer: tracer.initializers,
            input: input_names
                .iter()
                .zip(example_inputs)
                .map(|(n, t)| vi(n, t))
                .collect(),
            output: output_names
                .iter()
                .zip(&outs)
                .map(|(n, t)| vi(n, t))
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut cases = vec![(example_inputs.to_vec(), outs)];
    cases.extend(second);
    Ok(Traced {
        model,
        cases,
        output_names,
        captured,
        guards,
    })
}

/// The graph's outputs `got` against the module's `expected` (any devices): the same shapes,
/// and values within `1e-4·(1 + max |expected|)` (`1e-2·(…)` for half types), NaN where NaN.
pub(crate) fn same_outputs(
    what: &str,
    got: &[Tensor],
    expected: &[Tensor],
    names: &[String],
) -> Result<()> {
    for ((g, e), name) in got.iter().zip(expected).zip(names) {
        let g = g.detach().to(&Device::Cpu)?;
        let e = e.detach().to(&Device::Cpu)?;
        let same_shape = g.shape() == e.shape() && g.dtype() == e.dtype();
        let wide = |t: &Tensor| t.to_dtype(DType::F64);
        let diff = if same_shape && g.numel() > 0 {
            let (gw, ew) = (wide(&g)?, wide(&e)?);
            // Equal values (infinities included) and NaN where the module has NaN match; a
            // NaN elsewhere does not.
            let same = gw
                .eq(&ew)?
                .logical_or(&gw.isnan()?.logical_and(&ew.isnan()?)?)?;
            let d = gw.sub(&ew)?.abs()?;
            let d = Tensor::where_cond(&same, &d.zeros_like()?, &d)?;
            d.amax(Vec::<isize>::new(), false)?.item()?
        } else {
            0.0
        };
        let scale = if e.numel() > 0 {
            let ew = wide(&e)?;
            Tensor::where_cond(&ew.isfinite()?, &ew.abs()?, &ew.zeros_like()?)?
                .amax(Vec::<isize>::new(), false)?
                .item()?
        } else {
            0.0
        };
        let rel = if matches!(e.dtype(), DType::F16 | DType::BF16) {
            1e-2
        } else {
            1e-4
        };
        if !same_shape || diff.is_nan() || diff > rel * (1.0 + scale) {
            return Err(Error::msg(format!(
                "{what}: the graph's {name} differs from the module's ({} {:?} vs {} {:?}, max abs diff {diff:e}); please report this",
                g.dtype(),
                g.shape(),
                e.dtype(),
                e.shape()
            )));
        }
    }
    Ok(())
}

/// The inputs with one more row along dim 0 (the first row repeated).
fn grow_batch(x: &Tensor) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Err(Error::msg(
            "ONNX export: dynamic_batch needs inputs with a batch dim (0-d input given)",
        ));
    }
    Tensor::cat(&[x.clone(), x.narrow(0, 0, 1)?], 0)
}

/// Turns the shape constants that differ between the two traces into `-1` (one per constant).
fn generalise_batch(a: &mut Tracer, b: &Tracer) -> Result<()> {
    let ops = |t: &Tracer| {
        t.nodes
            .iter()
            .map(|n| n.op_type().to_string())
            .collect::<Vec<_>>()
    };
    if ops(a) != ops(b)
        || a.shape_consts.len() != b.shape_consts.len()
        || a.data_consts.len() != b.data_consts.len()
    {
        return Err(Error::msg(
            "ONNX export: the forward pass records different ops at another batch size; export with dynamic_batch: false",
        ));
    }
    for ((ia, va), (_, vb)) in a.shape_consts.iter().zip(&b.shape_consts) {
        let differ: Vec<usize> = (0..va.len().max(vb.len()))
            .filter(|&i| va.get(i) != vb.get(i))
            .collect();
        if differ.is_empty() {
            continue;
        }
        if va.len() != vb.len() || differ.len() > 1 {
            return Err(Error::msg(format!(
                "ONNX export: a shape ({va:?} at one batch size, {vb:?} at the next) depends on the batch in more than one place; export with dynamic_batch: false"
            )));
        }
        let mut v = va.clone();
        v[differ[0]] = -1;
        let name = a.initializers[*ia].name().to_string();
        let n = v.len();
        a.initializers[*ia] =
            super::tensor::to_proto(&name, &Tensor::from_vec(v, [n], &Device::Cpu)?)?;
    }
    for (&ia, &ib) in a.data_consts.iter().zip(&b.data_consts) {
        let (x, y) = (&a.initializers[ia], &b.initializers[ib]);
        if x.dims != y.dims || x.raw_data != y.raw_data {
            return Err(Error::msg(format!(
                "ONNX export: a constant made in the forward pass (dims {:?}) depends on the batch; export with dynamic_batch: false",
                x.dims
            )));
        }
    }
    Ok(())
}

fn value_info(name: &str, t: &Tensor, dynamic: bool) -> proto::ValueInfoProto {
    use proto::tensor_shape_proto::{dimension::Value as D, Dimension};
    let dims = t
        .shape()
        .iter()
        .enumerate()
        .map(|(i, &d)| Dimension {
            value: Some(if dynamic && i == 0 {
                D::DimParam("batch".into())
            } else {
                D::DimValue(d as i64)
            }),
            ..Default::default()
        })
        .collect();
    proto::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(super::tensor::code_of(t.dtype())),
                    shape: Some(proto::TensorShapeProto { dim: dims }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}
