//! The op recorder behind [`super::export`]: while a module's forward pass runs under
//! [`capture`], every op that has an ONNX form records one node (or a few) here. Ops nest (a
//! `linear` calls `matmul`): only the outermost op records, so each op is exported once, in its
//! own terms. When no capture runs, an op pays one relaxed atomic load.

use super::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto, TensorProto};
use crate::tensor::StorageCell;
use crate::{Error, Result, Tensor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// Captures running on any thread (the fast check); the recorder itself is per thread.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static TRACER: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

/// An input of a recorded node.
pub(crate) enum In<'a> {
    /// A tensor: a traced value, a parameter (an initializer under its state_dict name) or a
    /// constant made inside the forward pass.
    T(&'a Tensor),
    /// An int64 constant, such as a Reshape's target shape; the exporter's dynamic-batch pass
    /// compares these between two traces.
    Ints(Vec<i64>),
}

/// A tensor a compiled graph holds as it was at capture: an integer tensor (folded at load),
/// a constant, or a tensor from outside the function that an op the recorder does not know read
/// (its result is a constant). The graph is stale once that storage is written.
pub(crate) struct Guard {
    storage: Weak<StorageCell>,
    version: u64,
}

impl Guard {
    /// Whether the storage was written since the capture (never, once it is gone).
    pub fn changed(&self) -> bool {
        self.storage
            .upgrade()
            .is_some_and(|c| c.version() != self.version)
    }
}

/// Why a capture failed: `own` when the traced function itself returned the error and the
/// recorder refused nothing (bad input: eager gives the same error).
pub(crate) struct Failed {
    pub error: Error,
    pub own: bool,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        Failed { error, own: false }
    }
}

impl From<Failed> for Error {
    fn from(f: Failed) -> Error {
        f.error
    }
}

/// What a capture collected.
pub(crate) struct Tracer {
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorProto>,
    /// Tensor id → value name.
    names: HashMap<u64, String>,
    /// Parameter and buffer ids → state_dict names.
    params: HashMap<u64, String>,
    /// With `live_params`, the parameters and buffers themselves: a tensor sharing storage with
    /// one that is not recorded from it (a detach, a view made under no_grad) must not become a
    /// constant.
    live: Vec<(String, Tensor)>,
    /// Int64 shape constants in recording order: (initializer index, values).
    pub shape_consts: Vec<(usize, Vec<i64>)>,
    /// Float/other constants in recording order, for the dynamic-batch comparison.
    pub data_consts: Vec<usize>,
    /// The opset being written (some ops' forms depend on it).
    pub opset: i64,
    depth: usize,
    counter: usize,
    /// The first op that could not be recorded.
    pub error: Option<Error>,
    /// Storages made before the capture have lower serial numbers than this.
    first_serial: u64,
    /// Tensors made before the capture have lower ids than this.
    first_id: u64,
    /// With `live_params`, float tensors from outside the function (made before the capture;
    /// not the input, not a parameter): the graph reads them live, under these names.
    pub captured: Vec<(String, Tensor)>,
    /// With `live_params`, what the graph holds as it was at capture ([`Guard`]), by storage.
    pub guards: HashMap<usize, Guard>,
    /// The storages of traced values (the inputs' and recorded ops' results), by address; the
    /// weak references keep a freed storage's address from being reused during the capture.
    traced_storages: HashMap<usize, Weak<StorageCell>>,
    /// Whether a traced value was read outside any recorded op (by an op the recorder does not
    /// know, under no_grad or for an integer tensor, which leaves no grad_fn to refuse); the
    /// capture fails then, after the outputs' own check names such an op where it can.
    pub unrecorded_read: bool,
    /// What the capture is for (`"ONNX export"`, `"compile"`), in its errors.
    pub what: &'static str,
    /// Parameters read on the host count as data-dependent too (a compiled graph reads the
    /// live parameters, so a value read from one at capture would go stale); an export's
    /// parameters are constants.
    pub live_params: bool,
}

impl Tracer {
    fn fresh(&mut self, hint: &str) -> String {
        self.counter += 1;
        format!("/{hint}_{}", self.counter)
    }

