//! The CPU backend: rayon kernels generic over the element type.
//!
//! Kernels split work over rayon's global pool (set its size with `RAYON_NUM_THREADS`, as
//! `torch.set_num_threads` would), take their buffers from [`pool`], and compute `exp`, `tanh`,
//! `sigmoid` and `erf` in f32 with [`vmath`], compiled for the widest vector ISA the CPU has.
//! Tensors hold their elements in a [`CpuStorage`], one vector of the dtype's Rust type.
//!
//! ```
//! use wgtorch::backend::cpu::vmath;
//! use wgtorch::{Device, Tensor};
//! let x = Tensor::from_vec(vec![0.5f32, -0.5], [2], &Device::Cpu)?;
//! let y = x.sigmoid()?.to_vec::<f32>()?;
//! assert_eq!(y, vec![vmath::sigmoid(0.5), vmath::sigmoid(-0.5)]); // the same bits
//! # Ok::<(), wgtorch::Error>(())
//! ```

mod conv;
mod elementwise;
mod fused;
mod gemm;
mod half_f32;
mod index;
mod matmul;
mod norm;
pub mod pool;
mod pooling;
mod reduce;
mod rnn;
mod sort;
pub mod vmath;
mod winograd;

pub(crate) use conv::*;

/// The f32 GEMM microkernels that matmul, linear and conv2d use on this CPU: the instruction set
/// and the register tiles (each product takes the tile that pads its output least), e.g.
/// `"avx512 12×32, 8×48"`, `"avx2 6×16"`, `"baseline 4×8"` or, on wasm, `"simd128 4×8"`. They
/// follow [`vmath::isa`], so `WGTORCH_CPU_ISA` forces them too.
///
/// ```
/// let k = wgtorch::backend::cpu::gemm_kernel();
/// assert!(["avx512 ", "avx2 ", "baseline "].iter().any(|p| k.starts_with(p)), "{k}");
/// ```
pub fn gemm_kernel() -> String {
    let ks = f32::kernels(vmath::isa());
    let isa = match ks[0].isa {
        vmath::Isa::Avx512 => "avx512",
        vmath::Isa::Avx2 => "avx2",
        vmath::Isa::Baseline if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) => {
            "simd128"
        }
        vmath::Isa::Baseline => "baseline",
    };
    let tiles: Vec<String> = ks.iter().map(|k| format!("{}×{}", k.mr, k.nr)).collect();
    format!("{isa} {}", tiles.join(", "))
}
/// Whether bf16 matrix products (matmul, linear and their gradients) run on Intel AMX tiles
/// here: the CPU has AMX-TILE and AMX-BF16, Linux grants the process the tile state, and the
/// instruction set in use is AVX-512 (`WGTORCH_CPU_ISA=avx2` turns it off, and so does
/// `WGTORCH_CPU_AMX=0`). Elsewhere they widen to f32 and run the f32 kernels. The sums are f32
/// either way; see the `amx` module for how they round.
///
/// ```
/// println!("bf16 products on AMX: {}", wgtorch::backend::cpu::bf16_on_amx());
/// ```
pub fn bf16_on_amx() -> bool {
    #[cfg(target_arch = "x86_64")]
    return gemm::amx::enabled();
    #[cfg(not(target_arch = "x86_64"))]
    false
}
pub(crate) use elementwise::*;
pub(crate) use fused::fused;
pub(crate) use gemm::Gemm;
pub(crate) use index::*;
pub(crate) use matmul::*;
pub(crate) use norm::*;
pub(crate) use pooling::{max_pool, max_pool_backward};
pub(crate) use reduce::*;
pub(crate) use rnn::*;
pub(crate) use sort::*;

use crate::dtype::Elem;
use crate::shape::Layout;
use crate::{DType, Device, Error, Result};
use half::{bf16, f16};
use rayon::prelude::*;

/// Host storage: one vector of the tensor's element type.
#[derive(Clone, Debug)]
pub enum CpuStorage {
    /// Elements of a `bool` tensor.
    Bool(Vec<bool>),
    /// Elements of a `int32` tensor.
    I32(Vec<i32>),
    /// Elements of a `int64` tensor.
    I64(Vec<i64>),
    /// Elements of a `float16` tensor.
    F16(Vec<f16>),
    /// Elements of a `bfloat16` tensor.
    BF16(Vec<bf16>),
    /// Elements of a `float32` tensor.
    F32(Vec<f32>),
    /// Elements of a `float64` tensor.
    F64(Vec<f64>),
}

