//! Parameter initialisers, as in `torch.nn.init` (values drawn from the default generator on the
//! host, then written into the tensor in place, under `no_grad`, so a parameter stays a leaf).
//! They take a tensor of any shape and device; the fan-based ones (kaiming, xavier) need at
//! least 2 dims (`[out, in, ...]`), and an unknown nonlinearity name is refused.
//! Seeded by [`crate::manual_seed`]: the same values on every device.
//!
//! ```
//! use wgtorch::nn::init::{self, FanMode};
//! use wgtorch::nn::Linear;
//! use wgtorch::Device;
//! let fc = Linear::new(100, 50, &Device::Cpu)?;
//! // nn.init.kaiming_uniform_(fc.weight, nonlinearity='relu'): U(±sqrt(6 / fan_in))
//! init::kaiming_uniform_(&fc.weight, 0.0, FanMode::FanIn, "relu")?;
//! let (w, bound) = (fc.weight.to_vec::<f32>()?, (6.0f64 / 100.0).sqrt() as f32);
//! assert!(w.iter().all(|w| w.abs() <= bound));
//! assert!(w.iter().any(|w| w.abs() > 0.1)); // past Linear's default bound, 1/sqrt(100)
//! init::zeros_(fc.bias.as_ref().unwrap())?;
//! assert!(fc.bias.as_ref().unwrap().to_vec::<f32>()?.iter().all(|&b| b == 0.0));
//! assert!(fc.weight.requires_grad() && fc.weight.is_leaf());
//! # Ok::<(), wgtorch::Error>(())
//! ```

use crate::{Error, Result, Tensor};

/// Fan mode for Kaiming initialisation (PyTorch's `mode='fan_in'` / `'fan_out'`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Preserve the forward pass's variance.
    FanIn,
    /// Preserve the backward pass's variance.
    FanOut,
}

/// The recommended gain for a nonlinearity (torch.nn.init.calculate_gain): 1 for `linear`,
/// `conv1d`/`2d`/`3d` and `sigmoid`, 5/3 for `tanh`, √2 for `relu`, `√(2 / (1 + slope²))` for
/// `leaky_relu` (`param` is the negative slope, default 0.01), 3/4 for `selu`. Any other name is
/// an [`Error::InvalidArgument`].
///
/// ```
/// use wgtorch::nn::init::calculate_gain;
/// assert_eq!(calculate_gain("relu", None)?, 2f64.sqrt());
/// assert_eq!(calculate_gain("leaky_relu", Some(1.0))?, 1.0);
/// assert!(calculate_gain("swish", None).is_err());
/// # Ok::<(), wgtorch::Error>(())
/// ```
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

/// `(fan_in, fan_out)` of a weight `[out, in, ...]`: `in * receptive field` and
/// `out * receptive field`, the receptive field being the product of the dims after the first two
/// (PyTorch's `_calculate_fan_in_and_fan_out`). Fewer than 2 dims is an
/// [`Error::InvalidArgument`].
///
/// ```
/// use wgtorch::nn::init::fans;
/// use wgtorch::{Device, Tensor};
/// let conv_w = Tensor::zeros([16, 3, 5, 5], &Device::Cpu)?;
/// assert_eq!(fans(&conv_w)?, (3 * 25, 16 * 25));
/// assert!(fans(&Tensor::zeros([4], &Device::Cpu)?).is_err());
/// # Ok::<(), wgtorch::Error>(())
/// ```
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

/// Fill `t` with values from U(a, b) (torch.nn.init.uniform_).
pub fn uniform_(t: &Tensor, a: f64, b: f64) -> Result<()> {
    fill_with(t, |g| a + (b - a) * g.uniform())
}
/// Fill `t` with values from N(mean, std²) (torch.nn.init.normal_).
pub fn normal_(t: &Tensor, mean: f64, std: f64) -> Result<()> {
    fill_with(t, |g| mean + std * g.normal())
}
/// Fill `t` with `v` (torch.nn.init.constant_).
pub fn constant_(t: &Tensor, v: f64) -> Result<()> {
    let _g = crate::no_grad();
    t.fill_(v).map(|_| ())
}
/// Fill `t` with zeros (torch.nn.init.zeros_).
pub fn zeros_(t: &Tensor) -> Result<()> {
    constant_(t, 0.0)
}
/// Fill `t` with ones (torch.nn.init.ones_).
pub fn ones_(t: &Tensor) -> Result<()> {
    constant_(t, 1.0)
}

fn kaiming_std(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Result<f64> {
    let (fi, fo) = fans(t)?;
    let fan = if mode == FanMode::FanIn { fi } else { fo };
    Ok(calculate_gain(nonlinearity, Some(a))? / (fan as f64).sqrt())
}
/// He uniform (torch.nn.init.kaiming_uniform_): U(-b, b) with `b = gain * sqrt(3 / fan)`, `gain`
/// = [`calculate_gain`]`(nonlinearity, a)` and `fan` from [`fans`] by `mode`. PyTorch's defaults
/// are `a = 0`, `FanMode::FanIn`, `"leaky_relu"`. Errors as [`fans`] and [`calculate_gain`].
pub fn kaiming_uniform_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Result<()> {
    let b = 3f64.sqrt() * kaiming_std(t, a, mode, nonlinearity)?;
    uniform_(t, -b, b)
}
/// He normal (torch.nn.init.kaiming_normal_): N(0, (gain / sqrt(fan))²), with `gain` and `fan`
/// as in [`kaiming_uniform_`].
pub fn kaiming_normal_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Result<()> {
    let s = kaiming_std(t, a, mode, nonlinearity)?;
    normal_(t, 0.0, s)
}
/// Glorot uniform (torch.nn.init.xavier_uniform_): U(-b, b) with
/// `b = gain * sqrt(6 / (fan_in + fan_out))` (PyTorch's default `gain` is 1). Needs 2 or more dims.
///
/// ```
/// use wgtorch::nn::init;
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::zeros([20, 30], &Device::Cpu)?;
/// init::xavier_uniform_(&w, 1.0)?;
/// let b = (6.0f32 / 50.0).sqrt();
/// let v = w.to_vec::<f32>()?;
/// assert!(v.iter().all(|x| x.abs() <= b) && v.iter().any(|&x| x != 0.0));
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn xavier_uniform_(t: &Tensor, gain: f64) -> Result<()> {
    let (fi, fo) = fans(t)?;
    let b = gain * (6.0 / (fi + fo) as f64).sqrt();
    uniform_(t, -b, b)
}
/// Glorot normal (torch.nn.init.xavier_normal_): N(0, std²) with
/// `std = gain * sqrt(2 / (fan_in + fan_out))`. Needs 2 or more dims.
pub fn xavier_normal_(t: &Tensor, gain: f64) -> Result<()> {
    let (fi, fo) = fans(t)?;
    normal_(t, 0.0, gain * (2.0 / (fi + fo) as f64).sqrt())
}