    /// Whether `t`'s storage was made before the capture began.
    fn outside(&self, t: &Tensor) -> bool {
        t.0.storage.serial() < self.first_serial
    }

    /// Holds `t` as it is now (see [`Guard`]).
    fn guard(&mut self, t: &Tensor) {
        guard_cell(&mut self.guards, &t.0.storage);
    }

    /// Whether `t` shares the storage of a traced value (an input, a recorded op's result)
    /// without being one: a detach, or a view made by an op the recorder does not know.
    fn untraced_view(&self, t: &Tensor) -> bool {
        !self.names.contains_key(&t.id())
            && self
                .traced_storages
                .contains_key(&(Arc::as_ptr(&t.0.storage) as usize))
    }

    /// Whether a compiled graph reads `t` live as a captured tensor: a float tensor from outside
    /// the function (a tensor the caller also passes as an input included; not a view of an
    /// input made inside).
    fn live_capture(&self, t: &Tensor) -> bool {
        self.live_params
            && t.dtype().is_float()
            && self.outside(t)
            && (t.id() < self.first_id || !self.untraced_view(t))
    }

    /// Whether `t`'s storage was made during the capture (by the forward pass).
    pub fn made_inside(&self, t: &Tensor) -> bool {
        !self.outside(t)
    }

    /// The value name of `t`, adding it as an initializer when it is a parameter or a constant.
    fn name_of(&mut self, t: &Tensor) -> Result<String> {
        if let Some(n) = self.names.get(&t.id()) {
            return Ok(n.clone());
        }
        if let Some(p) = self.params.get(&t.id()).cloned() {
            if self.live_params && !t.dtype().is_float() {
                // Integer parameters and buffers are folded at load.
                self.guard(t);
            }
            self.initializers.push(super::tensor::to_proto(&p, t)?);
            self.names.insert(t.id(), p.clone());
            return Ok(p);
        }
        if self.live_capture(t) {
            // Read live, as a parameter is: in-place updates are seen, gradients flow to it.
            let name = format!("/captured_{}", self.captured.len());
            self.initializers.push(super::tensor::to_proto(&name, t)?);
            self.names.insert(t.id(), name.clone());
            self.captured.push((name.clone(), t.clone()));
            return Ok(name);
        }
        if t.grad_fn().is_some() {
            return Err(Error::msg(format!(
                "{}: a {} tensor of shape {:?} comes from an op the exporter does not record ({}); \
                 only the ops listed in docs/onnx.md export",
                self.what,
                t.dtype(),
                t.shape(),
                t.grad_fn().map(|g| g.name()).unwrap_or_default()
            )));
        }
        if self.untraced_view(t) {
            return Err(Error::msg(format!(
                "{}: a {} tensor of shape {:?} shares the storage of a value computed from the inputs without being recorded from it (a detach, or a view made by an op the recorder does not know); a graph would hold one call's value",
                self.what,
                t.dtype(),
                t.shape()
            )));
        }
        if let Some(why) = self.not_constant(t) {
            return Err(Error::msg(format!(
                "{}: a {} tensor of shape {:?} {why}",
                self.what,
                t.dtype(),
                t.shape()
            )));
        }
        if self.live_params {
            self.guard(t);
        }
        let name = self.fresh("const");
        self.data_consts.push(self.initializers.len());
        self.initializers.push(super::tensor::to_proto(&name, t)?);
        self.names.insert(t.id(), name.clone());
        Ok(name)
    }

    fn ints(&mut self, v: Vec<i64>) -> Result<String> {
        let name = self.fresh("shape");
        let n = v.len();
        let t = Tensor::from_vec(v.clone(), [n], &crate::Device::Cpu)?;
        self.shape_consts.push((self.initializers.len(), v));
        self.initializers.push(super::tensor::to_proto(&name, &t)?);
        Ok(name)
    }

