//! Layers: Linear, Conv2d, pooling, Dropout, Embedding, Flatten and the activations. Each takes
//! PyTorch's required arguments in `new` and its keyword arguments in an options struct
//! (`with_options`), and implements [`Forward`].

use super::functional::{self as F, padding_index, Size2};
use super::init;
use super::module::Forward;
use super::Module;
use crate::ops::{AvgPool2dOptions, Conv2dFuncOptions, MaxPool2dOptions};
use crate::{Device, Error, Result, Tensor};

/// Implement [`Forward`] with the type's inherent `forward` (so a layer's `forward` needs no
/// trait import, and the trait reaches the same code).
macro_rules! forward_by_inherent {
    ($($t:ty),* $(,)?) => {$(
        impl Forward for $t {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                <$t>::forward(self, x)
            }
        }
    )*};
}
pub(crate) use forward_by_inherent;

fn uniform_param(shape: &[usize], bound: f64, dev: &Device) -> Result<Tensor> {
    let t = Tensor::zeros(shape, dev)?;
    init::uniform_(&t, -bound, bound)?;
    Ok(t.requires_grad_(true))
}

/// `Linear`'s keyword arguments (PyTorch's: `bias=True`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearOptions {
    /// Learn an additive bias.
    pub bias: bool,
}

impl Default for LinearOptions {
    fn default() -> Self {
        LinearOptions { bias: true }
    }
}

/// `y = x Wᵀ + b` (torch.nn.Linear) with PyTorch's default initialisation (U(±1/√in_features)).
///
/// ```
/// use wgtorch::nn::{Linear, LinearOptions, ModuleExt};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let fc = Linear::new(4, 2, &dev)?;
/// assert_eq!(fc.forward(&Tensor::zeros([3, 4], &dev)?)?.shape(), &[3, 2]);
/// let no_bias = Linear::with_options(4, 2, LinearOptions { bias: false }, &dev)?;
/// assert_eq!(no_bias.named_parameters().len(), 1);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct Linear {
    /// `[out_features, in_features]`
    #[param]
    pub weight: Tensor,
    /// `[out_features]`
    #[param]
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer with a bias, on `dev`.
    pub fn new(in_features: usize, out_features: usize, dev: &Device) -> Result<Linear> {
        Linear::with_options(in_features, out_features, LinearOptions::default(), dev)
    }
    /// A layer with keyword arguments.
    pub fn with_options(
        in_features: usize,
        out_features: usize,
        options: LinearOptions,
        dev: &Device,
    ) -> Result<Linear> {
        let bound = 1.0 / (in_features.max(1) as f64).sqrt();
        Ok(Linear {
            weight: uniform_param(&[out_features, in_features], bound, dev)?,
            bias: if options.bias {
                Some(uniform_param(&[out_features], bound, dev)?)
            } else {
                None
            },
        })
    }
    /// `x Wᵀ + b` over the last dimension of `x`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight, self.bias.as_ref())
    }
}

/// `Conv2d`'s keyword arguments (PyTorch's names and defaults: stride 1, padding 0, dilation
/// 1, groups 1, bias true; zero padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step of the window.
    pub stride: Size2,
    /// Zero padding on each side.
    pub padding: Size2,
    /// Spacing between kernel taps.
    pub dilation: Size2,
    /// Channel groups.
    pub groups: usize,
    /// Learn an additive bias.
    pub bias: bool,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: Size2([1, 1]),
            padding: Size2([0, 0]),
            dilation: Size2([1, 1]),
            groups: 1,
            bias: true,
        }
    }
}