/// Dispatch `$body` over the storage variants with `$v` bound to the vector and `$t` to its type.
macro_rules! with_cpu {
    ($s:expr, $v:ident, $t:ident => $body:expr) => {
        match $s {
            CpuStorage::Bool($v) => {
                type $t = bool;
                $body
            }
            CpuStorage::I32($v) => {
                type $t = i32;
                $body
            }
            CpuStorage::I64($v) => {
                type $t = i64;
                $body
            }
            CpuStorage::F16($v) => {
                type $t = half::f16;
                $body
            }
            CpuStorage::BF16($v) => {
                type $t = half::bf16;
                $body
            }
            CpuStorage::F32($v) => {
                type $t = f32;
                $body
            }
            CpuStorage::F64($v) => {
                type $t = f64;
                $body
            }
        }
    };
}
pub(crate) use with_cpu;

/// Dispatch over a dtype with `$t` bound to its Rust type.
macro_rules! with_dtype {
    ($d:expr, $t:ident => $body:expr) => {
        match $d {
            DType::Bool => {
                type $t = bool;
                $body
            }
            DType::I32 => {
                type $t = i32;
                $body
            }
            DType::I64 => {
                type $t = i64;
                $body
            }
            DType::F16 => {
                type $t = half::f16;
                $body
            }
            DType::BF16 => {
                type $t = half::bf16;
                $body
            }
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::F64 => {
                type $t = f64;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

/// Element types with a CPU storage variant.
pub trait CpuElem: Elem {
    /// Wrap a vector.
    fn wrap(v: Vec<Self>) -> CpuStorage;
    /// Borrow the vector if the variant matches.
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    /// Borrow mutably if the variant matches.
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
    /// Take the vector out if the variant matches.
    fn into_vec(s: CpuStorage) -> Option<Vec<Self>>;
}
macro_rules! cpu_elem {
    ($t:ty, $var:ident) => {
        impl CpuElem for $t {
            fn wrap(v: Vec<Self>) -> CpuStorage {
                CpuStorage::$var(v)
            }
            fn slice(s: &CpuStorage) -> Option<&[Self]> {
                match s {
                    CpuStorage::$var(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]> {
                match s {
                    CpuStorage::$var(v) => Some(v),
                    _ => None,
                }
            }
            fn into_vec(s: CpuStorage) -> Option<Vec<Self>> {
                match s {
                    CpuStorage::$var(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
cpu_elem!(bool, Bool);
cpu_elem!(i32, I32);
cpu_elem!(i64, I64);
cpu_elem!(f16, F16);
cpu_elem!(bf16, BF16);
cpu_elem!(f32, F32);
cpu_elem!(f64, F64);

impl CpuStorage {
    /// The dtype held.
    pub fn dtype(&self) -> DType {
        with_cpu!(self, _v, T => <T as Elem>::DTYPE)
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        with_cpu!(self, v, _T => v.len())
    }
    /// A vector of `n` copies of `value`, or `Error::OutOfMemory` when the host cannot hold it.
    pub fn full(op: &'static str, dtype: DType, n: usize, value: f64) -> Result<CpuStorage> {
        reserve(op, dtype, n)?;
        with_dtype!(dtype, T => Ok(T::wrap(pool::filled(n, T::from_f64(value)))))
    }
    /// Elements widened to f64 (test and conversion helper).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_cpu!(self, v, _T => v.iter().map(|x| x.to_f64()).collect())
    }
    /// Build from f64 values (`Error::OutOfMemory` when the host cannot hold them).
    pub fn from_f64(op: &'static str, dtype: DType, v: &[f64]) -> Result<CpuStorage> {
        with_dtype!(dtype, T => {
            let mut out = try_vec::<T>(op, v.len())?;
            out.extend(v.iter().map(|&x| T::from_f64(x)));
            Ok(T::wrap(out))
        })
    }
}

/// Requests below this many bytes are not probed by [`reserve`]: allocators grant them (Linux
/// refuses only sizes past RAM plus swap), and probing would cost a system call on hot paths.
const PROBE_BYTES: usize = 1 << 28;

/// Check that the allocator would grant `n` elements of `dtype` (large requests are reserved and
/// released), or `Error::OutOfMemory` naming the bytes. The pool hands out buffers infallibly
/// (reused, or a fresh `vec!` that aborts when the allocator refuses), so creation and the kernels
/// whose output can be far larger than their inputs (broadcasts, products, windows) call this
/// first.
pub(crate) fn reserve(op: &'static str, dtype: DType, n: usize) -> Result<()> {
    if n.saturating_mul(dtype.size_in_bytes()) >= PROBE_BYTES {
        with_dtype!(dtype, T => drop(try_vec::<T>(op, n)?));
    }
    Ok(())
}

/// An empty vector with room for exactly `n` elements, or `Error::OutOfMemory` naming the bytes:
/// host tensor memory is reserved fallibly, never with an abort or a "capacity overflow" panic.
pub(crate) fn try_vec<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        Error::oom(op, Device::Cpu, bytes)
    })?;
    Ok(v)
}

/// Work per rayon task: below this, kernels run on one thread.
pub(crate) const GRAIN: usize = 1 << 14;

/// Call `f(i, offset)` for the `len` elements of `layout` starting at row-major index `start`.
#[inline]
pub(crate) fn for_offsets(
    layout: &Layout,
    start: usize,
    len: usize,
    mut f: impl FnMut(usize, usize),
) {
    for_runs(layout, start, len, |i, off, run, stride| {
        for k in 0..run {
            f(i + k, off + k * stride);
        }
    });
}

/// [`for_offsets`] by runs along the innermost dimension: `f(i, offset, run, stride)` stands for
/// elements `i..i + run`, at `offset + k * stride` for `k < run` (a copy where `stride` is 1, a
/// fill where it is 0).
#[inline]
pub(crate) fn for_runs(
    layout: &Layout,
    start: usize,
    len: usize,
    mut f: impl FnMut(usize, usize, usize, usize),
) {
    let nd = layout.shape.len();
    if len == 0 {
        return;
    }
    if nd == 0 {
        f(0, layout.offset, 1, 0);
        return;
    }
    let shape = &layout.shape;
    let strides = &layout.strides;
    let mut idx = [0usize; 16];
    let mut idxv;
    let idx: &mut [usize] = if nd <= 16 {
        &mut idx[..nd]
    } else {
        idxv = vec![0; nd];
        &mut idxv
    };
    let mut rem = start;
    let mut off = layout.offset;
    for d in (0..nd).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
        off += idx[d] * strides[d];
    }
    let last = nd - 1;
    let (ls, lst) = (shape[last], strides[last]);
    let mut i = 0;
    while i < len {
        // Walk the innermost dimension without re-deriving the index.
        let run = (ls - idx[last]).min(len - i);
        f(i, off, run, lst);
        i += run;
        idx[last] += run;
        off += run * lst;
        if idx[last] == ls && i < len {
            off -= ls * lst;
            idx[last] = 0;
            let mut d = last;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                off += strides[d];
                if idx[d] < shape[d] {
                    break;
                }
                off -= strides[d] * shape[d];
                idx[d] = 0;
            }
        }
    }
}

/// Fill `out` in parallel chunks; `f(start, chunk)` writes the chunk beginning at `start`.
pub(crate) fn par_fill<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if out.len() <= GRAIN {
        f(0, out);
    } else {
        out.par_chunks_mut(GRAIN)
            .enumerate()
            .for_each(|(c, chunk)| f(c * GRAIN, chunk));
    }
}

/// The first `len` elements of `c` if it holds `T`s and has that many.
pub(crate) fn head<T: CpuElem>(c: &CpuStorage, len: usize) -> Option<&[T]> {
    T::slice(c).and_then(|v| v.get(..len))
}

/// Gather the elements of `layout` from `src` into a new contiguous vector.
pub(crate) fn gather_strided<T: CpuElem>(src: &[T], layout: &Layout) -> Vec<T> {
    let n = layout.numel();
    if n == 0 {
        // A zero-size view may start past its storage's end (a slice of an empty tensor).
        return Vec::new();
    }
    if layout.is_contiguous() {
        return src[layout.offset..layout.offset + n].to_vec();
    }
    let mut out = pool::any(n);
    let nd = layout.shape.len();
    let row = layout.shape.last().copied().unwrap_or(1);
    if nd >= 2 && layout.strides[nd - 1] == 1 && row >= 16 {
        // Rows contiguous in the source (a transpose of outer dims, a narrow, a split head):
        // one offset per row and a slice copy, in parallel blocks of whole rows.
        let outer = Layout {
            shape: layout.shape[..nd - 1].to_vec(),
            strides: layout.strides[..nd - 1].to_vec(),
            offset: layout.offset,
        };
        let rows_per_task = (GRAIN / row).max(1);
        let copy_rows = |r0: usize, block: &mut [T]| {
            for_offsets(&outer, r0, block.len() / row, |i, o| {
                block[i * row..(i + 1) * row].copy_from_slice(&src[o..o + row]);
            });
        };
        if n <= GRAIN {
            copy_rows(0, &mut out);
        } else {
            out.par_chunks_mut(rows_per_task * row)
                .enumerate()
                .for_each(|(c, block)| copy_rows(c * rows_per_task, block));
        }
        return out;
    }
    par_fill(&mut out, |start, chunk| {
        for_offsets(layout, start, chunk.len(), |i, o| chunk[i] = src[o]);
    });
    out
}