    /// Why a compiled graph cannot hold `t` (no recorded op made it; not the input, not a
    /// parameter, not read live from outside the function) as a constant: a leaf made inside
    /// the function that requires grad would lose its gradient. `None` for an export (its
    /// parameters are constants) and for a true constant.
    fn not_constant(&self, t: &Tensor) -> Option<String> {
        (self.live_params && t.is_leaf() && t.requires_grad()).then(|| {
            "that requires grad was made inside the forward pass and is neither its input nor a parameter (its gradient would be lost; register it as a parameter, or pass it as an input)".into()
        })
    }

    /// True when every tensor here is a constant (not an input, not computed from one, not a
    /// parameter, not read live from outside the function): an op on those is a constant too,
    /// and is not recorded (its result becomes an initializer where it meets the model's data;
    /// a compiled graph guards what it was computed from).
    pub fn constants_only(&mut self, tensors: &[&Tensor]) -> bool {
        let all = !tensors.is_empty()
            && tensors.iter().all(|t| {
                !(self.names.contains_key(&t.id())
                    || self.params.contains_key(&t.id())
                    || t.grad_fn().is_some()
                    || self.not_constant(t).is_some()
                    || self.untraced_view(t)
                    || self.live_capture(t))
            });
        if all && self.live_params {
            tensors.iter().for_each(|t| self.guard(t));
        }
        all
    }

    /// Records `op` with `inputs`, naming `outputs` (tensors) as its results.
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[In],
        outputs: &[&Tensor],
        attrs: Vec<AttributeProto>,
    ) -> Result<()> {
        let tensors: Vec<&Tensor> = inputs
            .iter()
            .filter_map(|i| if let In::T(t) = i { Some(*t) } else { None })
            .collect();
        if self.constants_only(&tensors) {
            return Ok(());
        }
        let ins = inputs
            .iter()
            .map(|i| match i {
                In::T(t) => self.name_of(t),
                In::Ints(v) => self.ints(v.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let outs: Vec<String> = outputs.iter().map(|_| self.fresh(op)).collect();
        for (t, n) in outputs.iter().zip(&outs) {
            self.bind(t, n.clone());
        }
        self.raw(op, ins, outs, attrs);
        Ok(())
    }

    /// Records a node between value names (for ops that export as several nodes).
    pub fn raw(
        &mut self,
        op: &str,
        inputs: Vec<String>,
        outputs: Vec<String>,
        attrs: Vec<AttributeProto>,
    ) {
        let name = format!("{op}_{}", self.nodes.len());
        self.nodes.push(NodeProto {
            op_type: Some(op.into()),
            input: inputs,
            output: outputs,
            name: Some(name),
            attribute: attrs,
            ..Default::default()
        });
    }

    /// A name for a new intermediate value.
    pub fn value(&mut self, hint: &str) -> String {
        self.fresh(hint)
    }

    /// The name of an input of a multi-node export.
    pub fn input(&mut self, i: In) -> Result<String> {
        match i {
            In::T(t) => self.name_of(t),
            In::Ints(v) => self.ints(v),
        }
    }

    /// Names `t` as the value `name` (the last node of a multi-node export).
    pub fn bind(&mut self, t: &Tensor, name: String) {
        // A recorded view of a parameter or a captured tensor shares its storage: that storage
        // holds no value computed from the inputs.
        if !self.outside(t) {
            self.trace_storage(t);
        }
        self.names.insert(t.id(), name);
    }

    /// Marks `t`'s storage as holding a traced value.
    fn trace_storage(&mut self, t: &Tensor) {
        self.traced_storages
            .entry(Arc::as_ptr(&t.0.storage) as usize)
            .or_insert_with(|| Arc::downgrade(&t.0.storage));
    }

    /// The error for a traced value read outside any recorded op.
    pub fn unrecorded_read_error(&self) -> Error {
        Error::msg(format!(
            "{}: an op the recorder does not know (or a copy_ or a print) read a value computed from the inputs; a graph cannot hold its result",
            self.what
        ))
    }

    /// The end of a compile capture: a value the graph holds that was written during the
    /// capture fails it.
    fn finish(&mut self) {
        if self.error.is_some() || !self.live_params {
            return;
        }
        if self.guards.values().any(Guard::changed) {
            self.error = Some(Error::msg(format!(
                "{}: a tensor the graph would hold as a constant was written in place during the forward pass",
                self.what
            )));
        }
    }

    /// The value name of a traced tensor, if it is one.
    pub fn traced(&self, t: &Tensor) -> Option<String> {
        self.names.get(&t.id()).cloned()
    }
}

/// An op in progress under a capture; only the outermost records.
pub(crate) struct Scope {
    outermost: bool,
}

impl Drop for Scope {
    fn drop(&mut self) {
        TRACER.with(|t| {
            if let Ok(mut t) = t.try_borrow_mut() {
                if let Some(t) = t.as_mut() {
                    t.depth -= 1;
                }
            }
        });
    }
}

impl Scope {
    /// Records through `f` when this op is the outermost one; an error is kept for the end of
    /// the capture (the op itself still returns its result).
    pub fn record(&self, f: impl FnOnce(&mut Tracer) -> Result<()>) {
        if !self.outermost {
            return;
        }
        TRACER.with(|t| {
            if let Some(t) = t.borrow_mut().as_mut() {
                if t.error.is_none() {
                    if let Err(e) = f(t) {
                        t.error = Some(e);
                    }
                }
            }
        });
    }
}

/// Runs an op (`run`) and, under a capture where it is the outermost op, records its ONNX form
/// (`record`, given the result). The op's own result is returned either way.
#[inline]
pub(crate) fn traced(
    run: impl FnOnce() -> Result<Tensor>,
    record: impl FnOnce(&mut Tracer, &Tensor) -> Result<()>,
) -> Result<Tensor> {
    let trace = scope();
    let out = run()?;
    if let Some(t) = &trace {
        t.record(|r| record(r, &out));
    }
    Ok(out)
}

/// Whether a capture runs on this thread: ops that fuse others then run them one by one, so that
/// each is recorded. (Another thread's capture changes nothing here.)
pub(crate) fn capturing() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
        && TRACER.with(|t| t.try_borrow().map_or(true, |t| t.is_some()))
}

/// Enters an op: `None` (one relaxed load) unless a capture runs on this thread.
#[inline]
pub(crate) fn scope() -> Option<Scope> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    // While a node is being recorded the tracer is borrowed: the ops the recording itself runs
    // (reading a parameter back) are not part of the model.
    TRACER.with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        let t = t.as_mut()?;
        t.depth += 1;
        Some(Scope {
            outermost: t.depth == 1,
        })
    })
}

