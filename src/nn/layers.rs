//! Layers: Linear, Conv2d, pooling, Dropout, Embedding, Flatten and the activations.

use super::init;
use super::module::{Kind, Module};
use crate::{Device, Error, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

fn uniform_param(shape: &[usize], bound: f64, dev: &Device) -> Result<Tensor> {
    let t = Tensor::zeros(shape, dev)?;
    init::uniform_(&t, -bound, bound)?;
    Ok(t.requires_grad_(true))
}

/// `y = x Wᵀ + b` with PyTorch's default initialisation (U(±1/√in_features)).
pub struct Linear {
    /// `[out_features, in_features]`
    pub weight: Tensor,
    /// `[out_features]`
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A new layer on `dev`.
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        dev: &Device,
    ) -> Result<Linear> {
        let bound = 1.0 / (in_features.max(1) as f64).sqrt();
        Ok(Linear {
            weight: uniform_param(&[out_features, in_features], bound, dev)?,
            bias: if bias {
                Some(uniform_param(&[out_features], bound, dev)?)
            } else {
                None
            },
        })
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight, self.bias.as_ref())
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f("weight", &self.weight, Kind::Param);
        if let Some(b) = &self.bias {
            f("bias", b, Kind::Param);
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        f("weight", &mut self.weight, Kind::Param);
        if let Some(b) = &mut self.bias {
            f("bias", b, Kind::Param);
        }
    }
}

/// 2-D convolution layer.
pub struct Conv2d {
    /// `[out, in/groups, kh, kw]`
    pub weight: Tensor,
    /// `[out]`
    pub bias: Option<Tensor>,
    /// Stride.
    pub stride: [usize; 2],
    /// Zero padding.
    pub padding: [usize; 2],
    /// Dilation.
    pub dilation: [usize; 2],
    /// Groups.
    pub groups: usize,
}

impl Conv2d {
    /// A square-kernel convolution with stride 1 and `padding`, PyTorch's default initialisation.
    pub fn new(
        in_ch: usize,
        out_ch: usize,
        kernel: usize,
        padding: usize,
        dev: &Device,
    ) -> Result<Conv2d> {
        Conv2d::with_options(
            in_ch,
            out_ch,
            [kernel, kernel],
            [1, 1],
            [padding, padding],
            [1, 1],
            1,
            true,
            dev,
        )
    }
    /// Every option.
    #[allow(clippy::too_many_arguments)]
    pub fn with_options(
        in_ch: usize,
        out_ch: usize,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        bias: bool,
        dev: &Device,
    ) -> Result<Conv2d> {
        if groups == 0 || in_ch % groups != 0 || out_ch % groups != 0 {
            return Err(Error::arg("Conv2d", format!("in_channels ({in_ch}) and out_channels ({out_ch}) must be divisible by groups ({groups})")));
        }
        let fan_in = in_ch / groups * kernel[0] * kernel[1];
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        Ok(Conv2d {
            weight: uniform_param(&[out_ch, in_ch / groups, kernel[0], kernel[1]], bound, dev)?,
            bias: if bias {
                Some(uniform_param(&[out_ch], bound, dev)?)
            } else {
                None
            },
            stride,
            padding,
            dilation,
            groups,
        })
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::ops::conv2d(
            x,
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f("weight", &self.weight, Kind::Param);
        if let Some(b) = &self.bias {
            f("bias", b, Kind::Param);
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        f("weight", &mut self.weight, Kind::Param);
        if let Some(b) = &mut self.bias {
            f("bias", b, Kind::Param);
        }
    }
}

macro_rules! stateless {
    ($(#[$doc:meta])* $name:ident $(($($field:ident: $ty:ty),*))?, |$s:ident, $x:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name { $($(pub $field: $ty),*)? }
        impl Module for $name {
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                let $s = self;
                $body
            }
            fn visit(&self, _f: &mut dyn FnMut(&str, &Tensor, Kind)) {}
            fn visit_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {}
        }
    };
}

stateless!(/// `max(x, 0)`
    ReLU, |_s, x| x.relu());
stateless!(/// GELU (`approximate='tanh'` when `tanh` is set).
    GELU(tanh: bool), |s, x| if s.tanh { x.gelu_tanh() } else { x.gelu() });
stateless!(/// `x * sigmoid(x)`
    SiLU, |_s, x| x.silu());
stateless!(/// Logistic sigmoid.
    Sigmoid, |_s, x| x.sigmoid());
stateless!(/// tanh.
    Tanh, |_s, x| x.tanh());
stateless!(/// Leaky ReLU.
    LeakyReLU(negative_slope: f64), |s, x| x.leaky_relu(s.negative_slope));
stateless!(/// Flatten dims `start_dim..=end_dim` (PyTorch's defaults are 1 and -1).
    Flatten(start_dim: isize, end_dim: isize), |s, x| x.flatten(s.start_dim, s.end_dim));
stateless!(/// 2-D max pooling.
    MaxPool2d(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]), |s, x| crate::ops::max_pool2d(x, s.kernel, s.stride, s.padding));
stateless!(/// 2-D average pooling.
    AvgPool2d(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]), |s, x| crate::ops::avg_pool2d(x, s.kernel, s.stride, s.padding));
