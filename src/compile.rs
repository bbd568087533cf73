//! Compiled forward passes, `torch.compile` for wgtorch: [`compile_module`] compiles a module's
//! forward pass (in evaluation or training mode), [`compile`] a function of tensors.
//!
//! The first call with a new input signature (shapes, dtypes, devices, and a module's training
//! flags) traces the forward pass
//! op by op into a graph (the ONNX exporter's recorder: wgtorch's graph form is ONNX's), checks
//! and optimises it with the ONNX importer (shape inference, `Conv → [Add →] Relu` chains fused
//! into one convolution, trees of elementwise ops fused into one generated kernel,
//! intermediates freed at their last use), runs the graph and compares
//! its outputs with the traced eager pass before it is used. Later calls with that signature
//! run the graph. The graph reads the module's live parameters and buffers, and the float
//! tensors the function captured, so optimizer steps
//! and `load_state_dict` are seen; replacing a parameter tensor recompiles, and so does writing
//! a value the graph holds as it was at capture (an integer tensor it read, a tensor an op the
//! recorder does not know read).
//!
//! The graph's outputs carry autograd to the parameters, the captured tensors and the inputs,
//! and each fused tree of elementwise nodes backpropagates through generated kernels too (one
//! per input that needs a gradient, see [`FusedProgram`](crate::ops::fused::FusedProgram)), so
//! `loss.backward()` and the optimizer run as in eager mode.
//!
//! What a graph cannot hold runs eagerly for that signature, with the reason kept for
//! [`CompiledModule::explain`] (as `torch._dynamo.explain` reports graph breaks): a host read
//! of a computed value in the forward pass (`item`, `to_vec`: a data-dependent branch), a
//! random draw (dropout in training mode), batch_norm in training mode, a write into a buffer (a
//! counter) or into anything the forward pass did not make, an in-place write into a value
//! computed from the inputs, a backward pass, an optimizer step or a gradient set inside it, a
//! tensor that requires grad made inside it (its gradient would be lost), a detach of a value
//! computed from the inputs (a graph would hold one call's value), an op the recorder does not
//! know, an op with its own gradient that the recorder would record as its parts (`clamp` with
//! tensor bounds), autocast, more signatures than [`CompileOptions::cache_size_limit`], a graph
//! that goes stale on more calls than that. The capture is undone before such a call runs eagerly:
//! the random generator and the buffers are as if it never ran (the buffers are copied for that
//! while a graph is built; a forward pass that writes a parameter in place is an error; a write
//! into anything else from outside is refused before it happens). With
//! [`CompileOptions::fullgraph`] those are errors instead, and the call changes nothing. A
//! compiled call never returns another result than the checked graph's.
//!
//! A function is traced as `jax.jit` traces one: what it reads from the host (a flag, a
//! `RefCell`, a tensor it fetches through one) is what the first call with a signature read.
//! The recorder is the calling thread's: a traced pass should not hand its tensors to other
//! threads (what they compute is not seen). A compiled function called inside another's
//! capture is part of that graph.
//!
//! ```
//! use wgtorch::nn::{Conv2d, Conv2dOptions, ModuleExt, Sequential, ReLU};
//! use wgtorch::{compile::compile_module, Device, Tensor};
//! let dev = Device::Cpu;
//! let mut net = Sequential::new()
//!     .append(Conv2d::with_options(3, 8, 3, Conv2dOptions { padding: 1.into(), ..Default::default() }, &dev)?)
//!     .append(ReLU::new());
//! net.eval();
//! let fast = compile_module(&net);
//! let x = Tensor::randn([2, 3, 8, 8], &dev)?;
//! let (a, b) = (fast.forward(&x)?, net.forward(&x)?); // the first call traces and checks
//! assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?); // conv + relu fused: the same bits
//! fast.forward(&Tensor::randn([4, 3, 8, 8], &dev)?)?; // a new batch size: a second graph
//! assert_eq!((fast.stats().graphs, fast.stats().recompiles), (2, 1));
//! # Ok::<(), wgtorch::Error>(())
//! ```

