//! The gradient of a [`FusedProgram`]: reverse mode over its registers, each instruction's rule
//! emitted as instructions of new programs ([`UnaryOp::grad_by`], [`BinaryOp::grad_by`], the
//! rules eager autograd runs), so that a fused chain trains as one kernel forward and one kernel
//! per input backward instead of one kernel per op each way.
//!
//! An input's gradient program reads the forward inputs it needs, the upstream gradient and the
//! forward output where the last op's rule reads it (`tanh`, `sigmoid`, `exp`, `sqrt`: saved,
//! as eager saves it, so the chain is not recomputed for it; an in-place change of the output
//! before the backward pass is then eager's error), recomputes the other forward registers it
//! needs (cheaper than keeping them: they would be intermediates the fused kernel never writes),
//! and runs the rules in reverse. Its result has the output's shape and is then summed to the
//! input's shape, as eager's binary ops do. Under `create_graph` the output is recomputed by the
//! forward program, so that the gradient stays differentiable through it.
//!
//! Each value is computed with the ops eager autograd uses, in the same order, so the result is
//! eager's up to reassociation: a register narrower than the output has its gradient summed
//! over the broadcast dimensions once, at the end, where eager sums it at each op that reads it
//! (`exp(b) * a` with `b` a row: eager's `exp(b) · Σ g·a` is `Σ g·a·exp(b)` here), and three
//! or more contributions to one register are added in reverse program order.

use super::elementwise::Emit;
use super::fused::{FusedInstr, FusedProgram};
use crate::autograd::{is_grad_enabled, record, Saved, SavedState};
use crate::ops::{BinaryOp, UnaryOp};
use crate::{Result, Tensor};

/// How one input's gradient is computed from the saved inputs and the upstream gradient `g`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum InputGrad {
    /// It is `g` itself (`a` in `a + b`).
    Upstream,
    /// `program` over the listed operands: index `i < inputs` is forward input `i`, index
    /// `inputs` is `g`, index `inputs + 1` the forward output.
    Program(FusedProgram, Vec<usize>),
}

impl SavedState for InputGrad {}

/// Registers of the program being differentiated, appended to without limits (the programs cut
/// from it are checked against [`FusedProgram`]'s).
struct Tape {
    /// Operands: the forward inputs, then `g`, then the forward output.
    operands: usize,
    instrs: Vec<FusedInstr>,
}

impl Emit for Tape {
    type V = usize;
    fn un(&mut self, op: UnaryOp, x: &usize) -> Result<usize> {
        self.instrs.push(FusedInstr::Unary { op, x: *x });
        Ok(self.operands + self.instrs.len() - 1)
    }
    fn bin(&mut self, op: BinaryOp, a: &usize, b: &usize) -> Result<usize> {
        self.instrs.push(FusedInstr::Binary { op, a: *a, b: *b });
        Ok(self.operands + self.instrs.len() - 1)
    }
}

