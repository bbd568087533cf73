//! Reverse-mode autograd: graph nodes recorded by ops, a topological backward pass, grad mode.
//!
//! Every differentiable op records a [`Node`] on its output when an input requires grad and grad
//! mode is on; [`Tensor::backward`](crate::Tensor::backward) walks the graph once in reverse
//! topological order. [`no_grad`] / [`enable_grad`] are guards (PyTorch's context managers),
//! [`set_anomaly_enabled`] names the op whose backward produced a NaN, and [`gradcheck`] checks a
//! function's gradients against finite differences in f64.
//!
//! ```
//! use wgtorch::{autograd, Device, Tensor};
//! let w = Tensor::from_vec(vec![2.0f64, -1.0], [2], &Device::Cpu)?.requires_grad_(true);
//! let y = w.exp()?.mul(&w)?.sum_all()?; // sum(w · eʷ)
//! assert_eq!(y.grad_fn().map(|n| n.name()), Some("sum"));
//! y.backward()?;
//! let g = w.grad().unwrap().to_vec::<f64>()?; // (1 + w) eʷ
//! assert!((g[0] - 3.0 * 2f64.exp()).abs() < 1e-12 && g[1].abs() < 1e-12);
//! {
//!     let _guard = autograd::no_grad(); // with torch.no_grad():
//!     assert!(!autograd::is_grad_enabled() && w.exp()?.grad_fn().is_none());
//! }
//! autograd::gradcheck(|t| t[0].exp()?.mul(&t[0]), &[w.detach()], 1e-6, 1e-5, 1e-4)?;
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod grad_mode;
mod gradcheck;
mod hooks;
mod saved;
pub(crate) use grad_mode::set_grad_enabled;
pub use grad_mode::{
    enable_grad, is_anomaly_enabled, is_grad_enabled, no_grad, no_grad_scope, set_anomaly_enabled,
    GradModeGuard,
};
pub use gradcheck::gradcheck;
pub use hooks::{GradHook, HookHandle};
pub(crate) use saved::{Saved, SavedState};

use crate::shape::Layout;
use crate::{Error, Result, Tensor};
use parking_lot::Mutex;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// A backward rule: upstream gradient in, one optional gradient per input out.
type BackwardFn = Arc<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// A backward rule as ops write it: a plain `fn` (it captures nothing) given the state the op
/// saved and the upstream gradient.
pub(crate) type Rule<S> = fn(&S, &Tensor) -> Result<Vec<Option<Tensor>>>;

/// One recorded op in the graph: the inputs that need gradients and the rule that computes them.
pub struct Node {
    pub(crate) name: &'static str,
    pub(crate) inputs: Vec<Option<Tensor>>,
    backward: Mutex<Option<BackwardFn>>,
    created_at: Option<String>,
    /// For a view op: the input's shape and where the view sits in a contiguous tensor of that
    /// shape. Without `create_graph`, the engine adds the view's gradient into that region of
    /// one gradient buffer per input instead of running the rule, which would materialise a
    /// zero tensor of the input's size per view (quadratic for a loop over `narrow`s).
    view: Option<(Vec<usize>, Layout)>,
}

impl Node {
    /// The op's name, as PyTorch would print its grad_fn (`MulBackward`).
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{}Backward>", self.name)
    }
}

/// Attach a node to `out` if grad mode is on and any input requires grad. `saved` is everything
/// the rule keeps from the forward pass (tensors only as [`Saved`], checked for in-place changes
/// when the rule reads them); `rule` gets it back with the upstream gradient. The state and the
/// tensors in it are freed after the backward pass unless it retains the graph.
pub(crate) fn record<S: SavedState>(
    out: Tensor,
    name: &'static str,
    inputs: &[&Tensor],
    saved: S,
    rule: Rule<S>,
) -> Tensor {
    record_node(out, name, inputs, saved, rule, None)
}

/// [`record`] for a view op: `rel` places the view in a contiguous tensor of the input's shape
/// `base`. The gradient is the view's gradient scattered into zeros of `base` there: added in
/// place by the engine, or recorded as `strided_scatter` under `create_graph`.
pub(crate) fn record_view(
    out: Tensor,
    name: &'static str,
    input: &Tensor,
    base: Vec<usize>,
    rel: Layout,
) -> Tensor {
    let place = Some((base.clone(), rel.clone()));
    record_node(out, name, &[input], (base, rel), view_rule, place)
}

