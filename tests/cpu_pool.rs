//! The host buffer pool: dropped storages are reused, recycled contents never leak into results,
//! and gradients of transposed operands come out in a layout the optimizer can read directly.

use wgtorch::backend::cpu::pool;
use wgtorch::{Device, Result, Tensor};

#[test]
fn recycled_buffers_are_reused_and_never_leak_their_contents() -> Result<()> {
    let n = 1 << 16;
    // Fill a buffer with NaN and drop it: the next tensor of that size takes it over.
    drop(Tensor::full([n], f64::NAN, &Device::Cpu)?);
    assert!(pool::cached_bytes() >= n * 4);
    // An empty-k product must overwrite whatever the recycled buffer held.
    let a = Tensor::zeros([256, 0], &Device::Cpu)?;
    let b = Tensor::zeros([0, 256], &Device::Cpu)?;
    let c = a.matmul(&b)?;
    assert!(c.to_vec::<f32>()?.iter().all(|&v| v == 0.0));
    // Elementwise outputs, conv outputs and fills all write every element.
    drop(Tensor::full([n], f64::NAN, &Device::Cpu)?);
    let x = Tensor::ones([n], &Device::Cpu)?;
    assert!(x
        .add_scalar(1.0)?
        .to_vec::<f32>()?
        .iter()
        .all(|&v| v == 2.0));
    // (The other test in this binary only makes tensors below the pool's minimum size.)
    pool::empty_cache();
    assert_eq!(pool::cached_bytes(), 0);
    Ok(())
}

#[test]
fn linear_weight_gradient_is_contiguous() -> Result<()> {
    let x = Tensor::randn([8, 32], &Device::Cpu)?;
    let w = Tensor::randn([16, 32], &Device::Cpu)?.requires_grad_(true);
    x.linear(&w, None)?.sum_all()?.backward()?;
    let g = w.grad().unwrap();
    assert!(g.is_contiguous(), "strides {:?}", g.stride());
    // Same values as the plain formula gᵀ·x with g = ones.
    let want = Tensor::ones([8, 16], &Device::Cpu)?.t()?.matmul(&x)?;
    let (a, b) = (g.to_vec::<f32>()?, want.to_vec::<f32>()?);
    assert!(a.iter().zip(&b).all(|(a, b)| (a - b).abs() < 1e-4));
    Ok(())
}
