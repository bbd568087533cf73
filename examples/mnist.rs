//! pytorch/examples `mnist/main.py`, ported line by line, on the embedded 8×8 handwritten digits
//! (so `fc1` takes 64·2·2 features instead of 9216; everything else is main.py's: the Net, the
//! Adadelta optimizer with lr 1.0, StepLR(step_size=1, gamma=0.7), NLL loss on log-softmax).
//!
//! `cargo run --release --example mnist -- --epochs 3`
//!
//! `tests/ports.rs` checks 10 training steps of this Net against PyTorch's losses.

use clap::Parser;
use std::sync::Arc;
use wgtorch::data::{random_split, DataLoader, Digits, TensorDataset};
use wgtorch::nn::{Conv2d, Dropout, Linear};
use wgtorch::optim::{Adadelta, LrScheduler, Schedule};
use wgtorch::prelude::*;

/// `class Net(nn.Module)` of main.py.
#[derive(Module)]
pub struct Net {
    pub conv1: Conv2d,
    pub conv2: Conv2d,
    pub dropout1: Dropout,
    pub dropout2: Dropout,
    pub fc1: Linear,
    pub fc2: Linear,
}

impl Net {
    pub fn new(dev: &Device) -> Result<Net> {
        Ok(Net {
            conv1: Conv2d::new(1, 32, 3, dev)?, // nn.Conv2d(1, 32, 3, 1): stride 1 is the default
            conv2: Conv2d::new(32, 64, 3, dev)?,
            dropout1: Dropout::new(0.25)?,
            dropout2: Dropout::new(0.5)?,
            fc1: Linear::new(256, 128, dev)?,
            fc2: Linear::new(128, 10, dev)?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.conv1.forward(x)?;
        let x = x.relu()?;
        let x = self.conv2.forward(&x)?;
        let x = x.relu()?;
        let x = F::max_pool2d(&x, 2)?;
        let x = self.dropout1.forward(&x)?;
        let x = x.flatten(1, -1)?;
        let x = self.fc1.forward(&x)?;
        let x = x.relu()?;
        let x = self.dropout2.forward(&x)?;
        let x = self.fc2.forward(&x)?;
        x.log_softmax(1)
    }
}

/// The digits as main.py's MNIST tensors: `ToTensor()` then `Normalize((0.1307,), (0.3081,))`.
pub fn digits_dataset() -> Result<TensorDataset> {
    let (x, y) = Digits::load()?.tensors8()?;
    TensorDataset::new(&((x - 0.1307) / 0.3081), &y)
}

#[derive(Parser, Debug)]
#[command(about = "PyTorch MNIST Example (on the embedded digits)")]
struct Args {
    /// input batch size for training
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// input batch size for testing
    #[arg(long, default_value_t = 1000)]
    test_batch_size: usize,
    /// number of epochs to train
    #[arg(long, default_value_t = 14)]
    epochs: usize,
    /// learning rate
    #[arg(long, default_value_t = 1.0)]
    lr: f64,
    /// Learning rate step gamma
    #[arg(long, default_value_t = 0.7)]
    gamma: f64,
    /// disables the GPU
    #[arg(long)]
    no_accel: bool,
    /// quickly check a single pass
    #[arg(long)]
    dry_run: bool,
    /// random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// how many batches to wait before logging training status
    #[arg(long, default_value_t = 10)]
    log_interval: usize,
    /// For Saving the current Model
    #[arg(long)]
    save_model: bool,
}

fn train(
    args: &Args,
    model: &mut Net,
    train_loader: &DataLoader,
    optimizer: &mut Adadelta,
    epoch: usize,
) -> Result<()> {
    model.train();
    let n = train_loader.dataset.len();
    for (batch_idx, batch) in train_loader.epoch(epoch).enumerate() {
        let (data, target) = batch?;
        optimizer.zero_grad();
        let output = model.forward(&data)?;
        let loss = F::nll_loss(&output, &target)?;
        loss.backward()?;
        optimizer.step()?;
        if batch_idx % args.log_interval == 0 {
            println!(
                "Train Epoch: {epoch} [{}/{n} ({:.0}%)]\tLoss: {:.6}",
                batch_idx * args.batch_size,
                100.0 * batch_idx as f64 / train_loader.len() as f64,
                loss.item()?
            );
            if args.dry_run {
                break;
            }
        }
    }
    Ok(())
}

fn test(model: &mut Net, test_loader: &DataLoader) -> Result<()> {
    model.eval();
    let (mut test_loss, mut correct) = (0.0, 0);
    {
        let _g = no_grad();
        for batch in test_loader.epoch(0) {
            let (data, target) = batch?;
            let output = model.forward(&data)?;
            let sum = F::nll_loss_with(
                &output,
                &target,
                F::NllLossOptions {
                    reduction: F::Reduction::Sum,
                    ..Default::default()
                },
            )?;
            test_loss += sum.item()?; // sum up batch loss
            let pred = output.argmax(Some(1), true)?; // get the index of the max log-probability
            correct += pred.eq(&target.view_as(&pred)?)?.sum_all()?.item()? as usize;
        }
    }
    let n = test_loader.dataset.len();
    test_loss /= n as f64;
    println!(
        "\nTest set: Average loss: {test_loss:.4}, Accuracy: {correct}/{n} ({:.0}%)\n",
        100.0 * correct as f64 / n as f64
    );
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    manual_seed(args.seed);
    let device = if args.no_accel {
        Device::Cpu
    } else {
        Device::best()
    };
    // MNIST's train/test files; here a seeded 5:1 split of the digits.
    let (train_set, test_set) = random_split(Arc::new(digits_dataset()?), 5.0 / 6.0, args.seed)?;
    let train_loader =
        DataLoader::new(Arc::new(train_set), args.batch_size, &device)?.shuffle(args.seed);
    let test_loader = DataLoader::new(Arc::new(test_set), args.test_batch_size, &device)?;

    let mut model = Net::new(&device)?;
    let mut optimizer = Adadelta::new(model.parameters(), args.lr)?;
    let mut scheduler = LrScheduler::new(
        &optimizer,
        Schedule::StepLR {
            step_size: 1,
            gamma: args.gamma,
        },
    )?;
    for epoch in 1..=args.epochs {
        train(&args, &mut model, &train_loader, &mut optimizer, epoch)?;
        test(&mut model, &test_loader)?;
        scheduler.step()?;
    }
    if args.save_model {
        wgtorch::io::save("mnist_cnn.safetensors", &model.state_dict())?;
    }
    Ok(())
}
