//! Parameter initialisers, as in `torch.nn.init` (values drawn from the default generator on the
//! host, then written into the tensor in place).

use crate::{Error, Result, Tensor};

/// Fan mode for Kaiming initialisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Preserve the forward pass's variance.
    FanIn,
    /// Preserve the backward pass's variance.
    FanOut,
}

/// PyTorch's `calculate_gain`.
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64> {
    Ok(match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "sigmoid" => 1.0,
        "tanh" => 5.0 / 3.0,
        "relu" => 2f64.sqrt(),
        "leaky_relu" => {
            let a = param.unwrap_or(0.01);
            (2.0 / (1.0 + a * a)).sqrt()
        }
        "selu" => 0.75,
        other => {
            return Err(Error::arg(
                "calculate_gain",
                format!("Unsupported nonlinearity {other}"),
            ))
        }
    })
}

/// (fan_in, fan_out) of a weight.
pub fn fans(t: &Tensor) -> Result<(usize, usize)> {
    if t.ndim() < 2 {
        return Err(Error::arg("init", format!("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (shape {:?})", t.shape())));
    }
    let rf: usize = t.shape()[2..].iter().product();
    Ok((t.shape()[1] * rf, t.shape()[0] * rf))
}

fn fill_with(t: &Tensor, mut f: impl FnMut(&mut crate::Generator) -> f64) -> Result<()> {
    let v: Vec<f64> = crate::with_default_generator(|g| (0..t.numel()).map(|_| f(g)).collect());
    let src = Tensor::from_f64(&v, t.shape(), t.dtype(), &t.device())?;
    let _g = crate::no_grad();
    t.copy_(&src)?;
    Ok(())
}

/// U(a, b).
pub fn uniform_(t: &Tensor, a: f64, b: f64) -> Result<()> {
    fill_with(t, |g| a + (b - a) * g.uniform())
}
/// N(mean, std²).
pub fn normal_(t: &Tensor, mean: f64, std: f64) -> Result<()> {
    fill_with(t, |g| mean + std * g.normal())
}
/// A constant.
pub fn constant_(t: &Tensor, v: f64) -> Result<()> {
    let _g = crate::no_grad();
    t.fill_(v).map(|_| ())
}
/// Zeros.
pub fn zeros_(t: &Tensor) -> Result<()> {
    constant_(t, 0.0)
}
/// Ones.
pub fn ones_(t: &Tensor) -> Result<()> {
    constant_(t, 1.0)
}

fn kaiming_std(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Result<f64> {
    let (fi, fo) = fans(t)?;
    let fan = if mode == FanMode::FanIn { fi } else { fo };
    Ok(calculate_gain(nonlinearity, Some(a))? / (fan as f64).sqrt())
}
/// He uniform: U(-b, b), b = gain * sqrt(3 / fan).
pub fn kaiming_uniform_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Result<()> {
    let b = 3f64.sqrt() * kaiming_std(t, a, mode, nonlinearity)?;
    uniform_(t, -b, b)
}
/// He normal: N(0, (gain / sqrt(fan))²).
pub fn kaiming_normal_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Result<()> {
    let s = kaiming_std(t, a, mode, nonlinearity)?;
    normal_(t, 0.0, s)
}
/// Glorot uniform.
pub fn xavier_uniform_(t: &Tensor, gain: f64) -> Result<()> {
    let (fi, fo) = fans(t)?;
    let b = gain * (6.0 / (fi + fo) as f64).sqrt();
    uniform_(t, -b, b)
}
/// Glorot normal.
pub fn xavier_normal_(t: &Tensor, gain: f64) -> Result<()> {
    let (fi, fo) = fans(t)?;
    normal_(t, 0.0, gain * (2.0 / (fi + fo) as f64).sqrt())
}
