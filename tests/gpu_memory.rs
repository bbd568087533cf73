//! Pooled GPU memory stays flat over 1,000 forward/backward iterations: the graph is freed and
//! holds no cycles. Its own test binary, so no other test allocates on the GPU meanwhile.

mod common;

use wgtorch::{Result, Tensor};

#[test]
fn gpu_memory_stays_flat_over_1000_iterations() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let ctx = wgtorch::backend::gpu::context(0)?;
    let w = Tensor::randn([16, 16], &gpu)?.requires_grad_(true);
    let x = Tensor::randn([8, 16], &gpu)?;
    let step = || -> Result<()> {
        let loss = x.matmul(&w)?.tanh()?.square()?.mean_all()?;
        loss.backward()?;
        w.set_grad(None);
        Ok(())
    };
    for _ in 0..20 {
        step()?;
    }
    ctx.synchronize()?;
    let before = ctx.stats().bytes_in_use;
    for _ in 0..1000 {
        step()?;
    }
    ctx.synchronize()?;
    let after = ctx.stats().bytes_in_use;
    assert_eq!(before, after, "bytes in use grew from {before} to {after}");
    Ok(())
}
