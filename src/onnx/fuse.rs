//! Elementwise fusion at load: each tree of float elementwise nodes whose intermediate values
//! have no other reader becomes one [`FusedProgram`], run as one kernel at the tree's last node
//! (`Graph::fuse_elementwise`). The program holds the ops each node runs, so its results are the
//! nodes' (see [`crate::ops::fused`]).
//!
//! A binary node with a one-element constant operand (a known value: a frozen model's
//! initializer, a constant a compiled trace made) becomes the scalar op eager runs for it
//! (`Mul(x, 0.5)` is `mul_scalar(0.5)`): one input fewer, the same bits. `Pow` is C's `pow` in
//! ONNX, which `pow_scalar`'s forms (`x * x * x`, a square root) are not: only a compiled
//! graph's `Pow` that eager ran as `pow_scalar` (marked `wgtorch_pow_scalar` by the tracer)
//! becomes it. Such a node is rewritten even alone.

use super::graph::{Graph, Node, Value};
use super::ops::{Ctx, Info, OpDef};
use crate::ops::fused::{FusedProgram, MAX_FUSED_INPUTS, MAX_FUSED_INSTRS};
use crate::ops::{BinaryOp, UnaryOp};
use crate::{Error, Result};
use std::sync::Arc;

/// The nodes of one fused tree as one program.
pub(crate) struct FusedGroup {
    /// The program, over the tree's external inputs (the node's inputs, in order).
    pub program: FusedProgram,
    /// The op types of the nodes it replaces, in execution order.
    pub op_types: Vec<String>,
}