use crate::nn::{Forward, Module, ModuleExt};
use crate::onnx::trace::Guard;
use crate::onnx::{export, ExportOptions, Model};
use crate::{DType, Device, Error, Result, Tensor};
use parking_lot::Mutex;
use prost::Message;
use std::fmt;
use std::sync::Arc;

/// [`compile_module_with`]'s and [`compile_with`]'s options; `Default` is PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Input signatures compiled per module or function before further new ones run eagerly
    /// (`torch._dynamo.config.cache_size_limit`, 8).
    pub cache_size_limit: usize,
    /// Whether what cannot be captured is an error instead of an eager call
    /// (`torch.compile(fullgraph=True)`).
    pub fullgraph: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            cache_size_limit: 8,
            fullgraph: false,
        }
    }
}

/// Counters of a [`CompiledModule`] or [`CompiledFn`], as `torch._dynamo.utils.counters`
/// reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Graphs compiled (each new signature, and each signature again after a parameter or
    /// buffer was replaced).
    pub graphs: usize,
    /// Graphs compiled after the first.
    pub recompiles: usize,
    /// Calls that ran a cached graph.
    pub cache_hits: usize,
    /// Calls that ran the module eagerly (see [`CompiledModule::explain`] for why).
    pub eager_calls: usize,
}

/// What [`CompiledModule::explain`] and [`CompiledFn::explain`] report.
#[derive(Clone, Debug)]
pub struct Explanation {
    /// The graphs in the cache: signature, nodes, nodes fused into others.
    pub graphs: Vec<GraphSummary>,
    /// Why calls ran eagerly: signature and reason, once per distinct pair.
    pub eager: Vec<(String, String)>,
    /// The counters.
    pub stats: CompileStats,
}

/// One cached graph.
#[derive(Clone, Debug)]
pub struct GraphSummary {
    /// The input signature, e.g. `float32[2, 3, 32, 32] on cpu`.
    pub signature: String,
    /// Nodes in the graph.
    pub nodes: usize,
    /// Nodes that run inside a later one (a convolution's residual add and ReLU, the
    /// elementwise nodes of a fused kernel).
    pub fused_nodes: usize,
    /// The op types of each tree of elementwise nodes run as one kernel
    /// ([`Model::fused_groups`]).
    pub fused_groups: Vec<Vec<String>>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "graphs: {} ({} recompiles), cache hits: {}, eager calls: {}",
            s.graphs, s.recompiles, s.cache_hits, s.eager_calls
        )?;
        for g in &self.graphs {
            writeln!(
                f,
                "graph for {}: {} nodes, {} fused",
                g.signature, g.nodes, g.fused_nodes
            )?;
            for group in &g.fused_groups {
                writeln!(f, "  one kernel: {}", group.join(" -> "))?;
            }
        }
        for (sig, why) in &self.eager {
            writeln!(f, "eager for {sig}: {why}")?;
        }
        Ok(())
    }
}

/// The module's parameters and buffers before a capture: their versions, and copies of the
/// buffers' values to put back if the capture fails or wrote one (parameters are not copied:
/// a forward pass that writes one in place cannot be undone, and is an error).
struct Snapshot(Vec<(String, Tensor, u64, Option<Tensor>)>);

impl Snapshot {
    fn take(module: Option<&dyn Module>) -> Result<Snapshot> {
        let mut all = Vec::new();
        if let Some(m) = module {
            m.visit(&mut |n, t, kind| all.push((n.to_string(), t.clone(), kind)));
        }
        let _g = crate::no_grad();
        all.into_iter()
            .map(|(n, t, kind)| {
                let copy = match kind {
                    crate::nn::Kind::Buffer => Some(t.detach().copy()?),
                    crate::nn::Kind::Param => None,
                };
                Ok((n, t.clone(), t.version(), copy))
            })
            .collect::<Result<_>>()
            .map(Snapshot)
    }

