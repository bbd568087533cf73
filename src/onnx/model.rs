//! [`Model`]: a checked ONNX graph with its weights on a device, run with wgtorch ops.

use super::graph::{ints, Graph, Weights};
use super::ops::{show, Ctx, Dim};
use super::tensor::ExternalData;
use crate::nn::{Kind, Module};
use crate::{DType, Device, Error, Result, Tensor};
use std::path::Path;

/// A graph input or output as the model declares it: name, element type and shape (`None`
/// for a dynamic dim such as a batch named `batch_size`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueSpec {
    /// The value's name in the graph (`input.0`, `logits`, ...).
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its dims; `None` where the size is only known at run time. `None` for the whole shape
    /// when not even the rank is declared.
    pub shape: Option<Vec<Option<usize>>>,
}

impl std::fmt::Display for ValueSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.name, self.dtype, show(&self.shape))
    }
}

/// One initializer as a module tensor (trainable mode).
struct Named {
    name: String,
    id: usize,
    kind: Kind,
}

/// An ONNX model loaded for wgtorch: parsed, checked (opset 13–21, every operator supported,
/// shapes consistent, no cycles, every initializer present), with its weights on a device.
/// [`Model::run`] executes it with wgtorch ops on the CPU or any GPU adapter.
///
/// ```no_run
/// use wgtorch::{onnx, Device, Tensor};
/// let dev = Device::best();
/// let model = onnx::Model::load("resnet18.onnx", &dev)?;
/// println!("{} -> {}", model.inputs()[0], model.outputs()[0]);
/// let logits = &model.run(&[Tensor::randn([1, 3, 224, 224], &dev)?])?[0];
/// # Ok::<(), wgtorch::Error>(())
/// ```
///
/// A model exported from PyTorch with `torch.onnx.export` loads as it is; so does one built by
/// hand with the [`super::proto`] types (here a two-node graph):
///
/// ```
/// use wgtorch::{onnx, Device, Tensor};
/// # let bytes = wgtorch::onnx::doc_example_model();
/// let model = onnx::Model::load_bytes(&bytes, &Device::Cpu)?; // y = relu(x) + 1
/// let x = Tensor::from_vec(vec![-2.0f32, 3.0], [1, 2], &Device::Cpu)?;
/// assert_eq!(model.run(&[x])?[0].to_vec::<f32>()?, [1.0, 4.0]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Model {
    graph: Graph,
    device: Device,
    /// Values known at load, placed for the run: floats on the device, integers (shape data)
    /// on the CPU. By value id.
    placed: Vec<Option<Tensor>>,
    /// Trainable mode: the initializers as parameters and buffers.
    named: Vec<Named>,
}

impl Model {
    /// Loads and checks the model at `path` for `device`. External data files are read from the
    /// model's folder (never outside it).
    pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Model> {
        Model::load_file(path.as_ref(), device, Weights::Frozen)
    }

    /// Loads and checks a model from its bytes (the browser's way: `fetch` the file, pass the
    /// bytes). A model with external data must be loaded from its path instead.
    pub fn load_bytes(bytes: &[u8], device: &Device) -> Result<Model> {
        Model::build(bytes, ExternalData::Refused, device, Weights::Frozen)
    }

    /// Loads the model at `path` for fine-tuning: every float initializer becomes a parameter
    /// (`requires_grad`, named as in the file; BatchNormalization's running statistics are
    /// buffers), so that [`crate::nn::ModuleExt`]'s `named_parameters`, `state_dict`,
    /// `load_state_dict` and `to_device` work, and gradients flow to them through
    /// [`Model::run`]. Nothing computed from a parameter is folded at load.
    ///
    /// ```
    /// use wgtorch::nn::ModuleExt;
    /// use wgtorch::{onnx, optim, optim::Optimizer, Device, Tensor};
    /// # let bytes = wgtorch::onnx::doc_example_linear();
    /// let dev = Device::Cpu;
    /// let mut model = onnx::Model::load_trainable_bytes(&bytes, &dev)?; // y = x @ w.T + b
    /// let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["fc.weight", "fc.bias"]);
    /// let mut opt = optim::Sgd::new(model.parameters(), 0.1)?;
    /// let x = Tensor::ones([4, 3], &dev)?;
    /// let loss = model.run(&[x])?[0].square()?.mean_all()?;
    /// loss.backward()?;
    /// opt.step()?;
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn load_trainable(path: impl AsRef<Path>, device: &Device) -> Result<Model> {
        Model::load_file(path.as_ref(), device, Weights::Trainable)
    }