stateless!(/// Adaptive average pooling to a fixed output size.
    AdaptiveAvgPool2d(output: [usize; 2]), |s, x| crate::ops::adaptive_avg_pool2d(x, s.output));

impl MaxPool2d {
    /// Square window with stride = kernel (PyTorch's default).
    pub fn new(kernel: usize) -> MaxPool2d {
        MaxPool2d {
            kernel: [kernel; 2],
            stride: [kernel; 2],
            padding: [0; 2],
        }
    }
}
impl AvgPool2d {
    /// Square window with stride = kernel.
    pub fn new(kernel: usize) -> AvgPool2d {
        AvgPool2d {
            kernel: [kernel; 2],
            stride: [kernel; 2],
            padding: [0; 2],
        }
    }
}
impl Flatten {
    /// PyTorch's default: flatten all but the batch dimension.
    pub fn new() -> Flatten {
        Flatten {
            start_dim: 1,
            end_dim: -1,
        }
    }
}
impl Default for Flatten {
    fn default() -> Self {
        Flatten::new()
    }
}

/// Zeroes elements with probability `p` in training and scales the rest by `1/(1-p)`; identity in
/// eval mode. Masks come from the default generator (seeded by `manual_seed`).
pub struct Dropout {
    /// Drop probability.
    pub p: f64,
    training: AtomicBool,
}

impl Dropout {
    /// A dropout layer in training mode.
    pub fn new(p: f64) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::arg(
                "Dropout",
                format!("dropout probability has to be between 0 and 1, but got {p}"),
            ));
        }
        Ok(Dropout {
            p,
            training: AtomicBool::new(true),
        })
    }
}

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if !self.training.load(Ordering::Relaxed) || self.p == 0.0 {
            return Ok(x.clone());
        }
        if self.p == 1.0 {
            return x.mul_scalar(0.0);
        }
        let keep = 1.0 - self.p;
        let m: Vec<f32> = crate::with_default_generator(|g| {
            (0..x.numel())
                .map(|_| {
                    if g.uniform() < keep {
                        (1.0 / keep) as f32
                    } else {
                        0.0
                    }
                })
                .collect()
        });
        let mask = Tensor::from_vec(m, x.shape(), &x.device())?.to_dtype(x.dtype())?;
        x.mul(&mask)
    }
    fn visit(&self, _f: &mut dyn FnMut(&str, &Tensor, Kind)) {}
    fn visit_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {}
    fn set_training(&mut self, on: bool) {
        self.training.store(on, Ordering::Relaxed);
    }
}

/// A lookup table of `num_embeddings` vectors, initialised N(0, 1).
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`
    pub weight: Tensor,
}

impl Embedding {
    /// A new table.
    pub fn new(num_embeddings: usize, embedding_dim: usize, dev: &Device) -> Result<Embedding> {
        let w = Tensor::zeros([num_embeddings, embedding_dim], dev)?;
        init::normal_(&w, 0.0, 1.0)?;
        Ok(Embedding {
            weight: w.requires_grad_(true),
        })
    }
}

impl Module for Embedding {
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        idx.embedding(&self.weight)
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        f("weight", &self.weight, Kind::Param);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        f("weight", &mut self.weight, Kind::Param);
    }
}