    /// The first tensor whose version moved.
    fn changed(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(_, t, v, _)| t.version() != *v)
            .map(|(n, ..)| n.as_str())
    }

    /// Puts back the values of the buffers that changed; an error (after that) if a parameter
    /// did.
    fn restore(&self) -> Result<()> {
        let _g = crate::no_grad();
        let mut written = None;
        for (name, t, v, copy) in &self.0 {
            if t.version() == *v {
                continue;
            }
            match copy {
                Some(copy) => {
                    t.copy_(copy)?;
                }
                None => written = written.or(Some(name)),
            }
        }
        match written {
            Some(name) => Err(Error::msg(format!(
                "compile: the forward pass wrote the parameter '{name}' in place while it was captured, which cannot be undone; run this module eagerly"
            ))),
            None => Ok(()),
        }
    }
}

/// Why a capture that wrote `name` in place runs eagerly.
fn write_reason(name: &str) -> String {
    format!(
        "the forward pass writes '{name}' in place (a counter, running statistics); a graph holds no in-place updates of the module's state"
    )
}

/// The input signature a graph is specialised for, and the modules' training flags (a graph
/// traced in training mode holds batch statistics where one traced in eval mode reads the
/// running ones).
#[derive(Clone, PartialEq, Eq)]
struct Signature {
    inputs: Vec<(Vec<usize>, DType, Device)>,
    training: Vec<bool>,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .inputs
            .iter()
            .map(|(s, d, dev)| format!("{d}{s:?} on {dev}"))
            .collect();
        f.write_str(&parts.join(", "))?;
        if self.training.contains(&true) {
            f.write_str(" (training)")?;
        }
        Ok(())
    }
}

/// The training flags of the module and its descendants, pre-order.
fn training_flags(module: Option<&dyn Module>) -> Vec<bool> {
    module.map_or_else(Vec::new, |m| {
        m.named_modules()
            .into_iter()
            .filter_map(|(_, m)| m.training_flag())
            .collect()
    })
}

enum Plan {
    /// The graph, and what it holds as it was at capture.
    Graph(Arc<Model>, Vec<Guard>),
    Eager(String),
    /// A graph dropped because a value it held was written (removed at once).
    Stale,
}

struct Entry {
    sig: Signature,
    plan: Plan,
}

#[derive(Default)]
struct State {
    /// The ids of the module's parameters and buffers the graphs read (the guard).
    params: Vec<u64>,
    entries: Vec<Entry>,
    /// How often each signature's graph went stale.
    stale: Vec<(Signature, usize)>,
    stats: CompileStats,
    eager: Vec<(String, String)>,
}

impl State {
    fn note_eager(&mut self, sig: &Signature, why: &str) {
        self.stats.eager_calls += 1;
        let pair = (sig.to_string(), why.to_string());
        if !self.eager.contains(&pair) {
            self.eager.push(pair);
        }
    }
}

/// A function of tensors, as [`compile`] takes it.
type Function<'f> = dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + 'f;

/// The graphs of one compiled module or function, by signature.
struct Cache {
    options: CompileOptions,
    state: Mutex<State>,
}

/// A module whose forward pass runs as compiled graphs, one per input signature; made by
/// [`compile_module`]. It borrows the module, so the module keeps training in between (its
/// parameters are shared, not copied).
pub struct CompiledModule<'a, M: Forward + ?Sized> {
    module: &'a M,
    cache: Cache,
}

/// A function of tensors that runs as compiled graphs, one per input signature; made by
/// [`compile`].
pub struct CompiledFn<F> {
    f: F,
    cache: Cache,
}

/// Compiles `module`'s forward pass with the default [`CompileOptions`] (see the
/// [module docs](self)).
pub fn compile_module<M: Forward + ?Sized>(module: &M) -> CompiledModule<'_, M> {
    compile_module_with(module, CompileOptions::default())
}

/// [`compile_module`] with options.
pub fn compile_module_with<M: Forward + ?Sized>(
    module: &M,
    options: CompileOptions,
) -> CompiledModule<'_, M> {
    CompiledModule {
        module,
        cache: Cache::new(options),
    }
}