/// 2-D convolution layer (torch.nn.Conv2d), PyTorch's default initialisation.
///
/// ```
/// use wgtorch::nn::{Conv2d, Conv2dOptions};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let x = Tensor::zeros([1, 1, 28, 28], &dev)?;
/// let conv = Conv2d::new(1, 32, 3, &dev)?; // nn.Conv2d(1, 32, 3)
/// assert_eq!(conv.forward(&x)?.shape(), &[1, 32, 26, 26]);
/// let conv = Conv2d::with_options(1, 32, 3, Conv2dOptions { stride: 2.into(), padding: 1.into(), ..Default::default() }, &dev)?;
/// assert_eq!(conv.forward(&x)?.shape(), &[1, 32, 14, 14]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct Conv2d {
    /// `[out, in/groups, kh, kw]`
    #[param]
    pub weight: Tensor,
    /// `[out]`
    #[param]
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
    /// `nn.Conv2d(in_channels, out_channels, kernel_size)`: stride 1, no padding, a bias.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Size2>,
        dev: &Device,
    ) -> Result<Conv2d> {
        Conv2d::with_options(
            in_channels,
            out_channels,
            kernel_size,
            Conv2dOptions::default(),
            dev,
        )
    }
    /// A layer with keyword arguments.
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Size2>,
        options: Conv2dOptions,
        dev: &Device,
    ) -> Result<Conv2d> {
        let Size2(kernel) = kernel_size.into();
        let groups = options.groups;
        if groups == 0 {
            return Err(Error::arg("Conv2d", "groups must be a positive integer"));
        }
        if !in_channels.is_multiple_of(groups) {
            return Err(Error::arg(
                "Conv2d",
                "in_channels must be divisible by groups",
            ));
        }
        if !out_channels.is_multiple_of(groups) {
            return Err(Error::arg(
                "Conv2d",
                "out_channels must be divisible by groups",
            ));
        }
        let fan_in = (in_channels / groups)
            .checked_mul(kernel[0])
            .and_then(|v| v.checked_mul(kernel[1]))
            .ok_or_else(|| Error::arg("Conv2d", format!("kernel_size {kernel:?} is too large")))?;
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        Ok(Conv2d {
            weight: uniform_param(
                &[out_channels, in_channels / groups, kernel[0], kernel[1]],
                bound,
                dev,
            )?,
            bias: if options.bias {
                Some(uniform_param(&[out_channels], bound, dev)?)
            } else {
                None
            },
            stride: options.stride.0,
            padding: options.padding.0,
            dilation: options.dilation.0,
            groups,
        })
    }
    /// Convolve `[N, C, H, W]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::conv2d_with(
            x,
            &self.weight,
            self.bias.as_ref(),
            Conv2dFuncOptions {
                stride: Size2(self.stride),
                padding: Size2(self.padding),
                dilation: Size2(self.dilation),
                groups: self.groups,
            },
        )
    }
}

/// Stateless activations: a unit struct, `new()`, an inherent `forward` and `Forward`.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, |$x:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Module, Clone, Copy, Debug, Default)]
        pub struct $name;
        impl $name {
            /// The layer (it has no arguments).
            pub fn new() -> $name {
                $name
            }
            /// Apply the activation.
            pub fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                $body
            }
        }
        forward_by_inherent!($name);
    };
}

activation!(/// `max(x, 0)` (torch.nn.ReLU).
    ReLU, |x| x.relu());
activation!(/// `x * sigmoid(x)` (torch.nn.SiLU).
    SiLU, |x| x.silu());
activation!(/// Logistic sigmoid (torch.nn.Sigmoid).
    Sigmoid, |x| x.sigmoid());
activation!(/// tanh (torch.nn.Tanh).
    Tanh, |x| x.tanh());

/// GELU's `approximate` argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Approximate {
    /// `approximate='none'`: the exact erf form (PyTorch's default).
    #[default]
    None,
    /// `approximate='tanh'`.
    Tanh,
}

/// `GELU`'s keyword arguments (PyTorch's: `approximate='none'`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GELUOptions {
    /// Exact or tanh approximation.
    pub approximate: Approximate,
}

/// Gaussian error linear unit (torch.nn.GELU).
///
/// ```
/// use wgtorch::nn::{Approximate, GELUOptions, GELU};
/// let exact = GELU::new();
/// let tanh = GELU::with_options(GELUOptions { approximate: Approximate::Tanh });
/// assert_eq!(tanh.approximate, Approximate::Tanh);
/// # let _ = exact;
/// ```
#[derive(Module, Clone, Copy, Debug, Default)]
pub struct GELU {
    /// Exact or tanh approximation.
    #[module(skip)]
    pub approximate: Approximate,
}

impl GELU {
    /// The exact GELU.
    pub fn new() -> GELU {
        GELU::default()
    }
    /// With keyword arguments.
    pub fn with_options(options: GELUOptions) -> GELU {
        GELU {
            approximate: options.approximate,
        }
    }
    /// Apply it.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self.approximate {
            Approximate::None => x.gelu(),
            Approximate::Tanh => x.gelu_tanh(),
        }
    }
}