fn view_rule((base, rel): &(Vec<usize>, Layout), g: &Tensor) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![Some(g.strided_scatter(base, rel)?)])
}

fn record_node<S: SavedState>(
    out: Tensor,
    name: &'static str,
    inputs: &[&Tensor],
    saved: S,
    rule: Rule<S>,
    view: Option<(Vec<usize>, Layout)>,
) -> Tensor {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
        return out;
    }
    crate::onnx::trace::own_gradient(&out, name);
    let node = Node {
        view,
        name,
        inputs: inputs
            .iter()
            .map(|t| {
                if t.requires_grad() {
                    Some((*t).clone())
                } else {
                    None
                }
            })
            .collect(),
        backward: Mutex::new(Some(Arc::new(move |g: &Tensor| rule(&saved, g)))),
        created_at: if is_anomaly_enabled() {
            Some(std::backtrace::Backtrace::force_capture().to_string())
        } else {
            None
        },
    };
    out.with_grad_fn(Arc::new(node))
}

fn topo_order(root: &Tensor) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<(Tensor, bool)> = vec![(root.clone(), false)];
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(t.id()) {
            continue;
        }
        stack.push((t.clone(), true));
        if let Some(node) = t.grad_fn() {
            for inp in node.inputs.iter().flatten() {
                if !seen.contains(&inp.id()) {
                    stack.push((inp.clone(), false));
                }
            }
        }
    }
    order.reverse();
    order
}

/// Add `g` into `t`'s `.grad()`. As PyTorch's AccumulateGrad, the gradient a leaf keeps owns
/// its storage: an incoming gradient that another tensor can still reach (the same upstream
/// gradient sent to two leaves by `add`, a broadcast view from `sum`, the caller's own
/// `backward` gradient) is copied first, so that in-place updates of one `.grad()` (optimizers,
/// `clip_grad_norm_`) never change another tensor. `owned`: the engine made `g` in this pass
/// (a sum of contributions, a view's scattered gradient) and nothing else can reach it. A failed
/// sum leaves the old gradient in place.
fn accumulate(t: &Tensor, g: &Tensor, owned: bool, create_graph: bool) -> Result<()> {
    let g = if create_graph {
        g.clone()
    } else {
        let d = g.detach();
        // A rule's output: the engine's one handle on `g` and the storage's two (`g`, `d`);
        // anything more and someone else can reach it, and a broadcast view aliases itself. (A
        // transposed gradient, as matmul's backward makes for a weight, is kept as it is.)
        let shared = Arc::strong_count(&g.0) > 1 || Arc::strong_count(&d.0.storage) > 2;
        if !owned && (shared || !d.0.layout.is_non_overlapping_and_dense()) {
            let _guard = no_grad();
            d.copy()?
        } else {
            d
        }
    };
    let mut slot = t.0.grad.lock();
    let new = match slot.as_ref() {
        Some(old) => {
            let _guard = if create_graph { None } else { Some(no_grad()) };
            old.add(&g)?
        }
        None => g,
    };
    *slot = Some(new);
    Ok(())
}

/// A leaf's gradient is complete: accumulate it into `.grad()` and run its hooks.
fn finish_leaf(t: &Tensor, g: &Tensor, owned: bool, create_graph: bool) -> Result<()> {
    accumulate(t, g, owned, create_graph)?;
    t.run_post_grad_hooks()
}

/// The backward pass's schedule, as PyTorch's engine runs it: a tensor's node runs once every
/// node that used it has run, and among the ready ones the most recently created (the highest
/// [`Tensor::id`]) runs first. So a layer's weight gradients are done right after that layer's
/// backward, not after every earlier layer's. A leaf is accumulated (and its hooks run) as soon
/// as its last use has run.
struct Ready {
    /// How many recorded uses (node inputs) of each tensor have not run yet.
    uses: HashMap<u64, usize>,
    heap: BinaryHeap<u64>,
    tensors: HashMap<u64, Tensor>,
    /// Leaves whose last use has run, finished at the start of the next step of the pass (when
    /// the previous node's gradients are dropped, so a leaf's gradient is found unshared).
    final_leaves: Vec<Tensor>,
}

impl Ready {
    fn new(root: &Tensor) -> Ready {
        let order = topo_order(root);
        let mut uses = HashMap::new();
        for t in &order {
            if let Some(node) = t.grad_fn() {
                for inp in node.inputs.iter().flatten() {
                    *uses.entry(inp.id()).or_insert(0usize) += 1;
                }
            }
        }
        Ready {
            uses,
            heap: BinaryHeap::from([root.id()]),
            tensors: order.into_iter().map(|t| (t.id(), t)).collect(),
            final_leaves: Vec::new(),
        }
    }