/// Compiles a function of tensors (`torch.compile(fn)`) with the default [`CompileOptions`]:
/// [`CompiledFn::call`] runs it as a graph per input signature (see the [module docs](self)).
/// Tensors the function captures are read live (an in-place update is seen, gradients reach
/// them); what it reads from the host is fixed by the call that traced it.
///
/// ```
/// use wgtorch::{compile, Device, Tensor};
/// let dev = Device::Cpu;
/// let w = Tensor::randn([3], &dev)?.requires_grad_(true); // captured, read live
/// let gate = compile(|xs: &[Tensor]| Ok(vec![xs[0].mul(&w)?.sigmoid()?.mul(&xs[1])?]));
/// let (x, r) = (Tensor::randn([4, 3], &dev)?, Tensor::randn([4, 3], &dev)?);
/// for _ in 0..2 {
///     let y = gate.call(&[x.clone(), r.clone()])?.remove(0); // traced once, then replayed
///     let eager = x.mul(&w)?.sigmoid()?.mul(&r)?;
///     assert_eq!(y.to_vec::<f32>()?, eager.to_vec::<f32>()?); // one fused kernel, the same bits
/// }
/// gate.call(&[x.clone(), r])?[0].sum_all()?.backward()?;
/// assert_eq!(w.grad().unwrap().shape(), [3]); // the captured leaf gets its gradient
/// assert_eq!((gate.stats().graphs, gate.stats().cache_hits), (1, 2));
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn compile<F: Fn(&[Tensor]) -> Result<Vec<Tensor>>>(f: F) -> CompiledFn<F> {
    compile_with(f, CompileOptions::default())
}

/// [`compile`] with options.
pub fn compile_with<F: Fn(&[Tensor]) -> Result<Vec<Tensor>>>(
    f: F,
    options: CompileOptions,
) -> CompiledFn<F> {
    CompiledFn {
        f,
        cache: Cache::new(options),
    }
}

fn param_ids(module: Option<&dyn Module>) -> Vec<u64> {
    let mut ids = Vec::new();
    if let Some(m) = module {
        m.visit(&mut |_, t, _| ids.push(t.id()));
    }
    ids
}

impl<M: Forward + ?Sized> CompiledModule<'_, M> {
    /// The module's forward pass on `x`: the cached graph for `x`'s signature, compiled on the
    /// first call with it; eagerly where no graph can be made (see [`Self::explain`]).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let module = self.module;
        let forward = |xs: &[Tensor]| Ok(vec![module.forward(&xs[0])?]);
        let mut out = self
            .cache
            .call(Some(module.as_dyn()), std::slice::from_ref(x), &forward)?;
        Ok(out.remove(0))
    }

    /// The counters.
    pub fn stats(&self) -> CompileStats {
        self.cache.state.lock().stats
    }

    /// The cached graphs and why calls ran eagerly (`torch._dynamo.explain`).
    pub fn explain(&self) -> Explanation {
        self.cache.explain()
    }

    /// Drops every cached graph and the counters (`torch._dynamo.reset()`).
    pub fn reset(&self) {
        *self.cache.state.lock() = State::default();
    }
}

impl<F: Fn(&[Tensor]) -> Result<Vec<Tensor>>> CompiledFn<F> {
    /// The function on `inputs`: the cached graph for their signature, compiled on the first
    /// call with it; eagerly where no graph can be made (see [`Self::explain`]).
    pub fn call(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.cache.call(None, inputs, &self.f)
    }

    /// The counters.
    pub fn stats(&self) -> CompileStats {
        self.cache.state.lock().stats
    }

    /// The cached graphs and why calls ran eagerly (`torch._dynamo.explain`).
    pub fn explain(&self) -> Explanation {
        self.cache.explain()
    }

    /// Drops every cached graph and the counters (`torch._dynamo.reset()`).
    pub fn reset(&self) {
        *self.cache.state.lock() = State::default();
    }
}

impl Cache {
    fn new(options: CompileOptions) -> Cache {
        Cache {
            options,
            state: Mutex::new(State::default()),
        }
    }

