//! Fused elementwise programs: a chain of unary and binary float ops over broadcast inputs,
//! run as one kernel (one pass over memory, one launch) instead of one kernel and one
//! intermediate tensor per op. A [`FusedProgram`] is built op by op, with the ops' own enums
//! ([`UnaryOp`], [`BinaryOp`]), so each op keeps its one declaration (name, WGSL, CPU function);
//! the fused kernels are generated from those: a loop over blocks of 256 elements on the CPU,
//! one WGSL shader per program structure on a GPU (`backend/gpu/fused.rs`, cached by
//! [`FusedProgram::key`], the scalar parameters passed at launch).
//!
//! The result is the one the ops give one by one ([`FusedProgram::eager`]): bit for bit on the
//! CPU (the same scalar functions in the same order), and on a GPU within the compiler's
//! freedom to contract `a * b + c` across what were kernel boundaries. Where fusing could change
//! what the ops would do — autocast, half or integer dtypes (which the ops round or promote
//! after each step), mixed dtypes or devices, an ONNX export capture (which records the ops), an
//! adapter with too few storage bindings — [`run`] runs the ops themselves.
//!
//! With autograd, the program's gradient is generated too: one program per input that needs a
//! gradient, from the ops' own backward rules, run as one kernel each (`fused_grad.rs`); its
//! values are eager autograd's: bit for bit on the CPU where every register a rule reads has
//! the output's shape and is read once (otherwise the same terms are summed in another order).
//! A program with an op whose rule is not elementwise arithmetic (a select: `clamp`, `elu`,
//! `leaky_relu`, `softplus`, `maximum`, `minimum`, a power's exponent; a zero gradient:
//! `floor`, `sign`, ...) on the way to an input that needs a gradient runs its ops under eager
//! autograd.
//!
//! ONNX import (and so [`compile_module`](crate::compile::compile_module)) fuses chains of
//! elementwise nodes into such programs.
//!
//! ```
//! use wgtorch::ops::{fused::FusedProgram, BinaryOp, UnaryOp};
//! use wgtorch::{Device, Tensor};
//! let dev = Device::Cpu;
//! // relu(a + b) * 0.5, with b broadcast over a's rows
//! let mut p = FusedProgram::new(2)?;
//! let s = p.binary(BinaryOp::Add, 0, 1)?;
//! let r = p.unary(UnaryOp::Relu, s)?;
//! p.unary(UnaryOp::MulScalar(0.5), r)?;
//! let a = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0], [2, 2], &dev)?;
//! let b = Tensor::from_vec(vec![1.0f32, 1.0], [2], &dev)?;
//! let y = p.run(&[&a, &b])?;
//! assert_eq!(y.to_vec::<f32>()?, vec![1.0, 0.0, 2.0, 0.0]);
//! assert_eq!(y.to_vec::<f32>()?, p.eager(&[&a, &b])?.to_vec::<f32>()?);
//! # Ok::<(), wgtorch::Error>(())
//! ```
//!
//! [`run`]: FusedProgram::run

use crate::backend::Storage;
use crate::ops::{BinaryOp, UnaryOp};
use crate::shape::{broadcast_shapes, Layout};
use crate::{DType, Device, Error, Result, Tensor};

/// The most inputs a program reads. A GPU kernel binds each input, the output and its
/// parameters as storage buffers: 6 inputs fit WebGPU's default of 8 storage buffers per stage
/// (an adapter with fewer runs the ops one by one).
pub const MAX_FUSED_INPUTS: usize = 6;

/// The most instructions a program holds (a bound on the generated shader's size).
pub const MAX_FUSED_INSTRS: usize = 64;

/// One step of a [`FusedProgram`]. Registers `0..inputs` are the inputs; each instruction reads
/// earlier registers and writes the next one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FusedInstr {
    /// `op(x)`.
    Unary {
        /// The op.
        op: UnaryOp,
        /// The register read.
        x: usize,
    },
    /// `op(a, b)`.
    Binary {
        /// The op (arithmetic: a comparison or logical op gives bool, which a program does not
        /// hold).
        op: BinaryOp,
        /// The left register.
        a: usize,
        /// The right register.
        b: usize,
    },
}

