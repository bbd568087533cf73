//! Parsing and checking an ONNX model: the protobuf, the opset, every node's operator, the
//! value names (each defined once, every use defined, no cycles), the initializers, and static
//! shape inference with constant folding. What fails here fails at load, never at run time.

use super::ops::{self, show, Ctx, Dim, Info, OpDef};
use super::proto::{self, ModelProto};
use super::tensor::{self, ExternalData};
use crate::{Error, Result, Tensor};
use prost::Message;
use std::collections::HashMap;

/// The opsets of the default domain whose operators wgtorch implements.
pub(crate) const OPSETS: std::ops::RangeInclusive<i64> = 13..=21;

/// One node, resolved.
pub(crate) struct Node {
    /// The node's name, or `#index` when the file gives none.
    pub name: String,
    pub op_type: String,
    pub def: &'static OpDef,
    /// Value ids; `None` for an omitted optional input.
    pub inputs: Vec<Option<usize>>,
    /// Value ids; `None` for an omitted optional output.
    pub outputs: Vec<Option<usize>>,
    pub attrs: Vec<proto::AttributeProto>,
    /// The program of a fused tree of elementwise nodes (`Graph::fuse_elementwise`), which this
    /// node runs in their place.
    pub fused: Option<std::sync::Arc<super::fuse::FusedGroup>>,
}

/// A named value of the graph.
pub(crate) struct Value {
    pub name: String,
    pub info: Info,
}

/// How load treats the model's float initializers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weights<'a> {
    /// Constants: folded into whatever can be computed at load.
    Frozen,
    /// Parameters to train: never folded away, so that gradients reach them.
    Trainable,
    /// A compiled graph's: those named here are the live tensors the graph reads
    /// (`Model::bind_live`), never folded; the rest are constants the trace made, folded like
    /// [`Weights::Frozen`]'s.
    Live(&'a [String]),
}

impl Weights<'_> {
    /// Whether the float initializer `name` is a parameter (its value unknown at load).
    fn is_param(&self, name: &str) -> bool {
        match self {
            Weights::Frozen => false,
            Weights::Trainable => true,
            Weights::Live(names) => names.iter().any(|n| n == name),
        }
    }
}

/// A checked graph in execution order.
pub(crate) struct Graph {
    pub opset: i64,
    pub producer: String,
    pub values: Vec<Value>,
    /// Graph inputs that are not initializers, in order.
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    /// Nodes in a topological order.
    pub nodes: Vec<Node>,
    /// Values known at load (initializers, constants, folded results), by value id, on the CPU.
    pub consts: Vec<Option<Tensor>>,
    /// Initializers by value id that become parameters or buffers in trainable mode.
    pub initializers: Vec<usize>,
    /// Nodes whose outputs were all computed at load.
    pub folded: Vec<bool>,
    /// Nodes whose work a later node does (a `Conv` and `Add` that the `Relu` after them runs as
    /// one fused convolution, the elementwise nodes of a fused program): skipped at run time.
    pub fused: Vec<bool>,
    /// The index of the last node reading each value (`usize::MAX`: a graph output or unused).
    pub last_use: Vec<usize>,
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::msg(format!("invalid ONNX model: {msg}"))
}