    /// `f` on `inputs` (`module` holding the parameters and buffers it reads, if any): the
    /// cached graph for their signature, built on the first call with it, or `f` itself.
    fn call(
        &self,
        module: Option<&dyn Module>,
        inputs: &[Tensor],
        f: &Function,
    ) -> Result<Vec<Tensor>> {
        if crate::onnx::trace::capturing() {
            // Called inside another capture (a compiled function calling one): its ops are
            // that graph's.
            return f(inputs);
        }
        let sig = Signature {
            inputs: inputs
                .iter()
                .map(|x| (x.shape().to_vec(), x.dtype(), x.device()))
                .collect(),
            training: training_flags(module),
        };
        let autocast = inputs
            .iter()
            .find_map(|x| crate::amp::autocast_dtype(&x.device()));
        if let Some(dt) = autocast {
            let why = format!("autocast to {dt} is on (graphs are captured without autocast)");
            return self.eager(inputs, f, &sig, &why);
        }
        let model = {
            let mut st = self.state.lock();
            let ids = param_ids(module);
            if ids != st.params {
                // A parameter or buffer was replaced (not updated in place): the graphs read
                // the old tensors, so they go.
                st.entries.clear();
                st.params = ids;
            }
            // A graph holding a value that was written since is stale: it goes too. A signature
            // whose graphs keep going stale runs eagerly instead of recompiling every call.
            let limit = self.options.cache_size_limit;
            let State { entries, stale, .. } = &mut *st;
            for e in entries.iter_mut() {
                if let Plan::Graph(_, guards) = &e.plan {
                    if guards.iter().any(Guard::changed) {
                        let n = match stale.iter_mut().find(|(s, _)| *s == e.sig) {
                            Some((_, n)) => {
                                *n += 1;
                                *n
                            }
                            None => {
                                stale.push((e.sig.clone(), 1));
                                1
                            }
                        };
                        e.plan = if n > limit {
                            Plan::Eager(format!("a value the graph holds as it was at capture was written {n} times (recompiling each time would cost more than running eagerly)"))
                        } else {
                            Plan::Stale
                        };
                    }
                }
            }
            entries.retain(|e| !matches!(e.plan, Plan::Stale));
            match st.entries.iter().find(|e| e.sig == sig).map(|e| &e.plan) {
                Some(Plan::Graph(m, _)) => {
                    let m = m.clone();
                    st.stats.cache_hits += 1;
                    Some(m)
                }
                Some(Plan::Eager(why)) => {
                    let why = why.clone();
                    drop(st);
                    return self.eager(inputs, f, &sig, &why);
                }
                // (Stale entries were removed above.)
                None | Some(Plan::Stale) if st.entries.len() >= self.options.cache_size_limit => {
                    drop(st);
                    let why = format!(
                        "cache_size_limit ({}) reached: more input signatures than that",
                        self.options.cache_size_limit
                    );
                    return self.eager(inputs, f, &sig, &why);
                }
                None | Some(Plan::Stale) => None,
            }
        };
        if let Some(m) = model {
            return m.run(inputs);
        }
        // A new signature: trace, build, check, cache.
        let (plan, out) = self.build(module, inputs, f, &sig)?;
        let mut st = self.state.lock();
        if let Plan::Graph(..) = plan {
            st.stats.graphs += 1;
            if st.stats.graphs > 1 {
                st.stats.recompiles += 1;
            }
        }
        if let Plan::Eager(why) = &plan {
            st.note_eager(&sig, why);
        }
        st.entries.push(Entry { sig, plan });
        Ok(out)
    }

    /// Runs `f` itself (or, with `fullgraph`, refuses with `why`).
    fn eager(
        &self,
        inputs: &[Tensor],
        f: &Function,
        sig: &Signature,
        why: &str,
    ) -> Result<Vec<Tensor>> {
        self.refuse(sig, why)?;
        self.state.lock().note_eager(sig, why);
        f(inputs)
    }

    /// With `fullgraph`, the error for a call that cannot run as a graph.
    fn refuse(&self, sig: &Signature, why: &str) -> Result<()> {
        if self.options.fullgraph {
            return Err(Error::msg(format!(
                "compile (fullgraph): no graph for {sig}: {why}"
            )));
        }
        Ok(())
    }