/// Called by the host reads a user can make (`to_vec`, `item`): in the forward pass itself
/// (outside any op) a read of a value computed from the inputs (or, for `compile`, of a
/// parameter) makes what follows depend on data the graph cannot see, so the capture fails
/// rather than bake one run's value (or branch) into the graph. Reads inside an op (its own
/// checks) are part of the op, which records itself.
pub(crate) fn host_read(t: &Tensor, op: &str) {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    TRACER.with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else {
            return;
        };
        let Some(r) = r.as_mut() else { return };
        let traced = r.names.contains_key(&t.id())
            || t.grad_fn().is_some()
            || (r.live_params && r.params.contains_key(&t.id()));
        if r.depth == 0 && r.error.is_none() && traced {
            r.error = Some(Error::msg(format!(
                "{}: the forward pass reads a {} tensor of shape {:?} on the host ({op}); a graph cannot hold a value (or a branch) known only at run time",
                r.what,
                t.dtype(),
                t.shape()
            )));
        }
    });
}

/// Holds `cell` as it is now, once per storage.
fn guard_cell(guards: &mut HashMap<usize, Guard>, cell: &Arc<StorageCell>) {
    guards
        .entry(Arc::as_ptr(cell) as usize)
        .or_insert_with(|| Guard {
            storage: Arc::downgrade(cell),
            version: cell.version(),
        });
}

/// Runs `f` on this thread's compile capture (`live_params`), if one runs.
fn with_compile<R>(f: impl FnOnce(&mut Tracer) -> R) -> Option<R> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    TRACER.with(|r| {
        let mut r = r.try_borrow_mut().ok()?;
        r.as_mut().filter(|r| r.live_params).map(f)
    })
}

