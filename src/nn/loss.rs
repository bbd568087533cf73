//! Losses as modules (thin wrappers over `nn::functional`).

use crate::ops::{self, Reduction};
use crate::{Result, Tensor};

/// Cross-entropy over class indices.
#[derive(Clone, Debug)]
pub struct CrossEntropyLoss {
    /// How to combine.
    pub reduction: Reduction,
    /// Target value to skip (default -100).
    pub ignore_index: i64,
    /// Label smoothing in [0, 1].
    pub label_smoothing: f64,
}
impl Default for CrossEntropyLoss {
    fn default() -> Self {
        CrossEntropyLoss {
            reduction: Reduction::Mean,
            ignore_index: -100,
            label_smoothing: 0.0,
        }
    }
}
impl CrossEntropyLoss {
    /// Loss of `input` logits against `target` classes.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        ops::cross_entropy(
            input,
            target,
            self.reduction,
            self.ignore_index,
            self.label_smoothing,
        )
    }
}

/// Negative log-likelihood over log-probabilities.
#[derive(Clone, Debug)]
pub struct NLLLoss {
    /// How to combine.
    pub reduction: Reduction,
    /// Target value to skip.
    pub ignore_index: i64,
}
impl Default for NLLLoss {
    fn default() -> Self {
        NLLLoss {
            reduction: Reduction::Mean,
            ignore_index: -100,
        }
    }
}
impl NLLLoss {
    /// The loss.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        ops::nll_loss(input, target, self.reduction, self.ignore_index)
    }
}

macro_rules! simple_loss {
    ($(#[$doc:meta])* $name:ident, $f:path) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $name {
            /// How to combine.
            pub reduction: Reduction,
        }
        impl $name {
            /// The loss.
            pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
                $f(input, target, self.reduction)
            }
        }
    };
}
simple_loss!(/// Mean squared error.
    MSELoss, ops::mse_loss);
simple_loss!(/// Mean absolute error.
    L1Loss, ops::l1_loss);

/// Smooth L1 (Huber-like) loss.
#[derive(Clone, Debug)]
pub struct SmoothL1Loss {
    /// How to combine.
    pub reduction: Reduction,
    /// Switch point between quadratic and linear (default 1).
    pub beta: f64,
}
impl Default for SmoothL1Loss {
    fn default() -> Self {
        SmoothL1Loss {
            reduction: Reduction::Mean,
            beta: 1.0,
        }
    }
}
impl SmoothL1Loss {
    /// The loss.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        ops::smooth_l1_loss(input, target, self.reduction, self.beta)
    }
}

/// Binary cross-entropy on logits, with optional `pos_weight`.
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// How to combine.
    pub reduction: Reduction,
    /// Weight of positive examples, broadcast over the classes.
    pub pos_weight: Option<Tensor>,
}
impl BCEWithLogitsLoss {
    /// The loss.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        ops::binary_cross_entropy_with_logits(
            input,
            target,
            self.pos_weight.as_ref(),
            self.reduction,
        )
    }
}