    /// A model file, with external data from its folder; errors name the path.
    fn load_file(path: &Path, device: &Device, weights: Weights) -> Result<Model> {
        let bytes = read_model(path)?;
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Model::build(&bytes, ExternalData::Folder(folder), device, weights)
            .map_err(|e| Error::msg(format!("{}: {e}", path.display())))
    }

    /// [`Model::load_trainable`] from bytes.
    pub fn load_trainable_bytes(bytes: &[u8], device: &Device) -> Result<Model> {
        Model::build(bytes, ExternalData::Refused, device, Weights::Trainable)
    }

    fn build(
        bytes: &[u8],
        external: ExternalData<'_>,
        device: &Device,
        weights: Weights,
    ) -> Result<Model> {
        let graph = Graph::parse(bytes, external, weights)?;
        // What the run reads: inputs of nodes that were not folded, and graph outputs.
        let mut read = vec![false; graph.values.len()];
        for (k, n) in graph.nodes.iter().enumerate() {
            if graph.runs(k) {
                n.inputs.iter().flatten().for_each(|&i| read[i] = true);
            }
        }
        graph.outputs.iter().for_each(|&o| read[o] = true);
        let mut named = Vec::new();
        if weights != Weights::Frozen {
            let mut stats = vec![false; graph.values.len()];
            for n in graph
                .nodes
                .iter()
                .filter(|n| n.op_type == "BatchNormalization")
            {
                for i in [3, 4] {
                    if let Some(Some(id)) = n.inputs.get(i) {
                        stats[*id] = true;
                    }
                }
            }
            for &id in &graph.initializers {
                let name = &graph.values[id].name;
                if let Weights::Live(live) = weights {
                    // The others are the trace's constants.
                    if !live.contains(name) {
                        continue;
                    }
                }
                let param = graph.values[id].info.dtype.is_float() && !stats[id];
                named.push(Named {
                    name: graph.values[id].name.clone(),
                    id,
                    kind: if param { Kind::Param } else { Kind::Buffer },
                });
            }
        }
        let mut placed = vec![None; graph.values.len()];
        for (id, c) in graph.consts.iter().enumerate() {
            let Some(c) = c else { continue };
            let param = named.iter().find(|p| p.id == id);
            if !read[id] && param.is_none() {
                continue;
            }
            let t = if c.dtype().is_float() {
                c.to(device)?
            } else {
                c.clone()
            };
            placed[id] = Some(match param {
                Some(p) if p.kind == Kind::Param => t.requires_grad_(true),
                _ => t,
            });
        }
        Ok(Model {
            graph,
            device: *device,
            placed,
            named,
        })
    }

    /// A compiled graph (`compile`'s trace, as bytes): its initializers that name one of
    /// `live`'s tensors (state_dict name, same dtype and shape) become those very tensors, so
    /// the model reads the module's current parameters and buffers (an optimizer step or a
    /// `load_state_dict` is seen, and gradients reach them); the others are the constants the
    /// forward pass made, known at load (folded where a node reads only constants; a scalar
    /// operand of an elementwise node becomes a scalar op, as eager ran it).
    pub(crate) fn load_compiled(
        bytes: &[u8],
        device: &Device,
        live: &[(String, Tensor)],
    ) -> Result<Model> {
        let names: Vec<String> = live.iter().map(|(n, _)| n.clone()).collect();
        let mut m = Model::build(bytes, ExternalData::Refused, device, Weights::Live(&names))?;
        m.bind_live(live)?;
        Ok(m)
    }

