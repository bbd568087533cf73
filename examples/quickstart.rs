//! Prints the chosen device and runs a few ops (with a backward pass) on it.
//!
//! `cargo run --release --example quickstart` (set `WGTORCH_DEVICE=cpu` to force the CPU).

use wgtorch::nn::functional as F;
use wgtorch::{Device, Result, Tensor};

fn main() -> Result<()> {
    let dev = Device::best();
    println!("device: {}", dev.describe());
    wgtorch::manual_seed(0);
    let x = Tensor::randn([8, 3, 16, 16], &dev)?;
    let w = Tensor::randn([4, 3, 3, 3], &dev)?
        .mul_scalar(0.2)?
        .requires_grad_(true);
    let opts = F::Conv2dFuncOptions {
        padding: 1.into(),
        ..Default::default()
    };
    let y = F::conv2d_with(&x, &w, None, opts)?.relu()?; // F.conv2d(x, w, padding=1)
    let y = F::max_pool2d(&y, 2)?.flatten(1, -1)?;
    let target = Tensor::from_vec((0..8).map(|i| i % 4).collect::<Vec<i32>>(), [8], &dev)?;
    let logits = y.narrow(1, 0, 4)?;
    let loss = F::cross_entropy(&logits, &target)?;
    loss.backward()?;
    println!(
        "conv2d -> relu -> max_pool2d -> cross_entropy: loss = {:.5}",
        loss.item()?
    );
    println!(
        "|dL/dw| = {:.5}",
        w.grad().unwrap().vector_norm(2.0, [], false)?.item()?
    );
    let a = Tensor::randn([64, 64], &dev)?;
    let s = Tensor::einsum("ij,jk->ik", &[a.clone(), a.t()?])?
        .softmax(-1)?
        .sum_all()?;
    println!(
        "einsum + softmax rows sum to {:.3} (64 expected)",
        s.item()?
    );
    if let Device::Gpu(n) = dev {
        let st = wgtorch::backend::gpu::context(n)?.stats();
        println!(
            "gpu: {} dispatches, {} submits, {} pipelines, {} KiB peak pooled memory",
            st.dispatches,
            st.submits,
            st.pipelines_created,
            st.peak_bytes / 1024
        );
    }
    Ok(())
}
