//! The op registry. Elementwise ops are enums declared once, in `elementwise.rs` ([`UnaryOp`])
//! and `binary_op.rs` ([`BinaryOp`]); heavier ops sit one family per file with their backward rules beside them;
//! composite ops are written with other ops and so get both backends and autograd for free.
//!
//! The ops themselves are methods on [`Tensor`](crate::Tensor); this module holds their option
//! structs (each with PyTorch's defaults in `Default`) and the op enums.
//!
//! ```
//! use wgtorch::ops::{SortOptions, TopkOptions};
//! use wgtorch::{Device, Tensor};
//! let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0], [3], &Device::Cpu)?;
//! let (v, i) = x.sort_with(SortOptions { descending: true, ..Default::default() })?;
//! assert_eq!((v.to_vec::<f32>()?, i.to_vec::<i64>()?), (vec![3.0, 2.0, 1.0], vec![0, 2, 1]));
//! let (top, _) = x.topk_with(2, TopkOptions { largest: false, ..Default::default() })?;
//! assert_eq!(top.to_vec::<f32>()?, vec![1.0, 2.0]); // torch.topk(x, 2, largest=False)
//! # Ok::<(), wgtorch::Error>(())
//! ```

#[macro_use]
mod op_list;

pub(crate) mod binary_op;
mod clamp;
mod conv;
mod conv_fused;
mod distance;
mod einsum;
pub(crate) mod elementwise;
mod finite;
pub mod fused;
mod fused_grad;
mod index;
mod index_write;
mod inplace;
mod logical;
mod loss;
mod loss_pointwise;
mod lstm_layer;
mod matmul;
mod movement;
mod norm;
mod pointwise;
mod random;
mod reduce;
pub(crate) mod rnn_cell;
mod roll;
mod rounding;
mod sort;
mod tri;
mod views;

pub use binary_op::{BinaryOp, Operands};
pub(crate) use conv::transposed_as_forward;
pub use conv::*;
pub(crate) use conv_fused::conv2d_fused;
pub use distance::*;
pub use elementwise::{AutocastPolicy, OnIntegers, UnaryOp};
pub use finite::NanToNumOptions;
pub use index_write::IndexAddOptions;
pub use loss::*;
pub use loss_pointwise::*;
pub(crate) use lstm_layer::lstm_layer;
pub use norm::*;
pub use reduce::ReduceOp;
pub(crate) use rnn_cell::lstm_cell;
pub use sort::{SortOptions, TopkOptions};
pub use views::Indexing;
