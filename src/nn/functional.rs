//! Functional forms of layers and losses, named as in `torch.nn.functional`.

pub use crate::ops::{adaptive_avg_pool2d, avg_pool2d, batch_norm, conv2d, layer_norm, max_pool2d};
pub use crate::ops::{
    binary_cross_entropy, binary_cross_entropy_with, binary_cross_entropy_with_logits,
    binary_cross_entropy_with_logits_with, cosine_similarity, cosine_similarity_with,
    cross_entropy, cross_entropy_with, huber_loss, huber_loss_with, kl_div, kl_div_with, l1_loss,
    l1_loss_with, margin_ranking_loss, margin_ranking_loss_with, mse_loss, mse_loss_with, nll_loss,
    nll_loss_with, smooth_l1_loss, smooth_l1_loss_with, BinaryCrossEntropyOptions,
    BinaryCrossEntropyWithLogitsOptions, CosineSimilarityOptions, CrossEntropyOptions,
    HuberLossOptions, KlDivOptions, L1LossOptions, MarginRankingLossOptions, MseLossOptions,
    NllLossOptions, Reduction, SmoothL1LossOptions,
};