impl Graph {
    /// Parses and checks `bytes`.
    pub fn parse(bytes: &[u8], external: ExternalData<'_>, weights: Weights) -> Result<Graph> {
        let model = ModelProto::decode(bytes).map_err(|e| {
            bad(format!(
                "the protobuf does not parse ({e}); truncated or not an ONNX file?"
            ))
        })?;
        let mut opset = None;
        for o in &model.opset_import {
            if matches!(o.domain(), "" | "ai.onnx") {
                opset = Some(o.version());
            }
        }
        let opset = opset.ok_or_else(|| bad("no opset of the default ONNX domain is imported"))?;
        if !OPSETS.contains(&opset) {
            return Err(Error::msg(format!(
                "ONNX opset {opset} is not supported: wgtorch runs opsets {} to {} (convert the \
                 model with onnx.version_converter, or export it with opset_version={})",
                OPSETS.start(),
                OPSETS.end(),
                OPSETS.end()
            )));
        }
        let g = model
            .graph
            .as_ref()
            .ok_or_else(|| bad("the model has no graph"))?;
        if !g.sparse_initializer.is_empty() {
            return Err(bad("sparse initializers are not supported"));
        }
        let mut b = Builder {
            values: Vec::new(),
            by_name: HashMap::new(),
            consts: Vec::new(),
        };
        // Initializers first: ONNX before IR 4 also lists them as graph inputs.
        let mut initializers = Vec::new();
        for t in &g.initializer {
            let value = tensor::from_proto(t, external)?;
            let id = b.define(t.name(), Info::of_tensor(&value), "initializer")?;
            b.consts[id] = Some(value);
            initializers.push(id);
        }
        let mut inputs = Vec::new();
        for vi in &g.input {
            if b.by_name.contains_key(vi.name()) && initializers.contains(&b.by_name[vi.name()]) {
                continue;
            }
            let info = value_info(vi)?;
            inputs.push(b.define(vi.name(), info, "graph input")?);
        }
        // Nodes: resolve operators and names, then order them.
        let raw: Vec<&proto::NodeProto> = g.node.iter().collect();
        let mut produced: HashMap<&str, usize> = HashMap::new();
        for (i, n) in raw.iter().enumerate() {
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                if produced.insert(o, i).is_some() || b.by_name.contains_key(o.as_str()) {
                    return Err(bad(format!("value '{o}' is defined twice")));
                }
            }
        }
        let order = topological(&raw, &produced, &b.by_name)?;
        let mut nodes = Vec::with_capacity(raw.len());
        for i in order {
            let n = raw[i];
            let name = if n.name().is_empty() {
                format!("#{i}")
            } else {
                n.name().to_string()
            };
            if !matches!(n.domain(), "" | "ai.onnx") {
                return Err(Error::msg(format!(
                    "ONNX node '{name}': operator {}::{} (domain '{}') is not supported: wgtorch runs \
                     the default ONNX domain",
                    n.domain(),
                    n.op_type(),
                    n.domain()
                )));
            }
            let def = ops::find(n.op_type()).ok_or_else(|| {
                let local = model.functions.iter().any(|f| f.name() == n.op_type());
                Error::msg(format!(
                    "ONNX node '{name}': operator {} (opset {opset}) is not supported by wgtorch{}",
                    n.op_type(),
                    if local {
                        "; it is a model-local function: inline it first (onnx.inliner.inline_local_functions)"
                    } else {
                        ""
                    }
                ))
            })?;
            if let Some(a) = n
                .attribute
                .iter()
                .find(|a| a.g.is_some() || !a.graphs.is_empty())
            {
                return Err(Error::msg(format!(
                    "ONNX {} node '{name}': attribute '{}' holds a subgraph, which is not supported",
                    n.op_type(),
                    a.name()
                )));
            }
            let inputs = n
                .input
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        None
                    } else {
                        Some(b.by_name[s.as_str()])
                    }
                })
                .collect();
            let outputs = n
                .output
                .iter()
                .map(|s| {
                    (!s.is_empty())
                        .then(|| b.define(s, Info::new(crate::DType::F32, None), "node output"))
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()?;
            nodes.push(Node {
                name,
                op_type: n.op_type().to_string(),
                def,
                inputs,
                outputs,
                attrs: n.attribute.clone(),
                fused: None,
            });
        }
        let mut outputs = Vec::new();
        for vi in &g.output {
            let id = *b
                .by_name
                .get(vi.name())
                .ok_or_else(|| bad(format!("graph output '{}' is never computed", vi.name())))?;
            outputs.push(id);
        }
        let mut graph = Graph {
            opset,
            producer: format!("{} {}", model.producer_name(), model.producer_version())
                .trim()
                .to_string(),
            folded: vec![false; nodes.len()],
            fused: vec![false; nodes.len()],
            last_use: vec![usize::MAX; b.values.len()],
            values: b.values,
            consts: b.consts,
            inputs,
            outputs,
            nodes,
            initializers,
        };
        graph.infer(weights)?;
        for (vi, &id) in g.output.iter().zip(&graph.outputs) {
            check_declared(&graph.values[id], vi)?;
        }
        graph.fuse_conv_epilogues();
        graph.fuse_elementwise()?;
        graph.plan_liveness();
        Ok(graph)
    }

    /// Whether node `k` runs (it was neither folded at load nor fused into a later node).
    pub fn runs(&self, k: usize) -> bool {
        !self.folded[k] && !self.fused[k]
    }

    /// Rewrites each `Conv → Relu` and `Conv → Add(·, residual) → Relu` chain whose intermediate
    /// values have no other reader into one fused convolution at the `Relu`'s place
    /// (`ops::nn::CONV_RELU`, inputs `[X, W, B, residual]`), which the CPU and (in f32) a GPU
    /// apply as the convolution's output is stored ([`crate::ops::conv2d_fused`]). The `Add`'s other operand must have the
    /// convolution output's static shape, else the chain is left as it is.
    fn fuse_conv_epilogues(&mut self) {
        let n = self.nodes.len();
        let (producer, readers) = self.producers_and_readers();
        // Nodes this pass wrote (a fused convolution is no plain `Conv`: a `Relu` after it stays).
        let mut made = vec![false; n];
        // The node that produces `v` alone for one reader, if it is an op of `op_type` from the
        // file.
        let single = |v: usize, op_type: &str, nodes: &[Node], fused: &[bool], made: &[bool]| {
            let p = producer[v];
            let plain = p != usize::MAX && !fused[p] && !made[p];
            (plain && readers[v] == 1 && nodes[p].op_type == op_type).then_some(p)
        };
        let conv4d = |p: usize, g: &Graph| {
            let x = g.nodes[p].inputs.first().copied().flatten();
            x.and_then(|x| g.values[x].info.shape.as_ref())
                .is_some_and(|s| s.len() == 4)
        };
        // The residual operand has the convolution output's static shape and dtype (no broadcast).
        let values = &self.values;
        let same = |u: usize, v: usize| {
            let (iu, iv) = (&values[u].info, &values[v].info);
            iu.dtype == iv.dtype && iu.shape.is_some() && iu.shape == iv.shape
        };
        // The chain ending in a `Relu` that reads `x`: (Conv, Add, residual).
        type Chain = (usize, Option<usize>, Option<usize>);
        let chain = |x: usize, nodes: &[Node], fused: &[bool], made: &[bool]| -> Option<Chain> {
            if let Some(c) = single(x, "Conv", nodes, fused, made) {
                return Some((c, None, None));
            }
            let a = single(x, "Add", nodes, fused, made)?;
            let ins = &nodes[a].inputs;
            [(0, 1), (1, 0)].into_iter().find_map(|(c, r)| {
                let (cv, rv) = (
                    ins.get(c).copied().flatten()?,
                    ins.get(r).copied().flatten()?,
                );
                let p = single(cv, "Conv", nodes, fused, made)?;
                same(cv, rv).then_some((p, Some(a), Some(rv)))
            })
        };
        for k in 0..n {
            if self.folded[k] || self.nodes[k].op_type != "Relu" {
                continue;
            }
            let Some(Some(x)) = self.nodes[k].inputs.first().copied() else {
                continue;
            };
            let Some((conv, add, residual)) = chain(x, &self.nodes, &self.fused, &made) else {
                continue;
            };
            if !conv4d(conv, self) || self.folded[conv] {
                continue;
            }
            let c = &self.nodes[conv];
            let mut inputs = c.inputs.clone();
            inputs.resize(3, None);
            inputs.push(residual);
            let fused = Node {
                name: c.name.clone(),
                op_type: c.op_type.clone(),
                def: &ops::nn::CONV_RELU,
                inputs,
                outputs: self.nodes[k].outputs.clone(),
                attrs: c.attrs.clone(),
                fused: None,
            };
            self.fused[conv] = true;
            if let Some(a) = add {
                self.fused[a] = true;
            }
            self.nodes[k] = fused;
            made[k] = true;
        }
    }

    /// For each value, the node that computes it at run time (`usize::MAX`: none, an input or
    /// a value known at load) and how many run-time readers it has (a graph output counts as
    /// one: the caller reads it).
    pub(crate) fn producers_and_readers(&self) -> (Vec<usize>, Vec<usize>) {
        let mut producer = vec![usize::MAX; self.values.len()];
        let mut readers = vec![0usize; self.values.len()];
        for k in (0..self.nodes.len()).filter(|&k| self.runs(k)) {
            for &o in self.nodes[k].outputs.iter().flatten() {
                producer[o] = k;
            }
            for &i in self.nodes[k].inputs.iter().flatten() {
                readers[i] += 1;
            }
        }
        for &o in &self.outputs {
            readers[o] += 1;
        }
        (producer, readers)
    }

    /// Shape inference and constant folding, in execution order.
    fn infer(&mut self, weights: Weights) -> Result<()> {
        // Float initializers that are parameters: their values are not known at load.
        for &id in &self.initializers {
            let v = &mut self.values[id];
            if v.info.dtype.is_float() && weights.is_param(&v.name) {
                v.info.value = None;
            }
        }
        for k in 0..self.nodes.len() {
            let node = &self.nodes[k];
            let infos: Vec<Option<&Info>> = node
                .inputs
                .iter()
                .map(|i| i.map(|i| &self.values[i].info))
                .collect();
            let host = host_values(node, &infos)?;
            let ctx = Ctx { node, host };
            let foldable = infos.iter().flatten().all(|i| i.value.is_some());
            let outs: Vec<Info> = if foldable {
                let vals: Vec<Option<Tensor>> = infos
                    .iter()
                    .map(|i| i.and_then(|i| i.value.clone()))
                    .collect();
                let outs = (node.def.run)(&ctx, &vals)?;
                self.folded[k] = true;
                outs.iter().map(Info::of_tensor).collect()
            } else {
                (node.def.infer)(&ctx, &infos)?
            };
            let node = &self.nodes[k];
            for (j, out) in node.outputs.iter().enumerate() {
                let Some(out) = *out else { continue };
                let info = outs.get(j).cloned().ok_or_else(|| {
                    Error::msg(format!(
                        "ONNX {} node '{}': output {j} is not produced by this operator",
                        node.op_type, node.name
                    ))
                })?;
                self.consts[out] = info.value.clone();
                self.values[out].info = info;
            }
        }
        Ok(())
    }

    /// The last reader of each value, so that the executor frees intermediates early.
    fn plan_liveness(&mut self) {
        for (k, n) in self.nodes.iter().enumerate() {
            if !self.runs(k) {
                continue;
            }
            for &i in n.inputs.iter().flatten() {
                self.last_use[i] = k;
            }
        }
        for &o in &self.outputs {
            self.last_use[o] = usize::MAX;
        }
    }
}