/// Called when an op reads a storage. Recorded ops read inside their scope; a read outside any
/// (an op the recorder does not know) of a traced value fails a compile capture, and one of a
/// tensor from outside the function guards it: the op's result becomes a constant.
#[inline]
pub(crate) fn storage_read(cell: &Arc<StorageCell>) {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    with_compile(|r| {
        if r.depth != 0 {
            return;
        }
        if r.traced_storages
            .contains_key(&(Arc::as_ptr(cell) as usize))
        {
            r.unrecorded_read = true;
        } else if cell.serial() < r.first_serial {
            guard_cell(&mut r.guards, cell);
        }
    });
}

/// Called before an in-place write: under a compile capture, a write into a tensor from
/// outside the function (an input, a captured tensor, a gradient; not the module's parameters
/// and buffers, which the compiler copies and restores) is refused before it happens, and fails
/// the capture, so that the eager call that follows makes it once.
pub(crate) fn before_write(t: &Tensor, op: &str) -> Result<()> {
    let refused = with_compile(|r| {
        if r.live.iter().any(|(_, p)| p.shares_storage_with(t)) {
            // The module's state: copied before the capture and restored by the compiler.
            return None;
        }
        let key = Arc::as_ptr(&t.0.storage) as usize;
        let why = if r.traced_storages.contains_key(&key) {
            format!(
                "{}: the forward pass writes in place ({op}) an input or a value computed from one; a graph holds no in-place updates (use the out-of-place op)",
                r.what
            )
        } else if r.outside(t) {
            format!(
                "{}: the forward pass writes in place ({op}) a tensor it did not make (a tensor it captured, a gradient, an optimizer's parameter); a graph holds no in-place updates",
                r.what
            )
        } else {
            // A constant the pass made and fills (guarded if a recorded op read it).
            return None;
        };
        r.error.get_or_insert_with(|| Error::msg(why.clone()));
        Some(why)
    })
    .flatten();
    match refused {
        Some(why) => Err(Error::msg(why)),
        None => Ok(()),
    }
}

/// Called by what changes state a graph does not hold (setting a gradient): fails a compile
/// capture, and is `true` there: the change is not made (the eager call that follows makes it).
pub(crate) fn side_effect(what: &str) -> bool {
    with_compile(|r| {
        let why = format!(
            "{}: the forward pass {what}; a graph holds no such update",
            r.what
        );
        r.error.get_or_insert_with(|| Error::msg(why));
    })
    .is_some()
}

/// Called when an op gives its result its own backward rule: outside any recorded op (a
/// composite op that does not record itself) while the recorder already traced that result
/// from the op's parts, a compiled graph would differentiate the parts instead, so the capture
/// fails.
pub(crate) fn own_gradient(out: &Tensor, op: &str) {
    with_compile(|r| {
        if r.depth == 0 && r.error.is_none() && r.names.contains_key(&out.id()) {
            r.error = Some(Error::msg(format!(
                "{}: {op} has its own gradient but is recorded as the ops it runs; a graph would differentiate those instead",
                r.what
            )));
        }
    });
}

/// Refuses `what` (a backward pass, an optimizer step) inside any capture, before it changes
/// anything.
pub(crate) fn refuse_under_capture(what: &str) -> Result<()> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return Ok(());
    }
    let why = TRACER.with(|r| {
        let mut r = r.try_borrow_mut().ok()?;
        let r = r.as_mut()?;
        let why = format!(
            "{}: {what} inside the traced forward pass; a graph holds the forward pass only",
            r.what
        );
        r.error.get_or_insert_with(|| Error::msg(why.clone()));
        Some(why)
    });
    match why {
        Some(why) => Err(Error::msg(why)),
        None => Ok(()),
    }
}