    /// The plan for the signature of `inputs` (a checked graph, or eager with the reason) and
    /// the outputs on `inputs`; `Err` when `f` itself fails (the error eager gives).
    fn build(
        &self,
        module: Option<&dyn Module>,
        inputs: &[Tensor],
        f: &Function,
        sig: &Signature,
    ) -> Result<(Plan, Vec<Tensor>)> {
        // A compiled graph is never written to a file: it takes the newest opset the importer
        // reads, whose forms are closest to the ops (GELU is one `Gelu` node, run and
        // differentiated as eager's `gelu`, not the decomposition older opsets need).
        let options = ExportOptions {
            dynamic_batch: false,
            opset: *crate::onnx::OPSETS.end(),
            ..Default::default()
        };
        // A capture that fails may have drawn random numbers, or written a buffer in place (a
        // counter): the eager call then draws and writes what it would have without the attempt.
        let rng = crate::with_default_generator(|g| g.state());
        let state = Snapshot::take(module)?;
        let traced = match export::trace_model(module, inputs, f, &options, "compile", true) {
            Ok(t) => t,
            Err(failed) => {
                // A write into the module's state is the first reason (it may have made the
                // capture fail too, through the tensors the in-place op read).
                let written = state.changed().map(write_reason);
                crate::with_default_generator(|g| g.set_state(rng));
                state.restore()?;
                if failed.own && written.is_none() {
                    // The function's own error (bad input), as eager gives it. With fullgraph
                    // it is returned without an eager run, which could change state and fail.
                    if self.options.fullgraph {
                        return Err(failed.error);
                    }
                    // Should eager succeed, the capture made the difference: that is the reason.
                    let out = f(inputs)?;
                    return Ok((Plan::Eager(failed.error.to_string()), out));
                }
                let why = written.unwrap_or_else(|| failed.error.to_string());
                // A refused call changes nothing (so it does not run eagerly either).
                self.refuse(sig, &why)?;
                return Ok((Plan::Eager(why), f(inputs)?));
            }
        };
        if let Some(name) = state.changed() {
            // A graph would not repeat the write.
            let why = write_reason(name);
            state.restore()?;
            self.refuse(sig, &why)?;
            return Ok((Plan::Eager(why), f(inputs)?));
        }
        drop(state);
        let mut live = Vec::new();
        if let Some(m) = module {
            m.visit(&mut |n, t, _| live.push((n.to_string(), t.clone())));
        }
        live.extend(traced.captured.iter().cloned());
        // The parameters' device (the first input's, or captured tensor's, for a function or a
        // module without any).
        let device = live
            .first()
            .map(|(_, t)| t)
            .or(inputs.first())
            .map_or(Device::Cpu, Tensor::device);
        let built =
            Model::load_compiled(&traced.model.encode_to_vec(), &device, &live).and_then(|m| {
                let out = m.run(inputs)?;
                let (_, expected) = &traced.cases[0];
                export::same_outputs("compile", &out, expected, &traced.output_names)?;
                Ok((m, out))
            });
        match built {
            Ok((m, out)) => Ok((Plan::Graph(Arc::new(m), traced.guards), out)),
            Err(e) => {
                let why = e.to_string();
                self.refuse(sig, &why)?;
                Ok((Plan::Eager(why), f(inputs)?))
            }
        }
    }

    /// The cached graphs and why calls ran eagerly.
    fn explain(&self) -> Explanation {
        let st = self.state.lock();
        Explanation {
            graphs: st
                .entries
                .iter()
                .filter_map(|e| match &e.plan {
                    Plan::Graph(m, _) => Some(GraphSummary {
                        signature: e.sig.to_string(),
                        nodes: m.node_counts().0,
                        fused_nodes: m.fused_nodes(),
                        fused_groups: m.fused_groups(),
                    }),
                    Plan::Eager(_) | Plan::Stale => None,
                })
                .collect(),
            eager: st.eager.clone(),
            stats: st.stats,
        }
    }
}
