//! pytorch/examples `vae/main.py`, ported line by line, on the embedded 8×8 digits (64 inputs
//! instead of 784; the VAE, the loss (BCE summed + KL divergence) and Adam lr 1e-3 are main.py's).
//!
//! `cargo run --release --example vae -- --epochs 10`
//!
//! `tests/ports.rs` checks 10 training steps of this VAE against PyTorch's losses.

// PyTorch's class names (VAE, GPT, MLP), kept for line-by-line comparison.
#![allow(clippy::upper_case_acronyms)]

use clap::Parser;
use std::sync::Arc;
use wgtorch::data::{random_split, DataLoader, Digits, TensorDataset};
use wgtorch::nn::Linear;
use wgtorch::optim::Adam;
use wgtorch::prelude::*;

/// Pixels per image (784 for MNIST).
pub const PIXELS: usize = 64;

/// `class VAE(nn.Module)` of main.py.
#[derive(Module)]
pub struct VAE {
    pub fc1: Linear,
    pub fc21: Linear,
    pub fc22: Linear,
    pub fc3: Linear,
    pub fc4: Linear,
}

impl VAE {
    pub fn new(dev: &Device) -> Result<VAE> {
        Ok(VAE {
            fc1: Linear::new(PIXELS, 400, dev)?,
            fc21: Linear::new(400, 20, dev)?,
            fc22: Linear::new(400, 20, dev)?,
            fc3: Linear::new(20, 400, dev)?,
            fc4: Linear::new(400, PIXELS, dev)?,
        })
    }

    pub fn encode(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let h1 = self.fc1.forward(x)?.relu()?;
        Ok((self.fc21.forward(&h1)?, self.fc22.forward(&h1)?))
    }

    pub fn reparameterize(&self, mu: &Tensor, logvar: &Tensor) -> Result<Tensor> {
        let std = (0.5 * logvar).exp()?;
        let eps = std.randn_like()?;
        Ok(mu + &eps * &std)
    }

    pub fn decode(&self, z: &Tensor) -> Result<Tensor> {
        let h3 = self.fc3.forward(z)?.relu()?;
        self.fc4.forward(&h3)?.sigmoid()
    }

    /// `(reconstruction, mu, logvar)`.
    pub fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (mu, logvar) = self.encode(&x.view([-1, PIXELS as i32])?)?;
        let z = self.reparameterize(&mu, &logvar)?;
        Ok((self.decode(&z)?, mu, logvar))
    }
}

/// Reconstruction + KL divergence losses summed over all elements and batch.
pub fn loss_function(recon_x: &Tensor, x: &Tensor, mu: &Tensor, logvar: &Tensor) -> Result<Tensor> {
    let bce = F::binary_cross_entropy_with(
        recon_x,
        &x.view([-1, PIXELS as i32])?,
        F::BinaryCrossEntropyOptions {
            reduction: F::Reduction::Sum,
            ..Default::default()
        },
    )?;
    // see Appendix B from VAE paper: Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    // 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    let kld = -0.5 * (1.0 + logvar - mu.pow_scalar(2.0)? - logvar.exp()?).sum_all()?;
    Ok(bce + kld)
}

#[derive(Parser, Debug)]
#[command(about = "VAE MNIST Example (on the embedded digits)")]
struct Args {
    /// input batch size for training
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// number of epochs to train
    #[arg(long, default_value_t = 10)]
    epochs: usize,
    /// disables the GPU
    #[arg(long)]
    no_accel: bool,
    /// random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// how many batches to wait before logging training status
    #[arg(long, default_value_t = 10)]
    log_interval: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    manual_seed(args.seed);
    let device = if args.no_accel {
        Device::Cpu
    } else {
        Device::best()
    };
    println!("Using device: {}", device.describe());
    let (x, y) = Digits::load()?.tensors8()?; // ToTensor(): values in [0, 1]
    let (train_set, test_set) =
        random_split(Arc::new(TensorDataset::new(&x, &y)?), 5.0 / 6.0, args.seed)?;
    let train_loader =
        DataLoader::new(Arc::new(train_set), args.batch_size, &device)?.shuffle(args.seed);
    let test_loader = DataLoader::new(Arc::new(test_set), args.batch_size, &device)?;

    let mut model = VAE::new(&device)?;
    let mut optimizer = Adam::new(model.parameters(), 1e-3)?;
    for epoch in 1..=args.epochs {
        // train(epoch)
        model.train();
        let mut train_loss = 0.0;
        let n = train_loader.dataset.len();
        for (batch_idx, batch) in train_loader.epoch(epoch).enumerate() {
            let (data, _) = batch?;
            optimizer.zero_grad();
            let (recon_batch, mu, logvar) = model.forward(&data)?;
            let loss = loss_function(&recon_batch, &data, &mu, &logvar)?;
            loss.backward()?;
            train_loss += loss.item()?;
            optimizer.step()?;
            if batch_idx % args.log_interval == 0 {
                println!(
                    "Train Epoch: {epoch} [{}/{n} ({:.0}%)]\tLoss: {:.6}",
                    batch_idx * args.batch_size,
                    100.0 * batch_idx as f64 / train_loader.len() as f64,
                    loss.item()? / data.shape()[0] as f64
                );
            }
        }
        println!(
            "====> Epoch: {epoch} Average loss: {:.4}",
            train_loss / n as f64
        );
        // test(epoch)
        model.eval();
        let mut test_loss = 0.0;
        {
            let _g = no_grad();
            for batch in test_loader.epoch(0) {
                let (data, _) = batch?;
                let (recon_batch, mu, logvar) = model.forward(&data)?;
                test_loss += loss_function(&recon_batch, &data, &mu, &logvar)?.item()?;
            }
        }
        println!(
            "====> Test set loss: {:.4}",
            test_loss / test_loader.dataset.len() as f64
        );
    }
    Ok(())
}