/// Leaky ReLU (torch.nn.LeakyReLU): `x` where positive, `negative_slope * x` elsewhere.
/// `LeakyReLU::new(0.2)` is `nn.LeakyReLU(0.2)`; `LeakyReLU::default()` has PyTorch's 0.01.
#[derive(Module, Clone, Copy, Debug)]
pub struct LeakyReLU {
    /// Slope for negative inputs.
    pub negative_slope: f64,
}

impl LeakyReLU {
    /// With the given slope.
    pub fn new(negative_slope: f64) -> LeakyReLU {
        LeakyReLU { negative_slope }
    }
    /// Apply it.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.leaky_relu(self.negative_slope)
    }
}

impl Default for LeakyReLU {
    fn default() -> Self {
        LeakyReLU::new(0.01)
    }
}

/// `Flatten`'s keyword arguments (PyTorch's: `start_dim=1, end_dim=-1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlattenOptions {
    /// First dim flattened.
    pub start_dim: isize,
    /// Last dim flattened (inclusive; negative counts from the end).
    pub end_dim: isize,
}

impl Default for FlattenOptions {
    fn default() -> Self {
        FlattenOptions {
            start_dim: 1,
            end_dim: -1,
        }
    }
}

/// Flatten dims `start_dim..=end_dim` into one (torch.nn.Flatten; by default all but the batch
/// dimension).
#[derive(Module, Clone, Copy, Debug)]
pub struct Flatten {
    /// First dim flattened.
    pub start_dim: isize,
    /// Last dim flattened.
    pub end_dim: isize,
}

impl Flatten {
    /// PyTorch's default: flatten all but the batch dimension.
    pub fn new() -> Flatten {
        Flatten::with_options(FlattenOptions::default())
    }
    /// With keyword arguments.
    pub fn with_options(options: FlattenOptions) -> Flatten {
        Flatten {
            start_dim: options.start_dim,
            end_dim: options.end_dim,
        }
    }
    /// Apply it.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.start_dim, self.end_dim)
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten::new()
    }
}

/// 2-D max pooling (torch.nn.MaxPool2d): `MaxPool2d::new(2)` is `nn.MaxPool2d(2)` (stride =
/// kernel_size).
///
/// ```
/// use wgtorch::nn::{functional::MaxPool2dOptions, MaxPool2d};
/// use wgtorch::{Device, Tensor};
/// let x = Tensor::zeros([1, 3, 8, 8], &Device::Cpu)?;
/// assert_eq!(MaxPool2d::new(2).forward(&x)?.shape(), &[1, 3, 4, 4]);
/// let p = MaxPool2d::with_options(3, MaxPool2dOptions { stride: Some(1.into()), padding: 1.into(), ..Default::default() });
/// assert_eq!(p.forward(&x)?.shape(), &[1, 3, 8, 8]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug)]
pub struct MaxPool2d {
    /// Window size.
    #[module(skip)]
    pub kernel_size: Size2,
    /// Keyword arguments.
    #[module(skip)]
    pub options: MaxPool2dOptions,
}

impl MaxPool2d {
    /// Stride = kernel_size, no padding.
    pub fn new(kernel_size: impl Into<Size2>) -> MaxPool2d {
        MaxPool2d::with_options(kernel_size, MaxPool2dOptions::default())
    }
    /// With keyword arguments.
    pub fn with_options(kernel_size: impl Into<Size2>, options: MaxPool2dOptions) -> MaxPool2d {
        MaxPool2d {
            kernel_size: kernel_size.into(),
            options,
        }
    }
    /// Pool `[N, C, H, W]` or `[C, H, W]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::max_pool2d_with(x, self.kernel_size, self.options)
    }
}

/// 2-D average pooling (torch.nn.AvgPool2d): `AvgPool2d::new(2)` is `nn.AvgPool2d(2)`.
#[derive(Module, Clone, Copy, Debug)]
pub struct AvgPool2d {
    /// Window size.
    #[module(skip)]
    pub kernel_size: Size2,
    /// Keyword arguments.
    #[module(skip)]
    pub options: AvgPool2dOptions,
}

impl AvgPool2d {
    /// Stride = kernel_size, no padding.
    pub fn new(kernel_size: impl Into<Size2>) -> AvgPool2d {
        AvgPool2d::with_options(kernel_size, AvgPool2dOptions::default())
    }
    /// With keyword arguments.
    pub fn with_options(kernel_size: impl Into<Size2>, options: AvgPool2dOptions) -> AvgPool2d {
        AvgPool2d {
            kernel_size: kernel_size.into(),
            options,
        }
    }
    /// Pool `[N, C, H, W]` or `[C, H, W]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::avg_pool2d_with(x, self.kernel_size, self.options)
    }
}