/// The integer values of a node's host inputs that are known at load.
pub(crate) fn host_values(node: &Node, infos: &[Option<&Info>]) -> Result<Vec<Option<Vec<i64>>>> {
    let mut host = vec![None; infos.len()];
    for &i in node.def.host_inputs {
        if let Some(Some(info)) = infos.get(i) {
            if let Some(v) = &info.value {
                host[i] = Some(ints(node, i, v)?);
            }
        }
    }
    Ok(host)
}

/// A host input's values as i64 (integer dtypes only; CPU tensors read at once).
pub(crate) fn ints(node: &Node, i: usize, v: &Tensor) -> Result<Vec<i64>> {
    if v.dtype().is_float() {
        return Err(Error::msg(format!(
            "ONNX {} node '{}': input {i} must be an integer tensor, got {}",
            node.op_type,
            node.name,
            v.dtype()
        )));
    }
    v.to_dtype(crate::DType::I64)?.to_vec::<i64>()
}

struct Builder {
    values: Vec<Value>,
    by_name: HashMap<String, usize>,
    consts: Vec<Option<Tensor>>,
}

impl Builder {
    fn define(&mut self, name: &str, info: Info, what: &str) -> Result<usize> {
        if name.is_empty() {
            return Err(bad(format!("a {what} has an empty name")));
        }
        if self.by_name.contains_key(name) {
            return Err(bad(format!("value '{name}' is defined twice")));
        }
        let id = self.values.len();
        self.values.push(Value {
            name: name.to_string(),
            info,
        });
        self.consts.push(None);
        self.by_name.insert(name.to_string(), id);
        Ok(id)
    }
}

