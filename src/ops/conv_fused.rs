//! Convolutions with an epilogue: `relu(conv2d(x, w, b) + residual)` as one pass over the output
//! on the CPU ([`conv2d_fused`], which ONNX import runs for `Conv → [Add →] Relu` chains).

use super::conv::conv2d_with_untraced;
use crate::backend::ConvEpilogue;
use crate::nn::functional::{conv2d_with, Conv2dFuncOptions};
use crate::{DType, Result, Tensor};

/// `relu(conv2d(input, weight, bias) + residual)`, the residual and the relu each optional, in one
/// pass over the output on the CPU (the epilogue of the convolution's copy-out) when nothing needs
/// a gradient. With autograd, autocast or an export capture in force, on a GPU, or for other
/// dtypes than f32 and f64 it runs the ops themselves; the values are the same either way (the
/// additions in the same order). ONNX import runs `Conv → Relu` and `Conv → Add → Relu` chains
/// with it.
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
        && !input.device().is_gpu()
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
}