/// Adaptive average pooling to a fixed output size (torch.nn.AdaptiveAvgPool2d).
#[derive(Module, Clone, Copy, Debug)]
pub struct AdaptiveAvgPool2d {
    /// `[oh, ow]`.
    #[module(skip)]
    pub output_size: Size2,
}

impl AdaptiveAvgPool2d {
    /// Pool to `output_size` (one number or `[oh, ow]`).
    pub fn new(output_size: impl Into<Size2>) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d {
            output_size: output_size.into(),
        }
    }
    /// Pool `[N, C, H, W]` or `[C, H, W]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::adaptive_avg_pool2d(x, self.output_size)
    }
}

/// Zeroes elements with probability `p` in training and scales the rest by `1/(1-p)`; identity in
/// eval mode (torch.nn.Dropout; `Dropout::new(0.1)` is `nn.Dropout(0.1)`, `Dropout::default()`
/// has PyTorch's 0.5). Masks come from the default generator (seeded by `manual_seed`).
#[derive(Module, Clone, Debug)]
pub struct Dropout {
    /// Drop probability.
    pub p: f64,
    #[module(training)]
    training: bool,
}

impl Dropout {
    /// A dropout layer in training mode.
    pub fn new(p: f64) -> Result<Dropout> {
        F::check_dropout_p(p)?;
        Ok(Dropout { p, training: true })
    }
    /// Drop (training) or pass through (eval).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::dropout(x, self.p, self.training)
    }
}

impl Default for Dropout {
    fn default() -> Self {
        Dropout {
            p: 0.5,
            training: true,
        }
    }
}

/// `Embedding`'s keyword arguments (PyTorch's names and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbeddingOptions {
    /// This row starts at zero and gets no gradient (negative counts from the end).
    pub padding_idx: Option<isize>,
}

/// A lookup table of `num_embeddings` vectors, initialised N(0, 1) (torch.nn.Embedding).
///
/// ```
/// use wgtorch::nn::{Embedding, EmbeddingOptions};
/// use wgtorch::{Device, Tensor};
/// let dev = Device::Cpu;
/// let emb = Embedding::with_options(10, 3, EmbeddingOptions { padding_idx: Some(0) }, &dev)?;
/// let idx = Tensor::from_vec(vec![0i32, 4], [2], &dev)?;
/// let y = emb.forward(&idx)?;
/// assert_eq!(y.shape(), &[2, 3]);
/// assert_eq!(y.to_vec::<f32>()?[..3], [0.0; 3]);
/// # Ok::<(), wgtorch::Error>(())
/// ```
#[derive(Module)]
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`
    #[param]
    pub weight: Tensor,
    /// The padding row, resolved to a non-negative index.
    pub padding_idx: Option<usize>,
}

impl Embedding {
    /// A new table.
    pub fn new(num_embeddings: usize, embedding_dim: usize, dev: &Device) -> Result<Embedding> {
        Embedding::with_options(
            num_embeddings,
            embedding_dim,
            EmbeddingOptions::default(),
            dev,
        )
    }
    /// A new table with keyword arguments.
    pub fn with_options(
        num_embeddings: usize,
        embedding_dim: usize,
        options: EmbeddingOptions,
        dev: &Device,
    ) -> Result<Embedding> {
        let padding_idx = options
            .padding_idx
            .map(|p| padding_index(p, num_embeddings))
            .transpose()?;
        let w = Tensor::zeros([num_embeddings, embedding_dim], dev)?;
        init::normal_(&w, 0.0, 1.0)?;
        if let Some(p) = padding_idx {
            w.narrow(0, p, 1)?.zero_()?;
        }
        Ok(Embedding {
            weight: w.requires_grad_(true),
            padding_idx,
        })
    }
    /// Look up the rows named by the integer tensor `idx`.
    pub fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        F::embedding_with(
            idx,
            &self.weight,
            F::EmbeddingFuncOptions {
                padding_idx: self.padding_idx.map(|p| p as isize),
            },
        )
    }
}

forward_by_inherent!(
    Linear,
    Conv2d,
    GELU,
    LeakyReLU,
    Flatten,
    MaxPool2d,
    AvgPool2d,
    AdaptiveAvgPool2d,
    Dropout,
    Embedding
);