    /// One use of `inp` has run. After its last, a leaf's gradient is final and a node is ready.
    fn used(&mut self, inp: &Tensor) {
        let left = self.uses.get_mut(&inp.id()).map(|n| {
            *n -= 1;
            *n
        });
        if left != Some(0) {
            return;
        }
        if inp.is_leaf() {
            self.final_leaves.push(inp.clone());
        } else {
            self.heap.push(inp.id());
        }
    }

    /// Accumulate the leaves whose gradients are final and run their hooks.
    fn finish_leaves(
        &mut self,
        grads: &mut HashMap<u64, (Tensor, bool)>,
        create_graph: bool,
    ) -> Result<()> {
        for leaf in std::mem::take(&mut self.final_leaves) {
            if let Some((g, owned)) = grads.remove(&leaf.id()) {
                finish_leaf(&leaf, &g, owned, create_graph)?;
            }
        }
        Ok(())
    }
}

/// Run the backward pass from `root` with upstream gradient `grad`.
pub(crate) fn backward(
    root: &Tensor,
    grad: Tensor,
    retain_graph: bool,
    create_graph: bool,
) -> Result<()> {
    let _p = crate::profiler::scope("backward");
    let _mode = GradModeGuard::new(create_graph);
    let mut ready = Ready::new(root);
    // Each pending gradient, and whether the engine owns its buffer (allocated here, aliased by
    // nothing else), so that view gradients may be added into it in place.
    let mut grads: HashMap<u64, (Tensor, bool)> = HashMap::new();
    grads.insert(root.id(), (grad, false));
    loop {
        ready.finish_leaves(&mut grads, create_graph)?;
        let Some(id) = ready.heap.pop() else {
            break;
        };
        let t = ready.tensors[&id].clone();
        let Some((g, owned)) = grads.remove(&t.id()) else {
            // No gradient reached this node: its inputs get none from it.
            if let Some(node) = t.grad_fn() {
                for inp in node.inputs.iter().flatten() {
                    ready.used(inp);
                }
            }
            continue;
        };
        let Some(node) = t.grad_fn() else {
            if t.requires_grad() {
                finish_leaf(&t, &g, owned, create_graph)?;
            }
            continue;
        };
        if t.retains_grad() {
            accumulate(&t, &g, false, create_graph)?;
        }
        let f = {
            let mut slot = node.backward.lock();
            let f = slot.clone();
            if !retain_graph {
                *slot = None;
            }
            f
        };
        let Some(f) = f else {
            return Err(Error::Autograd(
                "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.".into(),
            ));
        };
        if let (Some((base, rel)), Some(Some(inp)), false) =
            (&node.view, node.inputs.first(), create_graph)
        {
            let id = inp.id();
            let buf = match grads.remove(&id) {
                None => g.strided_scatter(base, rel)?,
                Some((prev, owned)) => {
                    let buf = if owned { prev } else { prev.fresh_copy()? };
                    let _plain = no_grad();
                    buf.with_layout(rel.clone()).add_(&g)?;
                    buf
                }
            };
            grads.insert(id, (buf, true));
            ready.used(inp);
            continue;
        }
        let input_grads = {
            let _p = crate::profiler::backward_node(node.name);
            saved::running(node.name, || f(&g))?
        };
        for (inp, ig) in node.inputs.iter().zip(input_grads) {
            let Some(inp) = inp else {
                continue;
            };
            let Some(ig) = ig else {
                ready.used(inp);
                continue;
            };
            if is_anomaly_enabled() && ig.dtype().is_float() && ig.has_non_finite()? {
                return Err(Error::Autograd(format!(
                    "Function '{}Backward' returned nan or inf values in its output. Its forward was created at:\n{}",
                    node.name,
                    node.created_at.as_deref().unwrap_or("(unknown)")
                )));
            }
            if ig.shape() != inp.shape() {
                return Err(Error::Autograd(format!(
                    "Function {}Backward returned an invalid gradient - got {:?} but expected shape compatible with {:?}",
                    node.name,
                    ig.shape(),
                    inp.shape()
                )));
            }
            let entry = match grads.remove(&inp.id()) {
                Some((prev, _)) => (prev.add(&ig)?, true),
                None => (ig, false),
            };
            grads.insert(inp.id(), entry);
            ready.used(inp);
        }
    }
    Ok(())
}
