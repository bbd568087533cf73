//! Convolutions with an epilogue: `relu(conv2d(x, w, b) + residual)` as one pass over the output
//! on the CPU and inside the convolution kernel on a GPU ([`conv2d_fused`], which ONNX import
//! runs for `Conv → [Add →] Relu` chains).

use super::conv::conv2d_with_untraced;
use crate::backend::ConvEpilogue;
use crate::nn::functional::{conv2d_with, Conv2dFuncOptions};
use crate::{DType, Result, Tensor};

/// `relu(conv2d(input, weight, bias) + residual)`, the residual and the relu each optional, in one
/// pass over the output on the CPU (the epilogue of the convolution's copy-out) and as the GPU
/// kernel's last step, when nothing needs a gradient. With autograd, autocast or an export
/// capture in force, or for other dtypes than f32 (and f64 on the CPU) it runs the ops
/// themselves; the values are the same either way (the additions in the same order). ONNX import
/// runs `Conv → Relu` and `Conv → Add → Relu` chains with it.
pub(crate) fn conv2d_fused(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    options: Conv2dFuncOptions,
    residual: Option<&Tensor>,
    relu: bool,
) -> Result<Tensor> {
    let grads = crate::autograd::is_grad_enabled()
        && [Some(input), Some(weight), bias, residual]
            .into_iter()
            .flatten()
            .any(Tensor::requires_grad);
    let dt = input.dtype();
    let fusable = !grads
        && matches!(dt, DType::F32 | DType::F64)
        && [Some(weight), bias, residual]
            .into_iter()
            .flatten()
            .all(|t| t.dtype() == dt && t.device() == input.device())
        && crate::amp::autocast_dtype(&input.device()).is_none()
        && !crate::onnx::trace::capturing();
    if !fusable {
        let mut y = conv2d_with(input, weight, bias, options)?;
        if let Some(r) = residual {
            y = y.add(r)?;
        }
        return if relu { y.relu() } else { Ok(y) };
    }
    conv2d_with_untraced(
        input,
        weight,
        bias,
        options,
        ConvEpilogue { residual, relu },
    )
}