/// A fused tree of elementwise nodes (`Node::fused`); not an ONNX operator of its own.
pub(crate) const FUSED: OpDef = OpDef {
    name: "Fused",
    host_inputs: &[],
    infer: |ctx, _| Err(ctx.err("internal: a fused node is made after shape inference")),
    run: |ctx, xs| {
        let group = ctx
            .node
            .fused
            .as_ref()
            .ok_or_else(|| ctx.err("internal: a fused node without its program"))?;
        let ins = xs
            .iter()
            .map(|x| {
                x.as_ref()
                    .ok_or_else(|| ctx.err("internal: a fused node's input is missing"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(vec![group.program.run(&ins)?])
    },
};

/// What one node computes, in the ops its `run` calls.
enum Lowering {
    /// Unary ops applied in turn to input 0.
    Unary(Vec<UnaryOp>),
    /// `op(input 0, input 1)`.
    Binary(BinaryOp),
    /// `input 0 * chain(input 0)` (`HardSwish`).
    TimesChain(Vec<UnaryOp>),
    /// Scalar ops applied in turn to input `.0`: a binary node whose other operand is a
    /// one-element constant (`Lowering::scalar_operand`).
    Scalar(usize, Vec<UnaryOp>),
}

impl Lowering {
    /// The node's lowering, if it is an elementwise operator a program holds (with the
    /// attribute values its `run` would read).
    fn of(node: &Node) -> Option<Lowering> {
        use UnaryOp::*;
        let ctx = Ctx {
            node,
            host: Vec::new(),
        };
        let f = |name: &str, default: f32| ctx.f(name, default).ok().map(f64::from);
        let unary = |op: UnaryOp| Some(Lowering::Unary(vec![op]));
        let hard_sigmoid =
            |alpha: f64, beta: f64| vec![MulScalar(alpha), AddScalar(beta), Clamp(0.0, 1.0)];
        let binary = node.inputs.len() == 2 && node.inputs.iter().all(Option::is_some);
        match node.op_type.as_str() {
            "Add" if binary => Some(Lowering::Binary(BinaryOp::Add)),
            "Sub" if binary => Some(Lowering::Binary(BinaryOp::Sub)),
            "Mul" if binary => Some(Lowering::Binary(BinaryOp::Mul)),
            "Div" if binary => Some(Lowering::Binary(BinaryOp::Div)),
            "Pow" if binary => Some(Lowering::Binary(BinaryOp::Pow)),
            "Max" if binary => Some(Lowering::Binary(BinaryOp::Maximum)),
            "Min" if binary => Some(Lowering::Binary(BinaryOp::Minimum)),
            _ if node.inputs.len() != 1 || node.inputs[0].is_none() => None,
            "Sqrt" => unary(Sqrt),
            "Reciprocal" => unary(Reciprocal),
            "Neg" => unary(Neg),
            "Exp" => unary(Exp),
            "Log" => unary(Log),
            "Erf" => unary(Erf),
            "Abs" => unary(Abs),
            "Sin" => unary(Sin),
            "Cos" => unary(Cos),
            "Relu" => unary(Relu),
            "Sigmoid" => unary(Sigmoid),
            "Tanh" => unary(Tanh),
            "Sign" => unary(Sign),
            "Floor" => unary(Floor),
            "Ceil" => unary(Ceil),
            "Round" => unary(Round),
            "Softplus" => unary(Softplus(1.0, 20.0)),
            "Elu" => unary(Elu(f("alpha", 1.0)?)),
            "LeakyRelu" => unary(LeakyRelu(f("alpha", 0.01)?)),
            "Gelu" => match ctx.s("approximate", "none").ok()?.as_str() {
                "none" => unary(Gelu),
                "tanh" => unary(GeluTanh),
                _ => None,
            },
            "HardSigmoid" => Some(Lowering::Unary(hard_sigmoid(
                f("alpha", 0.2)?,
                f("beta", 0.5)?,
            ))),
            "HardSwish" => Some(Lowering::TimesChain(hard_sigmoid(
                f64::from(1.0f32 / 6.0),
                0.5,
            ))),
            _ => None,
        }
    }

    /// A binary lowering with a one-element constant operand `c` (its value known at load) no
    /// wider than the other operand `x` (so the result has `x`'s shape) as the scalar op eager
    /// runs for `x op c`, exactly: `x + c`, `x * c` either way round, `x - c` as `x + (-c)`
    /// (eager's `sub` with a scalar), `c - x` as `(-x) + c`, `x / c`; and `x ** c` where the
    /// tracer marked it `pow_scalar`.
    fn scalar_operand(self, node: &Node, values: &[Value]) -> Lowering {
        let Lowering::Binary(op) = self else {
            return self;
        };
        let info = |j: usize| {
            node.inputs
                .get(j)
                .copied()
                .flatten()
                .map(|v| &values[v].info)
        };
        let rank = |j: usize| info(j)?.shape.as_ref().map(Vec::len);
        let value = |j: usize| {
            let t = info(j)?.value.as_ref()?;
            (t.numel() == 1).then(|| t.item().ok()).flatten()
        };
        let ctx = Ctx {
            node,
            host: Vec::new(),
        };
        let pow_scalar = matches!(ctx.i(super::forms::POW_SCALAR, 0), Ok(1));
        for (x, c) in [(0, 1), (1, 0)] {
            let (Some(v), Some(xr), Some(cr)) = (value(c), rank(x), rank(c)) else {
                continue;
            };
            if cr > xr {
                continue;
            }
            use UnaryOp::*;
            let ops = match (op, c) {
                (BinaryOp::Add, _) => vec![AddScalar(v)],
                (BinaryOp::Mul, _) => vec![MulScalar(v)],
                (BinaryOp::Sub, 1) => vec![AddScalar(-v)],
                (BinaryOp::Sub, _) => vec![Neg, AddScalar(v)],
                (BinaryOp::Div, 1) => vec![DivScalar(v)],
                (BinaryOp::Pow, 1) if pow_scalar => vec![PowScalar(v)],
                _ => continue,
            };
            return Lowering::Scalar(x, ops);
        }
        self
    }

    /// The values the node's instructions read, in the order [`Lowering::emit`] takes them.
    fn reads(&self, node: &Node) -> Vec<usize> {
        match self {
            Lowering::Scalar(x, _) => node.inputs[*x].into_iter().collect(),
            _ => node.inputs.iter().flatten().copied().collect(),
        }
    }

    fn instrs(&self) -> usize {
        match self {
            Lowering::Unary(ops) | Lowering::Scalar(_, ops) => ops.len(),
            Lowering::Binary(_) => 1,
            Lowering::TimesChain(ops) => ops.len() + 1,
        }
    }

    /// Appends the node's instructions over the registers of the values it reads
    /// ([`Lowering::reads`]); returns its output's.
    fn emit(&self, p: &mut FusedProgram, ins: &[usize]) -> Result<usize> {
        match self {
            Lowering::Unary(ops) | Lowering::Scalar(_, ops) => {
                ops.iter().try_fold(ins[0], |r, &op| p.unary(op, r))
            }
            Lowering::Binary(op) => p.binary(*op, ins[0], ins[1]),
            Lowering::TimesChain(ops) => {
                let h = ops.iter().try_fold(ins[0], |r, &op| p.unary(op, r))?;
                p.binary(BinaryOp::Mul, ins[0], h)
            }
        }
    }
}

/// A tree being grown: its nodes and its external input values, in order.
struct Tree {
    nodes: Vec<usize>,
    inputs: Vec<usize>,
    instrs: usize,
}

impl Graph {
    /// Fuses each tree of float elementwise nodes (all of one dtype) whose intermediate values
    /// have one reader and are no graph output into one node at the tree's last node, running
    /// a [`FusedProgram`] over the tree's external inputs (at most [`MAX_FUSED_INPUTS`]).
    pub(crate) fn fuse_elementwise(&mut self) -> Result<()> {
        let n = self.nodes.len();
        let (producer, readers) = self.producers_and_readers();
        let lowerings: Vec<Option<Lowering>> = (0..n)
            .map(|k| {
                let node = &self.nodes[k];
                let float_of_one_dtype = || {
                    let infos: Vec<&Info> = node
                        .inputs
                        .iter()
                        .chain(&node.outputs)
                        .map(|v| v.map(|v| &self.values[v].info))
                        .collect::<Option<_>>()?;
                    let dt = infos[0].dtype;
                    (dt.is_float() && infos.iter().all(|i| i.dtype == dt)).then_some(())
                };
                let plain = self.runs(k) && node.fused.is_none() && node.outputs.len() == 1;
                (plain && float_of_one_dtype().is_some())
                    .then(|| Lowering::of(node))
                    .flatten()
                    .map(|l| l.scalar_operand(node, &self.values))
            })
            .collect();
        // Grown in execution order: a node absorbs the trees producing its inputs when the
        // value has no other reader and the inputs stay within the limit.
        let mut trees: Vec<Option<Tree>> = (0..n).map(|_| None).collect();
        for k in 0..n {
            let Some(low) = &lowerings[k] else { continue };
            let mut tree = Tree {
                nodes: Vec::new(),
                inputs: Vec::new(),
                instrs: low.instrs(),
            };
            let ins = low.reads(&self.nodes[k]);
            for (j, &v) in ins.iter().enumerate() {
                let p = producer[v];
                let child = (p != usize::MAX && readers[v] == 1)
                    .then(|| trees[p].as_ref())
                    .flatten();
                if let Some(c) = child {
                    let mut inputs = tree.inputs.clone();
                    for &i in &c.inputs {
                        if !inputs.contains(&i) {
                            inputs.push(i);
                        }
                    }
                    let rest = ins.len() - j - 1;
                    if inputs.len() + rest <= MAX_FUSED_INPUTS
                        && tree.instrs + c.instrs <= MAX_FUSED_INSTRS
                    {
                        let c = trees[p].take().expect("checked above");
                        tree.nodes.extend(c.nodes);
                        tree.inputs = inputs;
                        tree.instrs += c.instrs;
                        continue;
                    }
                }
                if !tree.inputs.contains(&v) {
                    tree.inputs.push(v);
                }
            }
            tree.nodes.push(k);
            trees[k] = Some(tree);
        }
        for (root, tree) in trees.into_iter().enumerate() {
            // A tree of one node is rewritten only for its scalar operand.
            let worth = |t: &Tree| {
                t.nodes.len() > 1 || matches!(lowerings[t.nodes[0]], Some(Lowering::Scalar(..)))
            };
            let Some(mut tree) = tree.filter(worth) else {
                continue;
            };
            tree.nodes.sort_unstable();
            let mut program = FusedProgram::new(tree.inputs.len())?;
            let mut reg: Vec<Option<usize>> = vec![None; self.values.len()];
            for (j, &v) in tree.inputs.iter().enumerate() {
                reg[v] = Some(j);
            }
            for &k in &tree.nodes {
                let node = &self.nodes[k];
                let low = lowerings[k].as_ref().expect("a tree holds lowered nodes");
                let ins = low
                    .reads(node)
                    .iter()
                    .map(|&v| reg[v])
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| Error::msg("internal: a fused tree reads a value it lacks"))?;
                let out = low.emit(&mut program, &ins)?;
                reg[node.outputs[0].expect("a lowered node has its output")] = Some(out);
            }
            let op_types: Vec<String> = tree
                .nodes
                .iter()
                .map(|&k| self.nodes[k].op_type.clone())
                .collect();
            for &k in &tree.nodes[..tree.nodes.len() - 1] {
                self.fused[k] = true;
            }
            let last = &self.nodes[root];
            self.nodes[root] = Node {
                name: last.name.clone(),
                op_type: op_types.join("+"),
                def: &FUSED,
                inputs: tree.inputs.iter().map(|&v| Some(v)).collect(),
                outputs: last.outputs.clone(),
                attrs: Vec::new(),
                fused: Some(Arc::new(FusedGroup { program, op_types })),
            };
        }
        Ok(())
    }
}
