//! # wgtorch
//!
//! PyTorch's way of working, in Rust, on any GPU (wgpu + WGSL) and on the CPU (rayon).
//!
//! ```
//! use wgtorch::{Device, Tensor};
//! let dev = Device::Cpu; // or Device::best()
//! wgtorch::manual_seed(0);
//! let x = Tensor::randn([4, 3], &dev)?.requires_grad_(true);
//! let y = x.square()?.sum_all()?;
//! y.backward()?;
//! let g = x.grad().unwrap().to_vec::<f32>()?;
//! let xv = x.to_vec::<f32>()?;
//! assert!((g[0] - 2.0 * xv[0]).abs() < 1e-6);
//! # Ok::<(), wgtorch::Error>(())
//! ```

#![deny(missing_docs)]

// `::wgtorch` paths (what `#[derive(Module)]` generates) also work inside the crate.
extern crate self as wgtorch;

pub mod amp;
pub mod autograd;
pub mod backend;
pub mod compile;
pub mod data;
mod device;
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub mod distributed;
pub mod dtype;
mod error;
pub mod io;
pub mod models;
pub mod nn;
pub mod onnx;
pub mod ops;
pub mod optim;
pub mod profiler;
mod rng;
pub mod shape;
mod tensor;
mod threads;

pub use autograd::{enable_grad, is_grad_enabled, no_grad};
pub use compile::{compile, compile_module};
pub use device::Device;
pub use dtype::{DType, Scalar};
pub use error::{Error, Result};
pub use rng::{manual_seed, with_default_generator, Generator};
pub use shape::IntoShape;
pub use tensor::Tensor;

/// What a PyTorch program has in scope: `use wgtorch::prelude::*;` brings the tensor types,
/// the [`Result`] and [`Error`] for your own functions, `nn` (with the [`nn::Module`] and
/// [`nn::ModuleExt`] traits), `F` (`torch.nn.functional`), `optim` (with the
/// [`optim::Optimizer`] trait), [`no_grad`] and [`manual_seed`].
///
/// ```
/// use wgtorch::prelude::*;
///
/// // Your own functions return wgtorch's Result, and raise with Error::msg.
/// fn affine(x: &Tensor, w: &Tensor) -> Result<Tensor> {
///     if x.dtype() != DType::F32 {
///         return Err(Error::msg(format!("expected float32, got {}", x.dtype())));
///     }
///     Ok(x.matmul(&w.t()?)? * 0.5 + 1.0) // x @ w.T * 0.5 + 1.0
/// }
///
/// manual_seed(0);
/// let dev = Device::Cpu; // or Device::best()
/// let w = Tensor::randn([5, 10], &dev)?.requires_grad_(true);
/// let mut opt = optim::Sgd::new(vec![w.clone()], 0.1)?;
/// let x = Tensor::randn([4, 2, 10], &dev)?;
/// let y = affine(&x.view([-1, 10])?, &w)?.reshape(&[4, -1])?; // x.view(-1, 10) ... .reshape(4, -1)
/// let loss = (&y - 1.0).square()?.mean_all()?;
/// loss.backward()?;
/// opt.step()?;
/// opt.zero_grad();
/// {
///     let _g = no_grad(); // with torch.no_grad():
///     let err = affine(&x.view([-1, 10])?, &w)?.sub_scalar(1.0)?.square()?.mean_all()?;
///     assert!(err.item()? < loss.item()?);
/// }
/// let _ = F::Reduction::Mean; // torch.nn.functional as F
/// assert!(affine(&x.to_dtype(DType::F64)?, &w).is_err());
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub mod prelude {
    pub use crate::nn::{self, functional as F, Forward, Module, ModuleExt};
    pub use crate::optim::{self, Optimizer};
    pub use crate::{manual_seed, no_grad, DType, Device, Error, Result, Scalar, Tensor};
}

/// The guide in `docs/`, one item per page, so that `cargo test --doc` compiles and runs every
/// Rust snippet in it (`tests/docs.rs` checks that no page is left out).
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../docs/getting-started.md")]
    pub struct GettingStarted;
    #[doc = include_str!("../docs/migration.md")]
    pub struct Migration;
    #[doc = include_str!("../docs/devices.md")]
    pub struct Devices;
    #[doc = include_str!("../docs/browser.md")]
    pub struct Browser;
    #[doc = include_str!("../docs/mixed-precision.md")]
    pub struct MixedPrecision;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/distributed.md")]
    pub struct Distributed;
    #[doc = include_str!("../docs/onnx.md")]
    pub struct Onnx;
}