    /// Binds the live tensors of [`Model::load_compiled`].
    fn bind_live(&mut self, live: &[(String, Tensor)]) -> Result<()> {
        for p in &self.named {
            let Some(placed) = self.placed[p.id].as_mut() else {
                continue;
            };
            match live.iter().find(|(n, _)| *n == p.name) {
                Some((_, t)) => {
                    if t.dtype() != placed.dtype() || t.shape() != placed.shape() {
                        return Err(Error::msg(format!(
                            "compile: the traced {} is {} {:?}, the module's {} {:?}",
                            p.name,
                            placed.dtype(),
                            placed.shape(),
                            t.dtype(),
                            t.shape()
                        )));
                    }
                    *placed = t.clone();
                }
                None => *placed = placed.detach(),
            }
        }
        Ok(())
    }

    /// The graph's inputs (initializers excluded), in order.
    pub fn inputs(&self) -> Vec<ValueSpec> {
        self.graph.inputs.iter().map(|&i| self.spec(i)).collect()
    }

    /// The graph's outputs, in order, with the shapes inferred at load.
    pub fn outputs(&self) -> Vec<ValueSpec> {
        self.graph.outputs.iter().map(|&i| self.spec(i)).collect()
    }

    fn spec(&self, id: usize) -> ValueSpec {
        let v = &self.graph.values[id];
        ValueSpec {
            name: v.name.clone(),
            dtype: v.info.dtype,
            shape: v.info.shape.clone(),
        }
    }

    /// The default-domain opset the model imports.
    pub fn opset(&self) -> i64 {
        self.graph.opset
    }

    /// The producer the file names (`pytorch 2.15.0`).
    pub fn producer(&self) -> &str {
        &self.graph.producer
    }

    /// The number of nodes, and how many of them were computed at load (constant folding).
    pub fn node_counts(&self) -> (usize, usize) {
        (
            self.graph.nodes.len(),
            self.graph.folded.iter().filter(|&&f| f).count(),
        )
    }

    /// How many nodes run inside a later one: the `Conv` (and residual `Add`) of each
    /// `Conv → [Add →] Relu` chain, which runs as one fused convolution at the `Relu`, and the
    /// elementwise nodes of each fused program but its last ([`Model::fused_groups`]).
    ///
    /// ```no_run
    /// # fn main() -> wgtorch::Result<()> {
    /// let m = wgtorch::onnx::Model::load("resnet18.onnx", &wgtorch::Device::Cpu)?;
    /// println!("{} of {} nodes fused", m.fused_nodes(), m.node_counts().0);
    /// # Ok(()) }
    /// ```
    pub fn fused_nodes(&self) -> usize {
        self.graph.fused.iter().filter(|&&f| f).count()
    }

