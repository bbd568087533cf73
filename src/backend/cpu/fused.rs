//! The CPU kernel of fused elementwise programs ([`FusedProgram`]): the output in blocks of
//! [`BLOCK`] elements: each input's block read in place where it is one run of its storage
//! (else gathered once into a register), then each instruction as one loop over the block (which
//! vectorises, through the same per-op closures as the single-op kernels, so the values are
//! theirs bit for bit), the last one writing the output's block.

use super::elementwise::{inlined, mono_binary, mono_unary};
use super::vmath::vectorized;
use super::{for_runs, par_fill, pool, CpuElem, CpuStorage};
use crate::dtype::Real;
use crate::ops::fused::{FusedInstr, FusedProgram, MAX_FUSED_INPUTS};
use crate::ops::{BinaryOp, UnaryOp};
use crate::shape::Layout;

/// Elements per block: each register is a block on the stack of the task.
const BLOCK: usize = 256;

/// Runs `p` over `inputs` (f32 or f64, one dtype; each view broadcast to the output's shape).
pub(crate) fn fused(p: &FusedProgram, inputs: &[(&CpuStorage, &Layout)]) -> CpuStorage {
    match inputs[0].0 {
        CpuStorage::F32(_) => CpuStorage::F32(run::<f32>(p, inputs)),
        CpuStorage::F64(_) => CpuStorage::F64(run::<f64>(p, inputs)),
        other => unreachable!("the op layer fuses f32 and f64 only, not {}", other.dtype()),
    }
}

fn run<T: CpuElem + Real>(p: &FusedProgram, inputs: &[(&CpuStorage, &Layout)]) -> Vec<T> {
    let views: Vec<(&[T], &Layout)> = inputs
        .iter()
        .map(|&(s, l)| (T::slice(s).expect("fused: inputs share a dtype"), l))
        .collect();
    let n = inputs[0].1.numel();
    let mut out = pool::any(n);
    if n == 0 {
        // A zero-size view may start past its storage's end.
        return out;
    }
    let k = p.inputs();
    let regs = k + p.instrs().len();
    let last = p.instrs().len().checked_sub(1);
    par_fill(&mut out, |start, chunk| {
        let mut r = vec![[T::zero(); BLOCK]; regs];
        for (b, o) in chunk.chunks_mut(BLOCK).enumerate() {
            let (s0, len) = (start + b * BLOCK, o.len());
            // An input whose block is one run of its storage is read in place; the others are
            // gathered into their registers.
            let mut direct: [Option<&[T]>; MAX_INPUTS] = [None; MAX_INPUTS];
            for (j, &(v, l)) in views.iter().enumerate() {
                direct[j] = in_place(v, l, s0, len);
                if direct[j].is_none() {
                    load(v, l, s0, &mut r[j][..len]);
                }
            }
            for (m, instr) in p.instrs().iter().enumerate() {
                let (src, dst) = r.split_at_mut(k + m);
                let operand = |i: usize| direct.get(i).copied().flatten().unwrap_or(&src[i][..len]);
                // The last instruction writes the output block itself.
                let dst = if Some(m) == last {
                    &mut *o
                } else {
                    &mut dst[0][..len]
                };
                step(*instr, operand, dst);
            }
            if last.is_none() {
                // A program without instructions (refused by `check`) is its last input.
                o.copy_from_slice(direct[k - 1].unwrap_or(&r[k - 1][..len]));
            }
        }
    });
    out
}

/// The most inputs a program reads (a gradient program reads two more than a forward one).
const MAX_INPUTS: usize = MAX_FUSED_INPUTS + 2;

/// Elements `s0..s0 + len` (row-major) of the view `l` of `v`, where they are one run of the
/// storage: a contiguous view, or a block inside one row of a view whose rows are contiguous (a
/// bias broadcast over the rows).
#[inline]
fn in_place<'a, T>(v: &'a [T], l: &Layout, s0: usize, len: usize) -> Option<&'a [T]> {
    if l.is_contiguous() {
        return Some(&v[l.offset + s0..l.offset + s0 + len]);
    }
    let (&row, &step) = (l.shape.last()?, l.strides.last()?);
    if step != 1 || s0 % row + len > row {
        return None;
    }
    let (mut rem, mut off) = (s0, l.offset);
    for (&n, &st) in l.shape.iter().zip(&l.strides).rev() {
        off += rem % n * st;
        rem /= n;
    }
    Some(&v[off..off + len])
}

/// Elements `s0..s0 + dst.len()` (row-major) of the view `l` of `v`: by runs along the
/// innermost dimension, each a copy or a fill where it can be (a broadcast bias row, a column).
#[inline]
fn load<T: Copy>(v: &[T], l: &Layout, s0: usize, dst: &mut [T]) {
    if l.is_contiguous() {
        dst.copy_from_slice(&v[l.offset + s0..l.offset + s0 + dst.len()]);
        return;
    }
    for_runs(l, s0, dst.len(), |i, off, run, stride| {
        let d = &mut dst[i..i + run];
        match stride {
            1 => d.copy_from_slice(&v[off..off + run]),
            0 => d.fill(v[off]),
            _ => {
                for (k, o) in d.iter_mut().enumerate() {
                    *o = v[off + k * stride];
                }
            }
        }
    });
}

/// One instruction over a block: `dst = op(src[..])`.
#[inline]
fn step<'a, T: Real>(instr: FusedInstr, src: impl Fn(usize) -> &'a [T], dst: &mut [T]) {
    match instr {
        FusedInstr::Unary { op, x } => {
            let x = src(x);
            mono_unary!(op, f => vectorized(
                #[inline(always)]
                || {
                    for (o, &x) in dst.iter_mut().zip(x) {
                        *o = f(x);
                    }
                }
            ))
        }
        FusedInstr::Binary { op, a, b } => {
            let (a, b) = (src(a), src(b));
            mono_binary!(op, f => vectorized(
                #[inline(always)]
                || {
                    for ((o, &a), &b) in dst.iter_mut().zip(a).zip(b) {
                        *o = f(a, b);
                    }
                }
            ))
        }
    }
}
