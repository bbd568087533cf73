//! Losses as modules (thin wrappers over `nn::functional`): each holds the functional's options
//! struct; `Xxx::new()` has PyTorch's defaults and `Xxx::with_options(XxxOptions { .. })` the
//! rest, as `torch.nn.XxxLoss(**kwargs)`.
//!
//! ```
//! use wgtorch::nn::{functional as F, CrossEntropyLoss};
//! use wgtorch::{Device, Tensor};
//! let x = Tensor::from_slice(&[2.0f32, 0.0, 0.0, 2.0], [2, 2], &Device::Cpu)?;
//! let y = Tensor::from_slice(&[0i32, 1], [2], &Device::Cpu)?;
//! let ce = CrossEntropyLoss::with_options(F::CrossEntropyOptions {
//!     label_smoothing: 0.1,
//!     ..Default::default()
//! });
//! assert!(ce.forward(&x, &y)?.item()? > CrossEntropyLoss::new().forward(&x, &y)?.item()?);
//! # Ok::<(), wgtorch::Error>(())
//! ```

use crate::ops::{self, *};
use crate::{Result, Tensor};

macro_rules! loss_module {
    ($(#[$doc:meta])* $name:ident, $opts:ident, |$o:ident, $($a:ident),+| $call:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $name {
            /// The functional's keywords.
            pub options: $opts,
        }
        impl $name {
            /// With PyTorch's defaults.
            pub fn new() -> Self {
                Self::default()
            }
            /// With the given keywords.
            pub fn with_options(options: $opts) -> Self {
                $name { options }
            }
            /// The loss of the inputs.
            pub fn forward(&self, $($a: &Tensor),+) -> Result<Tensor> {
                #[allow(clippy::clone_on_copy)]
                let $o = self.options.clone();
                $call
            }
        }
    };
}

loss_module!(
    /// Cross-entropy of logits against class indices (torch.nn.CrossEntropyLoss): `input`
    /// `[N, C]` (or `[N, C, d...]`, or `[C]`) floating logits, `target` `[N]` (`[N, d...]`, `[]`)
    /// integer class indices; the mean over the batch by default. See
    /// [`functional::cross_entropy_with`](super::functional::cross_entropy_with) for the
    /// options (class weights, `ignore_index`, label smoothing, reduction) and errors.
    ///
    /// ```
    /// use wgtorch::nn::CrossEntropyLoss;
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let logits = Tensor::zeros([2, 2], &dev)?.requires_grad_(true);
    /// let target = Tensor::from_slice(&[0i64, 1], [2], &dev)?;
    /// let loss = CrossEntropyLoss::new().forward(&logits, &target)?;
    /// assert!((loss.item()? - 2f64.ln()).abs() < 1e-6); // uniform over 2 classes
    /// loss.backward()?;
    /// assert_eq!(logits.grad().unwrap().shape(), &[2, 2]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    CrossEntropyLoss, CrossEntropyOptions, |o, input, target| ops::cross_entropy_with(input, target, o)
);
loss_module!(
    /// Negative log-likelihood of log-probabilities (torch.nn.NLLLoss).
    NLLLoss, NllLossOptions, |o, input, target| ops::nll_loss_with(input, target, o)
);
loss_module!(
    /// Mean squared error (torch.nn.MSELoss): `input` and `target` floating, of the same shape
    /// (else a shape error); mean by default.
    ///
    /// ```
    /// use wgtorch::nn::{functional::{MseLossOptions, Reduction}, MSELoss};
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let (x, y) = (Tensor::from_slice(&[1.0f32, 3.0], [2], &dev)?, Tensor::zeros([2], &dev)?);
    /// assert_eq!(MSELoss::new().forward(&x, &y)?.item()?, 5.0);
    /// let opts = MseLossOptions { reduction: Reduction::Sum, ..Default::default() };
    /// let sum = MSELoss::with_options(opts);
    /// assert_eq!(sum.forward(&x, &y)?.item()?, 10.0);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    MSELoss, MseLossOptions, |o, input, target| ops::mse_loss_with(input, target, o)
);
loss_module!(
    /// Mean absolute error (torch.nn.L1Loss).
    L1Loss, L1LossOptions, |o, input, target| ops::l1_loss_with(input, target, o)
);
loss_module!(
    /// Smooth L1 loss (torch.nn.SmoothL1Loss).
    SmoothL1Loss, SmoothL1LossOptions, |o, input, target| ops::smooth_l1_loss_with(input, target, o)
);
loss_module!(
    /// Huber loss (torch.nn.HuberLoss).
    HuberLoss, HuberLossOptions, |o, input, target| ops::huber_loss_with(input, target, o)
);
loss_module!(
    /// Binary cross-entropy of probabilities (torch.nn.BCELoss).
    BCELoss, BinaryCrossEntropyOptions, |o, input, target| ops::binary_cross_entropy_with(input, target, o)
);
loss_module!(
    /// Binary cross-entropy on logits (torch.nn.BCEWithLogitsLoss).
    BCEWithLogitsLoss, BinaryCrossEntropyWithLogitsOptions, |o, input, target| {
        ops::binary_cross_entropy_with_logits_with(input, target, o)
    }
);
loss_module!(
    /// Kullback-Leibler divergence (torch.nn.KLDivLoss).
    KLDivLoss, KlDivOptions, |o, input, target| ops::kl_div_with(input, target, o)
);
loss_module!(
    /// Margin ranking loss (torch.nn.MarginRankingLoss).
    MarginRankingLoss, MarginRankingLossOptions, |o, input1, input2, target| {
        ops::margin_ranking_loss_with(input1, input2, target, o)
    }
);
loss_module!(
    /// Cosine similarity along a dim (torch.nn.CosineSimilarity).
    CosineSimilarity, CosineSimilarityOptions, |o, x1, x2| ops::cosine_similarity_with(x1, x2, o)
);
