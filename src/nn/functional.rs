//! Functional forms of layers and losses, named as in `torch.nn.functional`.

pub use super::attention::{
    scaled_dot_product_attention, scaled_dot_product_attention_with, SdpaOptions,
};
pub use crate::ops::{adaptive_avg_pool2d, avg_pool2d, batch_norm, conv2d, layer_norm, max_pool2d};
pub use crate::ops::{
    binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss, nll_loss, smooth_l1_loss,
    Reduction,
};
