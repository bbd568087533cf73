//! Finite-difference gradient checking in f64 on the CPU (like `torch.autograd.gradcheck`).

use crate::{DType, Device, Error, Result, Tensor};

/// Compare the analytic gradient of `sum(f(inputs) * w)` (w a fixed random weighting) with central
/// differences, for every element of every input. Inputs are converted to f64 CPU leaves.
///
/// ```
/// use wgtorch::{autograd::gradcheck, Device, Tensor};
/// let x = Tensor::from_vec(vec![0.3f64, -1.2, 2.0], [3], &Device::Cpu)?;
/// gradcheck(|t| t[0].tanh(), &[x], 1e-6, 1e-5, 1e-4)?;
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<()> {
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            Ok(t.to(&Device::Cpu)?
                .to_dtype(DType::F64)?
                .detach()
                .contiguous()?
                .requires_grad_(true))
        })
        .collect::<Result<_>>()?;
    let out = f(&leaves)?;
    let weights = {
        let n = out.numel();
        let v: Vec<f64> = (0..n)
            .map(|i| 0.5 + ((i * 7919) % 13) as f64 / 13.0)
            .collect();
        Tensor::from_vec(v, out.shape(), &Device::Cpu)?
    };
    let scalar = |ins: &[Tensor]| -> Result<f64> {
        let _g = crate::no_grad();
        f(ins)?
            .to_dtype(DType::F64)?
            .mul(&weights)?
            .sum_all()?
            .item()
    };
    out.to_dtype(DType::F64)?
        .mul(&weights)?
        .sum_all()?
        .backward()?;
    for (k, leaf) in leaves.iter().enumerate() {
        let analytic = match leaf.grad() {
            Some(g) => g.to_vec::<f64>()?,
            None => vec![0.0; leaf.numel()],
        };
        let base = leaf.to_vec::<f64>()?;
        for i in 0..base.len() {
            let probe = |delta: f64| -> Result<f64> {
                let mut v = base.clone();
                v[i] += delta;
                let mut ins: Vec<Tensor> = leaves.iter().map(|t| t.detach()).collect();
                ins[k] = Tensor::from_vec(v, leaf.shape(), &Device::Cpu)?;
                scalar(&ins)
            };
            let numeric = (probe(eps)? - probe(-eps)?) / (2.0 * eps);
            let a = analytic[i];
            if (a - numeric).abs() > atol + rtol * numeric.abs() {
                return Err(Error::Autograd(format!(
                    "Jacobian mismatch for output 0 with respect to input {k}, element {i}: numerical {numeric} vs analytical {a}"
                )));
            }
        }
    }
    Ok(())
}