/// Called when the default generator draws: a random op in the forward pass would be one
/// fixed draw in the graph, so the capture fails.
pub(crate) fn random_draw() {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    TRACER.with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else {
            return;
        };
        if let Some(r) = r.as_mut().filter(|r| r.error.is_none()) {
            r.error = Some(Error::msg(format!(
                "{}: the forward pass draws random numbers (randn, rand, dropout in training mode, ...); a graph would repeat one draw",
                r.what
            )));
        }
    });
}

/// Runs `f` with inputs named `input_names` and parameters named by `params`, recording its
/// ops; returns `f`'s outputs and the recording. `what` names the capture in its errors;
/// `live_params` makes host reads of parameters fail it too ([`host_read`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn capture(
    inputs: &[Tensor],
    input_names: &[String],
    params: Vec<(String, Tensor)>,
    opset: i64,
    what: &'static str,
    live_params: bool,
    f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
) -> std::result::Result<(Vec<Tensor>, Tracer), Failed> {
    let already = TRACER.with(|t| t.borrow().is_some());
    if already {
        return Err(Error::msg(format!(
            "{what}: an export or a compile capture is already running on this thread"
        ))
        .into());
    }
    let first_serial = StorageCell::next_serial();
    let first_id = Tensor::next_id();
    let mut tracer = Tracer {
        nodes: Vec::new(),
        initializers: Vec::new(),
        names: HashMap::new(),
        live: if live_params {
            params.clone()
        } else {
            Vec::new()
        },
        params: params.into_iter().map(|(n, t)| (t.id(), n)).collect(),
        shape_consts: Vec::new(),
        data_consts: Vec::new(),
        opset,
        depth: 0,
        counter: 0,
        error: None,
        what,
        live_params,
        first_serial,
        first_id,
        captured: Vec::new(),
        guards: HashMap::new(),
        traced_storages: HashMap::new(),
        unrecorded_read: false,
    };
    // Fresh handles for the inputs, so that a parameter or a repeated tensor passed as an input
    // is still named as that input. Float inputs require grad (and the pass runs with grad on),
    // so that anything computed from an input or a parameter by an op that does not record
    // carries a grad_fn and is refused instead of being baked in as a constant.
    let handles: Vec<Tensor> = inputs
        .iter()
        .map(|x| {
            let h = x.detach();
            if h.dtype().is_float() {
                h.requires_grad_(true)
            } else {
                h
            }
        })
        .collect();
    for (x, n) in handles.iter().zip(input_names) {
        tracer.trace_storage(x);
        tracer.names.insert(x.id(), n.clone());
    }
    TRACER.with(|t| *t.borrow_mut() = Some(tracer));
    ACTIVE.fetch_add(1, Ordering::Relaxed);
    /// Ends the capture however `f` ends (a panic included): the thread's recorder is taken
    /// down and the global count restored, so the next export starts clean.
    struct Stop;
    impl Stop {
        fn take(&self) -> Option<Tracer> {
            TRACER.with(|t| t.try_borrow_mut().ok().and_then(|mut t| t.take()))
        }
    }
    impl Drop for Stop {
        fn drop(&mut self) {
            self.take();
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let stop = Stop;
    let out = {
        let _grad = crate::enable_grad();
        f(&handles)
    };
    let mut tracer = stop
        .take()
        .ok_or_else(|| Error::msg(format!("{what}: the recorder was lost")))?;
    drop(stop);
    tracer.finish();
    match out {
        Ok(out) => Ok((out, tracer)),
        // The recorder's reason when it refused something (the refusal may be what failed).
        Err(e) => Err(match tracer.error.take() {
            Some(error) => Failed { error, own: false },
            None if tracer.unrecorded_read => Failed {
                error: tracer.unrecorded_read_error(),
                own: false,
            },
            None => Failed {
                error: e,
                own: true,
            },
        }),
    }
}

/// An INT attribute.
pub(crate) fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

/// An INTS attribute.
pub(crate) fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(AttributeType::Ints as i32),
        ..Default::default()
    }
}

/// A FLOAT attribute.
pub(crate) fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(v),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    }
}

/// A STRING attribute.
pub(crate) fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(AttributeType::String as i32),
        ..Default::default()
    }
}