impl FusedInstr {
    /// The op's name (`"add"`, `"relu"`).
    pub fn name(&self) -> &'static str {
        match self {
            FusedInstr::Unary { op, .. } => op.name(),
            FusedInstr::Binary { op, .. } => op.name(),
        }
    }
    /// The op's two scalar parameters (a unary op's `p0`, `p1`; zeros for a binary op).
    pub(crate) fn params(&self) -> [f32; 2] {
        match self {
            FusedInstr::Unary { op, .. } => op.params(),
            FusedInstr::Binary { .. } => [0.0; 2],
        }
    }
}

/// A chain of elementwise ops run as one kernel (see the [module docs](self)). Its value is its
/// last register; its shape is the inputs' shapes broadcast together.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedProgram {
    inputs: usize,
    instrs: Vec<FusedInstr>,
}

impl FusedProgram {
    /// An empty program over `inputs` inputs (1 to [`MAX_FUSED_INPUTS`]).
    pub fn new(inputs: usize) -> Result<FusedProgram> {
        if !(1..=MAX_FUSED_INPUTS).contains(&inputs) {
            return Err(Error::arg(
                "fused",
                format!("a fused program reads 1 to {MAX_FUSED_INPUTS} inputs, got {inputs}"),
            ));
        }
        Ok(FusedProgram {
            inputs,
            instrs: Vec::new(),
        })
    }

    /// An empty gradient program ([`FusedProgram::input_grads`]): it reads up to the forward
    /// program's inputs, the upstream gradient and the forward output, two more than
    /// [`MAX_FUSED_INPUTS`] (on an adapter without the bindings for it, [`run`](Self::run) runs
    /// its ops).
    pub(crate) fn for_gradient(inputs: usize) -> Result<FusedProgram> {
        if !(1..=MAX_FUSED_INPUTS + 2).contains(&inputs) {
            return Err(Error::msg(format!(
                "internal: a gradient program reads 1 to {} inputs, got {inputs}",
                MAX_FUSED_INPUTS + 2
            )));
        }
        Ok(FusedProgram {
            inputs,
            instrs: Vec::new(),
        })
    }

    /// Appends `op(x)`; returns the register it writes.
    pub fn unary(&mut self, op: UnaryOp, x: usize) -> Result<usize> {
        self.check_reg(op.name(), x)?;
        self.push(FusedInstr::Unary { op, x })
    }

    /// Appends `op(a, b)` (broadcasting); returns the register it writes. `op` must be
    /// arithmetic (not a comparison or logical op).
    pub fn binary(&mut self, op: BinaryOp, a: usize, b: usize) -> Result<usize> {
        if op.is_comparison() {
            return Err(Error::arg(
                "fused",
                format!(
                    "{} gives bool; a fused program holds floating-point values only",
                    op.name()
                ),
            ));
        }
        self.check_reg(op.name(), a)?;
        self.check_reg(op.name(), b)?;
        self.push(FusedInstr::Binary { op, a, b })
    }

    fn check_reg(&self, op: &str, r: usize) -> Result<()> {
        let have = self.inputs + self.instrs.len();
        if r >= have {
            return Err(Error::arg(
                "fused",
                format!("{op} reads register {r}, but only registers 0..{have} are written"),
            ));
        }
        Ok(())
    }

    fn push(&mut self, i: FusedInstr) -> Result<usize> {
        if self.instrs.len() == MAX_FUSED_INSTRS {
            return Err(Error::arg(
                "fused",
                format!("a fused program holds at most {MAX_FUSED_INSTRS} instructions"),
            ));
        }
        self.instrs.push(i);
        Ok(self.inputs + self.instrs.len() - 1)
    }

    /// How many inputs it reads.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Its instructions, in order.
    pub fn instrs(&self) -> &[FusedInstr] {
        &self.instrs
    }

    /// The op names in order, as the profiler and `explain` show them (`add+relu+mul_scalar`).
    pub fn name(&self) -> String {
        let names: Vec<&str> = self.instrs.iter().map(FusedInstr::name).collect();
        names.join("+")
    }

    /// Its structure (the ops and the registers they read, not the scalar parameters, which
    /// travel at launch), e.g. `fused2_add.0.1_relu.2`: the GPU pipeline cache key.
    pub fn key(&self) -> String {
        let mut k = format!("fused{}", self.inputs);
        for i in &self.instrs {
            match *i {
                FusedInstr::Unary { op, x } => k.push_str(&format!("_{}.{x}", op.name())),
                FusedInstr::Binary { op, a, b } => k.push_str(&format!("_{}.{a}.{b}", op.name())),
            }
        }
        k
    }