/// Kahn's algorithm over the nodes; a use of an undefined name or a cycle is an error.
fn topological(
    nodes: &[&proto::NodeProto],
    produced: &HashMap<&str, usize>,
    defined: &HashMap<String, usize>,
) -> Result<Vec<usize>> {
    let mut indegree = vec![0usize; nodes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for inp in n.input.iter().filter(|s| !s.is_empty()) {
            if let Some(&p) = produced.get(inp.as_str()) {
                indegree[i] += 1;
                users[p].push(i);
            } else if !defined.contains_key(inp.as_str()) {
                return Err(bad(format!(
                    "node '{}' ({}) reads '{inp}', which is neither a graph input, an initializer nor a node's output",
                    n.name(),
                    n.op_type()
                )));
            }
        }
    }
    let mut ready: std::collections::VecDeque<usize> =
        (0..nodes.len()).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push_back(u);
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck = (0..nodes.len())
            .find(|&i| indegree[i] > 0)
            .expect("a node in the cycle");
        return Err(bad(format!(
            "the graph has a cycle through node '{}' ({})",
            nodes[stuck].name(),
            nodes[stuck].op_type()
        )));
    }
    Ok(order)
}

/// A graph input's declared type: a tensor's element type and dims (`dim_param` and missing
/// dims are dynamic).
fn value_info(vi: &proto::ValueInfoProto) -> Result<Info> {
    use proto::type_proto::Value as V;
    let t = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(V::TensorType(t)) => t,
        _ => return Err(bad(format!("graph input '{}' is not a tensor", vi.name()))),
    };
    let dtype = tensor::dtype_of(t.elem_type())
        .map_err(|e| bad(format!("graph input '{}': {e}", vi.name())))?;
    let shape = t.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .map(|d| match d.value {
                Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) if v >= 0 => {
                    usize::try_from(v).ok()
                }
                _ => None,
            })
            .collect::<Vec<Dim>>()
    });
    Ok(Info::new(dtype, shape))
}

/// A graph output's declared type against the inferred one.
fn check_declared(v: &Value, vi: &proto::ValueInfoProto) -> Result<()> {
    let Ok(declared) = value_info(vi) else {
        return Ok(());
    };
    if declared.dtype != v.info.dtype {
        return Err(bad(format!(
            "graph output '{}' is declared {} but computes {}",
            v.name, declared.dtype, v.info.dtype
        )));
    }
    if let (Some(d), Some(s)) = (&declared.shape, &v.info.shape) {
        let clash = d.len() != s.len()
            || d.iter()
                .zip(s)
                .any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b));
        if clash && !d.is_empty() {
            return Err(bad(format!(
                "graph output '{}' is declared {} but computes {}",
                v.name,
                show(&declared.shape),
                show(&v.info.shape)
            )));
        }
    }
    Ok(())
}