impl ConvEpilogue<'_, Tensor> {
    /// [`conv2d_fused`]'s epilogue by ops: `+ residual`, then `relu`.
    pub(crate) fn apply(self, y: Tensor) -> Result<Tensor> {
        let y = match self.residual {
            Some(r) => y.add(r)?,
            None => y,
        };
        if self.relu {
            y.relu()
        } else {
            Ok(y)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::functional::{conv2d_with, Conv2dFuncOptions};
    use crate::Device;

    /// The fused epilogue equals the ops it replaces, bit for bit, on every CPU convolution path:
    /// a 1×1 (the sample read as it is), a 3×1 (the phase layout as wide as the output), 3×3 with
    /// padding and stride 2 (the wide product copied out), and a padding wider than the image (the
    /// unfold), in f32 and f64, with NaN, infinities and -0 in the input.
    #[test]
    fn conv2d_fused_equals_the_ops_it_replaces() -> Result<()> {
        let dev = Device::Cpu;
        // (kernel, stride, padding)
        let cases = [
            ((1, 1), 1, 0),
            ((3, 1), 1, 0),
            ((3, 3), 2, 1),
            ((2, 2), 1, 3),
        ];
        for dt in [DType::F32, DType::F64] {
            for ((kh, kw), s, p) in cases {
                let mut xv: Vec<f64> = (0..2 * 3 * 5 * 6)
                    .map(|i| ((i * 37 % 23) as f64 - 11.0) / 7.0)
                    .collect();
                (xv[3], xv[50], xv[71]) = (f64::NAN, f64::NEG_INFINITY, -0.0);
                let x = Tensor::from_vec(xv, [2, 3, 5, 6], &dev)?.to_dtype(dt)?;
                let w = Tensor::randn([4, 3, kh, kw], &dev)?.to_dtype(dt)?;
                let b = Tensor::randn([4], &dev)?.to_dtype(dt)?;
                let opts = Conv2dFuncOptions {
                    stride: s.into(),
                    padding: p.into(),
                    ..Default::default()
                };
                let y = conv2d_with(&x, &w, Some(&b), opts)?;
                let r = Tensor::randn(y.shape(), &dev)?.to_dtype(dt)?;
                for (residual, relu) in [(None, true), (Some(&r), false), (Some(&r), true)] {
                    for bias in [None, Some(&b)] {
                        let fused = conv2d_fused(&x, &w, bias, opts, residual, relu)?;
                        let mut want = conv2d_with(&x, &w, bias, opts)?;
                        if let Some(r) = residual {
                            want = want.add(r)?;
                        }
                        if relu {
                            want = want.relu()?;
                        }
                        let bits = |t: &Tensor| -> Result<Vec<u64>> {
                            Ok(t.to_dtype(DType::F64)?
                                .to_vec::<f64>()?
                                .iter()
                                .map(|v| if v.is_nan() { u64::MAX } else { v.to_bits() })
                                .collect())
                        };
                        let case = format!(
                            "{dt:?} k {kh}x{kw} s {s} p {p} residual {} relu {relu} bias {}",
                            residual.is_some(),
                            bias.is_some()
                        );
                        assert_eq!(bits(&fused)?, bits(&want)?, "{case}");
                        assert!(
                            bits(&want)?.contains(&u64::MAX),
                            "{case}: no NaN reached the output"
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// On a GPU the fused f32 kernel equals the ops bit for bit too, with NaN, infinities and -0
    /// in the input and in the residual, in fewer dispatches; and where the adapter caps a
    /// shader's loops (llvmpipe) a K past the cap is summed in several launches, the residual
    /// and relu applied once, by the last.
    #[test]
    fn the_gpu_kernel_fuses_the_epilogue_bit_for_bit() -> Result<()> {
        let Some(ctx) = crate::backend::gpu::test_context() else {
            return Ok(());
        };
        let (cpu, gpu) = (Device::Cpu, Device::Gpu(0));
        // (input shape, kernel, stride, padding)
        let big_k = ctx.loop_budget().map_or(300, |b| b / 9 + 7);
        let cases = [
            ([2, 3, 5, 6], (3, 3), 2, 1),
            ([2, 3, 5, 6], (1, 1), 1, 0),
            ([1, big_k, 3, 3], (3, 3), 1, 0),
        ];
        for (shape, (kh, kw), s, p) in cases {
            let n: usize = shape.iter().product();
            let mut xv: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0)
                .collect();
            (xv[3], xv[50], xv[71]) = (f32::NAN, f32::NEG_INFINITY, -0.0);
            let x = Tensor::from_vec(xv, shape, &cpu)?.to(&gpu)?;
            let w = Tensor::randn([4, shape[1], kh, kw], &cpu)?.to(&gpu)?;
            let b = Tensor::randn([4], &cpu)?.to(&gpu)?;
            let opts = Conv2dFuncOptions {
                stride: s.into(),
                padding: p.into(),
                ..Default::default()
            };
            let y = conv2d_with(&x, &w, Some(&b), opts)?;
            let mut rv = Tensor::randn(y.shape(), &cpu)?.to_vec::<f32>()?;
            (rv[0], rv[1]) = (f32::INFINITY, -0.0);
            let r = Tensor::from_vec(rv, y.shape(), &cpu)?.to(&gpu)?;
            for (residual, relu) in [(None, true), (Some(&r), false), (Some(&r), true)] {
                // The first GEMM of a shape bucket may run every candidate tile (the tuner,
                // `gpu/tune.rs`): the second call is counted.
                conv2d_fused(&x, &w, Some(&b), opts, residual, relu)?;
                let before = ctx.stats().dispatches;
                let fused = conv2d_fused(&x, &w, Some(&b), opts, residual, relu)?;
                let fused_dispatches = ctx.stats().dispatches - before;
                let before = ctx.stats().dispatches;
                let mut want = conv2d_with(&x, &w, Some(&b), opts)?;
                if let Some(r) = residual {
                    want = want.add(r)?;
                }
                if relu {
                    want = want.relu()?;
                }
                let op_dispatches = ctx.stats().dispatches - before;
                let bits = |t: &Tensor| -> Result<Vec<u32>> {
                    Ok(t.to_vec::<f32>()?
                        .iter()
                        .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                        .collect())
                };
                let case = format!(
                    "{shape:?} k {kh}x{kw} residual {} relu {relu}",
                    residual.is_some()
                );
                assert_eq!(bits(&fused)?, bits(&want)?, "{case}");
                assert!(
                    fused_dispatches < op_dispatches,
                    "{case}: {fused_dispatches} dispatches fused, {op_dispatches} by ops"
                );
            }
        }
        Ok(())
    }
}