    /// The op types of each tree of float elementwise nodes that runs as one fused kernel
    /// ([`FusedProgram`](crate::ops::fused::FusedProgram)), in execution order: the trees
    /// whose intermediate values have no other reader, with at most
    /// [`MAX_FUSED_INPUTS`](crate::ops::fused::MAX_FUSED_INPUTS) inputs.
    ///
    /// ```
    /// use wgtorch::{onnx::Model, Device, Tensor};
    /// // y = relu(x) + 1: one kernel
    /// let m = Model::load_bytes(&wgtorch::onnx::doc_example_model(), &Device::Cpu)?;
    /// assert_eq!(m.fused_groups(), vec![vec!["Relu".to_string(), "Add".to_string()]]);
    /// let y = m.run(&[Tensor::from_vec(vec![-1.0f32, 2.0], [1, 2], &Device::Cpu)?])?;
    /// assert_eq!(y[0].to_vec::<f32>()?, vec![1.0, 3.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn fused_groups(&self) -> Vec<Vec<String>> {
        let g = &self.graph;
        (0..g.nodes.len())
            .filter(|&k| g.runs(k))
            .filter_map(|k| g.nodes[k].fused.as_ref().map(|f| f.op_types.clone()))
            // A lone node rewritten for its scalar operand fuses nothing.
            .filter(|types| types.len() > 1)
            .collect()
    }

    /// The device the model runs on: its parameters' (after `to_device`) or the one it was
    /// loaded for.
    pub fn device(&self) -> Device {
        self.named
            .iter()
            .find_map(|p| {
                self.placed[p.id]
                    .as_ref()
                    .filter(|_| p.kind == Kind::Param)
                    .map(Tensor::device)
            })
            .unwrap_or(self.device)
    }

    /// Runs the model on `inputs` (one per graph input, in order; moved to the model's device
    /// if they are elsewhere) and returns the outputs in the graph's order. Inputs are checked
    /// against the declared element types and shapes (dynamic dims take any size).
    ///
    /// Blocks while a host-side value (a shape computed on the GPU) is read back; in the browser
    /// use [`Model::run_async`].
    ///
    /// On the CPU, with its inputs on the CPU, called from outside rayon's thread pool under
    /// the default modes (no `no_grad`, anomaly detection or autocast), the whole run moves onto
    /// one of the pool's threads (`threads::in_pool`): each operator's parallel loops then start
    /// inside the pool, instead of each loop handing its work over and sleeping until it is done.
    /// On an idle 2-vCPU VM (Intel Xeon, Dec 6) that took the golden simple_cnn at batch 2 from
    /// 0.41–0.44 ms a run on one thread to 0.22–0.26, and ResNet-18 from 22.2–23.7 ms to
    /// 20.2–21.5.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let run = || crate::tensor::block_on(self.run_async(inputs));
        if self.device().is_gpu() || inputs.iter().any(|x| x.device().is_gpu()) {
            return run();
        }
        crate::threads::in_pool(run)
    }

    /// Runs the model with inputs given by name; returns the outputs by name, in graph order.
    pub fn run_named(&self, inputs: &[(&str, Tensor)]) -> Result<Vec<(String, Tensor)>> {
        let specs = self.inputs();
        for (name, _) in inputs {
            if !specs.iter().any(|s| s.name == *name) {
                return Err(Error::msg(format!(
                    "the model has no input named '{name}' (its inputs: {})",
                    specs
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let ordered = specs
            .iter()
            .map(|s| {
                inputs
                    .iter()
                    .find(|(n, _)| *n == s.name)
                    .map(|(_, t)| t.clone())
                    .ok_or_else(|| {
                        Error::msg(format!("input '{}' is missing (expected {s})", s.name))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let outs = self.run(&ordered)?;
        Ok(self
            .outputs()
            .into_iter()
            .map(|s| s.name)
            .zip(outs)
            .collect())
    }

    /// [`Model::run`] without blocking: host-side values computed on a GPU are read back with
    /// `await` (the browser's way).
    pub async fn run_async(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        let device = self.device();
        if inputs.len() != g.inputs.len() {
            return Err(Error::msg(format!(
                "the model takes {} input{} ({}), got {}",
                g.inputs.len(),
                if g.inputs.len() == 1 { "" } else { "s" },
                self.inputs()
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                inputs.len()
            )));
        }
        let mut env: Vec<Option<Tensor>> = vec![None; g.values.len()];
        for (&id, x) in g.inputs.iter().zip(inputs) {
            self.check_input(id, x)?;
            env[id] = Some(if x.device() == device {
                x.clone()
            } else {
                x.to(&device)?
            });
        }
        for (k, node) in g.nodes.iter().enumerate() {
            if !g.runs(k) {
                continue;
            }
            let mut ins: Vec<Option<Tensor>> = node
                .inputs
                .iter()
                .map(|i| {
                    i.map(|i| {
                        env[i]
                            .clone()
                            .or_else(|| self.placed[i].clone())
                            .ok_or_else(|| {
                                Error::msg(format!(
                                    "internal: value '{}' is not available",
                                    g.values[i].name
                                ))
                            })
                    })
                    .transpose()
                })
                .collect::<Result<_>>()?;
            let mut host = vec![None; ins.len()];
            for &i in node.def.host_inputs {
                if let Some(Some(t)) = ins.get(i) {
                    host[i] = Some(if t.device().is_gpu() {
                        t.to_dtype(DType::I64)?.to_vec_async::<i64>().await?
                    } else {
                        ints(node, i, t)?
                    });
                }
            }
            // Data inputs on a GPU pull the CPU ones (constants, shape arithmetic) there.
            let target = ins
                .iter()
                .enumerate()
                .filter(|(i, _)| !node.def.host_inputs.contains(i))
                .find_map(|(_, t)| t.as_ref().map(Tensor::device).filter(Device::is_gpu));
            if let Some(dev) = target {
                for (i, t) in ins.iter_mut().enumerate() {
                    if let Some(x) = t {
                        if !node.def.host_inputs.contains(&i) && x.device() != dev {
                            *x = x.to(&dev)?;
                        }
                    }
                }
            }
            let ctx = Ctx { node, host };
            let outs = (node.def.run)(&ctx, &ins).map_err(|e| {
                if e.to_string().starts_with("ONNX ") {
                    e
                } else {
                    ctx.err(e)
                }
            })?;
            for (j, out) in node.outputs.iter().enumerate() {
                if let (Some(out), Some(t)) = (out, outs.get(j)) {
                    env[*out] = Some(t.clone());
                }
            }
            for &i in node.inputs.iter().flatten() {
                if g.last_use[i] == k {
                    env[i] = None;
                }
            }
        }
        g.outputs
            .iter()
            .map(|&o| {
                env[o]
                    .clone()
                    .or_else(|| self.placed[o].clone())
                    .ok_or_else(|| {
                        Error::msg(format!(
                            "internal: output '{}' was not computed",
                            g.values[o].name
                        ))
                    })
            })
            .collect()
    }

    fn check_input(&self, id: usize, x: &Tensor) -> Result<()> {
        let spec = self.spec(id);
        if x.dtype() != spec.dtype {
            return Err(Error::msg(format!(
                "input '{}' must be {} (the model declares {spec}), got {}",
                spec.name,
                spec.dtype,
                x.dtype()
            )));
        }
        if let Some(s) = &spec.shape {
            let fits = s.len() == x.ndim()
                && s.iter()
                    .zip(x.shape())
                    .all(|(d, &n)| d.is_none_or(|d| d == n));
            if !fits {
                let dims: Vec<Dim> = x.shape().iter().map(|&d| Some(d)).collect();
                return Err(Error::msg(format!(
                    "input '{}' has shape {}, the model declares {spec}",
                    spec.name,
                    show(&Some(dims))
                )));
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("producer", &self.graph.producer)
            .field("opset", &self.graph.opset)
            .field("nodes", &self.graph.nodes.len())
            .field("inputs", &self.inputs())
            .field("outputs", &self.outputs())
            .field("device", &self.device())
            .finish()
    }
}

/// A loaded model is a module: in trainable mode its initializers are its parameters and
/// buffers, under their ONNX names; a frozen model has none.
impl Module for Model {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        for p in &self.named {
            if let Some(t) = &self.placed[p.id] {
                f(&p.name, t, p.kind);
            }
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        for p in &self.named {
            if let Some(t) = &mut self.placed[p.id] {
                f(&p.name, t, p.kind);
            }
        }
    }
}

/// Reads a model file, refusing anything but a regular file before reading (a FIFO would
/// block, a device never ends).
fn read_model(path: &Path) -> Result<Vec<u8>> {
    let meta =
        std::fs::metadata(path).map_err(|e| Error::msg(format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(Error::msg(format!(
            "{}: not a regular file; an ONNX model file is expected",
            path.display()
        )));
    }
    std::fs::read(path).map_err(|e| Error::msg(format!("{}: {e}", path.display())))
}
