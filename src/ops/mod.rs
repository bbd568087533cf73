//! The op registry. Elementwise ops are enums declared once in [`elementwise`]; heavier ops sit
//! one family per file with their backward rules beside them; composite ops are written with
//! other ops and so get both backends and autograd for free.

mod clamp;
mod conv;
mod distance;
mod einsum;
pub(crate) mod elementwise;
mod finite;
mod index;
mod index_write;
mod inplace;
mod logical;
mod loss;
mod loss_pointwise;
mod matmul;
mod movement;
mod norm;
mod pointwise;
mod random;
mod reduce;
mod rnn_cell;
mod roll;
mod sort;
mod tri;
mod views;

pub use conv::*;
pub use distance::*;
pub use elementwise::{BinaryOp, UnaryOp};
pub use finite::NanToNumOptions;
pub use index_write::IndexAddOptions;
pub use loss::*;
pub use loss_pointwise::*;
pub use norm::*;
pub use reduce::ReduceOp;
pub(crate) use rnn_cell::lstm_cell;
pub use sort::{SortOptions, TopkOptions};
pub use views::Indexing;
