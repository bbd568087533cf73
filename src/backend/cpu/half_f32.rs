//! Half-precision storages to and from f32 in bulk: the widening and rounding that half-type
//! matmuls and convolutions (which compute in f32) and casts between f32 and a half type do on
//! every element. `half`'s slice conversions use the CPU's conversion instructions where it has
//! them (F16C) and vectorisable loops otherwise; the values are those of the element-wise
//! conversions (exact widening, rounding to nearest even).
//!
//! Why bf16 products are not multiplied with `vdpbf16ps` where there is no AMX: a 12×32
//! microkernel on it (AVX512_BF16, two bf16 products per f32 lane and instruction, operands
//! packed in pairs along k) reached 51–54 GFLOP/s at 512³ on one thread of an Intel Xeon (family
//! 6 model 207, Emerald Rapids, Dec 2026), where the f32 FMA kernel on the same widened operands
//! reached 85–86: there the instruction's throughput is below that of two FMAs. Where the CPU
//! and OS offer AMX, bf16 matmuls run on its tiles instead (`gemm/amx.rs`).

use super::{par_fill, pool, CpuStorage};
use crate::DType;
use half::slice::HalfFloatSliceExt;

/// A half-precision dtype: what [`widen`] found and what [`narrow`] rounds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Half {
    F16,
    BF16,
}

impl Half {
    /// The half type `dtype` is, if it is one.
    pub(crate) fn of(dtype: DType) -> Option<Half> {
        match dtype {
            DType::F16 => Some(Half::F16),
            DType::BF16 => Some(Half::BF16),
            _ => None,
        }
    }
}

/// The elements of an f16 or bf16 storage widened to f32 (exactly), with the storage's half
/// type; None for other dtypes.
pub(crate) fn widen(s: &CpuStorage) -> Option<(Vec<f32>, Half)> {
    match s {
        CpuStorage::F16(v) => Some((widen_slice(v), Half::F16)),
        CpuStorage::BF16(v) => Some((widen_slice(v), Half::BF16)),
        _ => None,
    }
}

fn widen_slice<H: Sync>(v: &[H]) -> Vec<f32>
where
    [H]: HalfFloatSliceExt,
{
    let mut out: Vec<f32> = pool::any(v.len());
    par_fill(&mut out, |start, chunk| {
        v[start..start + chunk.len()].convert_to_f32_slice(chunk)
    });
    out
}

/// `v` rounded to `to` (to nearest, ties to even) as a storage.
pub(crate) fn narrow(v: &[f32], to: Half) -> CpuStorage {
    match to {
        Half::F16 => {
            let mut out: Vec<half::f16> = pool::any(v.len());
            par_fill(&mut out, |s, c| {
                c.convert_from_f32_slice(&v[s..s + c.len()])
            });
            CpuStorage::F16(out)
        }
        Half::BF16 => {
            let mut out: Vec<half::bf16> = pool::any(v.len());
            par_fill(&mut out, |s, c| {
                c.convert_from_f32_slice(&v[s..s + c.len()])
            });
            CpuStorage::BF16(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Elem;

    /// The bulk conversions give the element-wise ones (`Elem`'s, as casts use) bit for bit,
    /// at rounding ties, subnormals, infinities and NaN, over more than one parallel chunk.
    #[test]
    fn bulk_conversions_match_elementwise() {
        let mut xs: Vec<f32> = vec![
            0.0,
            -0.0,
            1.0,
            f32::from_bits(0x3f80_8000), // bf16 tie, rounds to even (down)
            f32::from_bits(0x3f81_8000), // bf16 tie, rounds up
            f32::from_bits(0x3f80_8001),
            65504.0,
            65520.0, // f16 overflows to inf
            1e-40,   // f32 subnormal
            6e-8,    // f16 subnormal
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
        ];
        let mut state = 7u32;
        while xs.len() < 3 * super::super::GRAIN + 5 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            xs.push(f32::from_bits(state));
        }
        for dt in [Half::F16, Half::BF16] {
            let s = narrow(&xs, dt);
            let (back, found) = widen(&s).expect("a half storage");
            assert_eq!(found, dt);
            for (i, &x) in xs.iter().enumerate() {
                let (want, got) = match &s {
                    CpuStorage::F16(v) => (
                        <half::f16 as Elem>::from_f64(x as f64).to_bits(),
                        v[i].to_bits(),
                    ),
                    CpuStorage::BF16(v) => (
                        <half::bf16 as Elem>::from_f64(x as f64).to_bits(),
                        v[i].to_bits(),
                    ),
                    _ => unreachable!(),
                };
                let nan = match &s {
                    CpuStorage::F16(v) => v[i].is_nan(),
                    _ => half::bf16::from_bits(got).is_nan(),
                };
                if x.is_nan() {
                    assert!(nan, "{dt:?}: NaN stays NaN");
                    assert!(back[i].is_nan());
                    continue;
                }
                assert_eq!(got, want, "{dt:?} rounding of {x:e} ({:#x})", x.to_bits());
                let wide = match &s {
                    CpuStorage::F16(v) => Elem::to_f64(v[i]),
                    CpuStorage::BF16(v) => Elem::to_f64(v[i]),
                    _ => unreachable!(),
                };
                assert_eq!(
                    back[i].to_bits(),
                    (wide as f32).to_bits(),
                    "{dt:?} widening"
                );
            }
        }
        assert!(widen(&CpuStorage::F32(vec![1.0])).is_none());
        assert_eq!(Half::of(DType::BF16), Some(Half::BF16));
        assert_eq!(Half::of(DType::F32), None);
    }
}