impl Tape {
    /// The program computing register `r`: the operands and instructions `r` depends on,
    /// renumbered; `None` if it needs more inputs or instructions than a program holds.
    fn cut(&self, r: usize) -> Result<Option<InputGrad>> {
        let n = self.operands;
        if r < n {
            // `g` itself; a forward input or output is never a gradient.
            return Ok((r == n - 2).then_some(InputGrad::Upstream));
        }
        let mut live = vec![false; n + self.instrs.len()];
        live[r] = true;
        for m in (0..self.instrs.len()).rev() {
            if live[n + m] {
                match self.instrs[m] {
                    FusedInstr::Unary { x, .. } => live[x] = true,
                    FusedInstr::Binary { a, b, .. } => (live[a], live[b]) = (true, true),
                }
            }
        }
        let reads: Vec<usize> = (0..n).filter(|&i| live[i]).collect();
        let Ok(mut p) = FusedProgram::for_gradient(reads.len()) else {
            return Ok(None);
        };
        let mut to = vec![usize::MAX; n + self.instrs.len()];
        for (k, &i) in reads.iter().enumerate() {
            to[i] = k;
        }
        for m in 0..=(r - n) {
            if !live[n + m] {
                continue;
            }
            let pushed = match self.instrs[m] {
                FusedInstr::Unary { op, x } => p.unary(op, to[x]),
                FusedInstr::Binary { op, a, b } => p.binary(op, to[a], to[b]),
            };
            match pushed {
                Ok(reg) => to[n + m] = reg,
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(InputGrad::Program(p, reads)))
    }
}

impl FusedProgram {
    /// The gradient programs of the inputs marked in `wanted` (`None` for the others), or
    /// `None` when some instruction's rule is not elementwise arithmetic (a comparison, a
    /// select, a zero gradient) or a program would exceed the limits: the ops then run one by
    /// one under eager autograd.
    pub(crate) fn input_grads(&self, wanted: &[bool]) -> Result<Option<Vec<Option<InputGrad>>>> {
        let n = self.inputs();
        // Forward register r is tape register r (an input) or r + 2 (`g` sits at n, the
        // forward output at n + 1).
        let at = |r: usize| if r < n { r } else { r + 2 };
        let mut tape = Tape {
            operands: n + 2,
            instrs: Vec::new(),
        };
        for i in self.instrs() {
            tape.instrs.push(match *i {
                FusedInstr::Unary { op, x } => FusedInstr::Unary { op, x: at(x) },
                FusedInstr::Binary { op, a, b } => FusedInstr::Binary {
                    op,
                    a: at(a),
                    b: at(b),
                },
            });
        }
        let regs = n + self.instrs().len();
        // Registers computed from a wanted input: only their gradients are needed (a constant
        // exponent's would take a select).
        let mut needs = wanted.to_vec();
        for i in self.instrs() {
            needs.push(match *i {
                FusedInstr::Unary { x, .. } => needs[x],
                FusedInstr::Binary { a, b, .. } => needs[a] || needs[b],
            });
        }
        let mut adj: Vec<Option<usize>> = vec![None; regs];
        if let Some(last) = adj.last_mut() {
            *last = Some(n); // the output's gradient is `g`
        }
        let last = self.instrs().len() - 1;
        for (m, i) in self.instrs().iter().enumerate().rev() {
            let Some(g) = adj[n + m] else { continue };
            // The last op's value is the saved output.
            let y = if m == last { n + 1 } else { at(n + m) };
            let contributions = match *i {
                FusedInstr::Unary { .. } if !needs[n + m] => Vec::new(),
                FusedInstr::Unary { op, x } => {
                    match op.grad_by(&mut tape, &|| Ok(at(x)), &|| Ok(y), &g)? {
                        Some(d) => vec![(x, d)],
                        None => return Ok(None),
                    }
                }
                FusedInstr::Binary { op, a, b } => {
                    let want = [needs[a], needs[b]];
                    let (a_, b_, y_) = (|| Ok(at(a)), || Ok(at(b)), || Ok(y));
                    match op.grad_by(&mut tape, want, &a_, &b_, &y_, &g)? {
                        Some((da, db)) => [(a, da), (b, db)]
                            .into_iter()
                            .filter_map(|(r, d)| d.map(|d| (r, d)))
                            .collect(),
                        None => return Ok(None),
                    }
                }
            };
            for (r, d) in contributions {
                adj[r] = Some(match adj[r] {
                    Some(prev) => tape.bin(BinaryOp::Add, &prev, &d)?,
                    None => d,
                });
            }
        }
        let mut grads = Vec::with_capacity(n);
        for (i, &w) in wanted.iter().enumerate() {
            grads.push(match (w, adj[i]) {
                (false, _) => None,
                (true, Some(r)) => match tape.cut(r)? {
                    Some(g) => Some(g),
                    None => return Ok(None),
                },
                // An input the result depends on has a gradient register.
                (true, None) => return Ok(None),
            });
        }
        Ok(Some(grads))
    }
}

impl SavedState for FusedProgram {}

/// Attaches the fused program's backward node to `out` (computed from `inputs` by `program`'s
/// kernel) with the gradient programs `grads` ([`FusedProgram::input_grads`]). The output is
/// saved only where a gradient program reads it.
pub(crate) fn record_fused(
    out: Tensor,
    program: &FusedProgram,
    inputs: &[&Tensor],
    grads: Vec<Option<InputGrad>>,
) -> Tensor {
    let n = inputs.len();
    let saved: Vec<Saved> = inputs.iter().map(|t| Saved::new(t)).collect();
    let reads_output = grads
        .iter()
        .any(|g| matches!(g, Some(InputGrad::Program(_, reads)) if reads.contains(&(n + 1))));
    // The output, and the program that recomputes it under create_graph.
    let output = reads_output.then(|| (Saved::output(&out, "fused"), program.clone()));
    let state = (grads, saved, output);
    record(out, "fused", inputs, state, |(grads, saved, output), g| {
        // The forward output: saved, or recomputed by the forward program under create_graph
        // (so that the gradient is differentiable through it), once.
        let mut y: Option<Tensor> = None;
        let mut forward_output = || -> Result<Tensor> {
            if let Some(y) = &y {
                return Ok(y.clone());
            }
            let (saved_output, program) = output
                .as_ref()
                .ok_or_else(|| crate::Error::msg("internal: the fused output was not saved"))?;
            let v = if is_grad_enabled() {
                saved_output.get()?;
                let xs = saved.iter().map(Saved::get).collect::<Result<Vec<_>>>()?;
                program.run(&xs.iter().collect::<Vec<_>>())?
            } else {
                saved_output.get()?
            };
            y = Some(v.clone());
            Ok(v)
        };
        let n = saved.len();
        // Inputs with the same gradient program (`a` and `b` of `relu(a + b)`) share its run.
        let mut done: Vec<(usize, Tensor)> = Vec::new();
        let mut out = Vec::with_capacity(grads.len());
        for (j, (how, x)) in grads.iter().zip(saved).enumerate() {
            let d = match how {
                None => {
                    out.push(None);
                    continue;
                }
                Some(InputGrad::Upstream) => g.clone(),
                Some(InputGrad::Program(p, reads)) => {
                    let same = done.iter().find(|(k, _)| grads[*k] == *how);
                    match same {
                        Some((_, d)) => d.clone(),
                        None => {
                            let operands = reads
                                .iter()
                                .map(|&i| match i {
                                    i if i < n => saved[i].get(),
                                    i if i == n => Ok(g.clone()),
                                    _ => forward_output(),
                                })
                                .collect::<Result<Vec<Tensor>>>()?;
                            let refs: Vec<&Tensor> = operands.iter().collect();
                            let d = p.run(&refs)?;
                            done.push((j, d.clone()));
                            d
                        }
                    }
                }
            };
            out.push(Some(d.sum_to(x.shape())?));
        }
        Ok(out)
    })
}