    /// The checks every call makes: the input count, a non-empty program, and every input
    /// reaching the result (the last register). The result's shape is all inputs broadcast
    /// together, so an input read only by instructions the result does not use would widen it
    /// where the ops would not.
    fn check(&self, inputs: &[&Tensor]) -> Result<()> {
        if inputs.len() != self.inputs {
            return Err(Error::arg(
                "fused",
                format!(
                    "the program reads {} inputs, got {}",
                    self.inputs,
                    inputs.len()
                ),
            ));
        }
        if self.instrs.is_empty() {
            return Err(Error::arg("fused", "the program has no instructions"));
        }
        // Registers the result depends on, walking back from the last one.
        let mut live = vec![false; self.inputs + self.instrs.len()];
        live[self.inputs + self.instrs.len() - 1] = true;
        for (m, i) in self.instrs.iter().enumerate().rev() {
            if live[self.inputs + m] {
                match *i {
                    FusedInstr::Unary { x, .. } => live[x] = true,
                    FusedInstr::Binary { a, b, .. } => (live[a], live[b]) = (true, true),
                }
            }
        }
        if let Some(j) = live[..self.inputs].iter().position(|r| !r) {
            return Err(Error::arg(
                "fused",
                format!("input {j} does not reach the result (the last instruction's value)"),
            ));
        }
        Ok(())
    }

    /// The ops one by one (with autograd, autocast, promotion and every check of each op).
    pub fn eager(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        self.check(inputs)?;
        let mut regs: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
        for i in &self.instrs {
            let y = match *i {
                FusedInstr::Unary { op, x } => regs[x].unary(op)?,
                FusedInstr::Binary { op, a, b } => regs[a].binary(op, &regs[b])?,
            };
            regs.push(y);
        }
        Ok(regs.pop().expect("a checked program has an instruction"))
    }

    /// Runs the program as one kernel where that gives the ops' results (f32 tensors on the
    /// CPU or a GPU, f64 on the CPU, no autocast or export capture, and a generated gradient
    /// where an input needs one); else runs the ops one by one ([`eager`](Self::eager)).
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        self.check(inputs)?;
        if !self.fusable(inputs)? {
            return self.eager(inputs);
        }
        let wanted: Vec<bool> = inputs
            .iter()
            .map(|t| crate::autograd::is_grad_enabled() && t.requires_grad())
            .collect();
        let grads = if wanted.contains(&true) {
            match self.input_grads(&wanted)? {
                Some(g) => Some(g),
                None => return self.eager(inputs),
            }
        } else {
            None
        };
        let _p = crate::profiler::op("fused", inputs);
        let mut shape = inputs[0].shape().to_vec();
        for t in &inputs[1..] {
            shape = broadcast_shapes("fused", &shape, t.shape())?;
        }
        let layouts = inputs
            .iter()
            .map(|t| t.layout().broadcast_to("fused", &shape))
            .collect::<Result<Vec<Layout>>>()?;
        let guards: Vec<_> = inputs.iter().map(|t| t.storage()).collect();
        let operands: Vec<(&Storage, &Layout)> =
            guards.iter().map(|g| &**g).zip(&layouts).collect();
        let s = Storage::fused(self, &operands)?;
        drop(guards);
        let out = Tensor::from_storage(s, &shape, inputs[0].device());
        Ok(match grads {
            Some(g) => super::fused_grad::record_fused(out, self, inputs, g),
            None => out,
        })
    }

    fn fusable(&self, inputs: &[&Tensor]) -> Result<bool> {
        let (dt, dev) = (inputs[0].dtype(), inputs[0].device());
        if inputs.iter().any(|t| t.dtype() != dt || t.device() != dev)
            || crate::amp::autocast_dtype(&dev).is_some()
            || crate::onnx::trace::capturing()
        {
            return Ok(false);
        }
        Ok(match dev {
            Device::Cpu => matches!(dt, DType::F32 | DType::F64),
            Device::Gpu(ordinal) => {
                let ctx = crate::backend::gpu::context(ordinal)?;
                dt == DType::F32
                    && (self.inputs + 2) as u64
                        <= u64::from(ctx.limits.max_storage_buffers_per_shader_stage)
            }
        })
    }
}
