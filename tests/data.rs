//! Data loading, I/O and module bookkeeping: datasets and their errors (naming the file), the
//! CIFAR-10 download against a local HTTP server, ImageFolder, DataLoader semantics, safetensors
//! round trips, bad checkpoints and mismatched state_dicts.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "download")]
use wgtorch::data::download_cifar10;
use wgtorch::data::{
    Cifar10, DataLoader, Dataset, Digits, DistributedSampler, DistributedSamplerOptions,
    ImageFolder, Sampler,
};
use wgtorch::io::Checkpoint;
use wgtorch::nn::functional as F;
use wgtorch::nn::{
    BatchNorm2d, Dropout, Linear, LinearOptions, ModuleExt, RNNOptions, ReLU, Sequential, LSTM,
};
use wgtorch::{Device, Result, Tensor};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgtorch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cifar_records(n: usize, seed: u8) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..n {
        v.push((i % 10) as u8);
        v.extend((0..3072).map(|j| (j as u8).wrapping_mul(seed).wrapping_add(i as u8)));
    }
    v
}

fn write_cifar(dir: &Path, n: usize) {
    for i in 1..=5 {
        std::fs::write(
            dir.join(format!("data_batch_{i}.bin")),
            cifar_records(n, i as u8),
        )
        .unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), cifar_records(n, 7)).unwrap();
}

#[test]
fn digits_and_cifar_read_and_report_bad_files() -> Result<()> {
    let d = Digits::load()?;
    assert_eq!(d.len(), 1797);
    let (x, y) = d.get(0)?;
    assert_eq!(x.shape(), &[3, 32, 32]);
    assert!((0..10).contains(&y));

    let dir = tmpdir("cifar");
    write_cifar(&dir, 3);
    let train = Cifar10::new(&dir, true)?;
    assert_eq!(train.len(), 15);
    let (x, y) = train.get(4)?;
    assert_eq!((x.shape(), y), (&[3usize, 32, 32][..], 1));
    // Truncated file: the error names it.
    let f = dir.join("data_batch_3.bin");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes.truncate(5000);
    std::fs::write(&f, &bytes).unwrap();
    let e = Cifar10::new(&dir, true).err().unwrap().to_string();
    assert!(
        e.contains("data_batch_3.bin") && e.contains("not a whole number"),
        "{e}"
    );
    // Missing directory.
    let e = Cifar10::new(dir.join("nope"), false)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nope") && e.contains("not found"), "{e}");
    // A bad label.
    let mut bad = cifar_records(2, 1);
    bad[3073] = 42;
    std::fs::write(dir.join("test_batch.bin"), bad).unwrap();
    let e = Cifar10::new(&dir, false).err().unwrap().to_string();
    assert!(
        e.contains("test_batch.bin") && e.contains("label 42"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Serve `body` to `count` GET requests on 127.0.0.1, then stop.
fn serve(body: Vec<u8>, count: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/gzip\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(&body);
        }
    });
    format!("http://{addr}/cifar-10-binary.tar.gz")
}

#[cfg(feature = "download")]
#[test]
fn cifar_download_checks_the_checksum_and_extracts() -> Result<()> {
    use sha2::Digest;
    // A small archive in the official layout.
    let src = tmpdir("cifar-src");
    std::fs::create_dir_all(src.join("cifar-10-batches-bin")).unwrap();
    write_cifar(&src.join("cifar-10-batches-bin"), 2);
    let mut tgz = Vec::new();
    {
        let enc = flate2::write::GzEncoder::new(&mut tgz, flate2::Compression::fast());
        let mut ar = tar::Builder::new(enc);
        ar.append_dir_all("cifar-10-batches-bin", src.join("cifar-10-batches-bin"))
            .unwrap();
        ar.into_inner().unwrap().finish().unwrap();
    }
    let sha: String = sha2::Sha256::digest(&tgz)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let url = serve(tgz, 2);
    let dest = tmpdir("cifar-dl");
    let dir = download_cifar10(&url, &dest, Some(&sha))?;
    assert_eq!(Cifar10::new(&dir, true)?.len(), 10);
    assert_eq!(Cifar10::new(&dest, false)?.len(), 2);
    let e = download_cifar10(&url, tmpdir("cifar-dl2"), Some("00"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("checksum mismatch"), "{e}");
    std::fs::remove_dir_all(&src).ok();
    std::fs::remove_dir_all(&dest).ok();
    Ok(())
}

#[test]
fn image_folder_loads_classes_and_names_corrupt_files() -> Result<()> {
    let root = tmpdir("imgfolder");
    for (c, shade) in [("cat", 10u8), ("dog", 200u8)] {
        std::fs::create_dir_all(root.join(c)).unwrap();
        for i in 0..2 {
            let img = image::RgbImage::from_pixel(5, 4, image::Rgb([shade, i * 50, 0]));
            img.save(root.join(c).join(format!("{i}.png"))).unwrap();
        }
    }
    let ds = ImageFolder::new(&root)?;
    assert_eq!(ds.classes, vec!["cat", "dog"]);
    assert_eq!(ds.len(), 4);
    let (x, y) = ds.get(2)?;
    assert_eq!((x.shape(), y), (&[3usize, 4, 5][..], 1));
    assert!((x.to_vec::<f32>()?[0] - 200.0 / 255.0).abs() < 1e-6);
    std::fs::write(root.join("dog").join("2.png"), b"not a png").unwrap();
    let ds = ImageFolder::new(&root)?;
    let e = ds.get(4).err().unwrap().to_string();
    assert!(e.contains("2.png") && e.contains("cannot decode"), "{e}");
    assert!(ImageFolder::new(root.join("missing")).is_err());
    std::fs::remove_dir_all(&root).ok();
    Ok(())
}

#[test]
fn dataloader_batches_shuffles_reproducibly_and_drops_last() -> Result<()> {
    let ds: Arc<dyn Dataset> = Arc::new(Digits::load()?);
    for dev in common::devices() {
        let l = DataLoader::new(ds.clone(), 100, &dev)?
            .shuffle(3)
            .drop_last(true);
        assert_eq!(l.len(), 17);
        assert_eq!(l.order(0), l.order(0));
        assert_ne!(l.order(0), l.order(1));
        let batches: Vec<_> = l.epoch(0).collect::<Result<_>>()?;
        assert_eq!(batches.len(), 17);
        let (x, y) = &batches[0];
        assert_eq!(
            (x.shape(), y.shape(), x.device()),
            (&[100usize, 3, 32, 32][..], &[100usize][..], dev)
        );
        let l2 = DataLoader::new(ds.clone(), 1000, &dev)?;
        let sizes: Vec<usize> = l2.epoch(0).map(|b| b.unwrap().1.numel()).collect();
        assert_eq!(sizes, vec![1000, 797]);
    }
    Ok(())
}

#[test]
fn modules_name_parameters_switch_modes_and_move() -> Result<()> {
    let _seed = common::seed_lock();
    let dev = Device::Cpu;
    let mut net = Sequential::new()
        .append(Linear::new(4, 8, &dev)?)
        .append(BatchNorm2d::new(8, &dev)?)
        .append(ReLU {})
        .append(Dropout::new(0.5)?)
        .append(Linear::with_options(
            8,
            3,
            LinearOptions { bias: false },
            &dev,
        )?);
    let names: Vec<String> = net.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "0.weight",
            "0.bias",
            "1.weight",
            "1.bias",
            "1.running_mean",
            "1.running_var",
            "1.num_batches_tracked",
            "4.weight"
        ]
    );
    assert_eq!(net.num_parameters(), 4 * 8 + 8 + 8 + 8 + 8 * 3);
    let x = Tensor::randn([16, 4], &dev)?;
    let y1 = net.forward(&x)?;
    assert!(
        net.named_buffers()[0].1.abs()?.sum_all()?.item()? > 0.0,
        "running mean updated in training"
    );
    net.eval();
    let (a, b) = (net.forward(&x)?, net.forward(&x)?);
    assert_eq!(
        a.to_vec::<f32>()?,
        b.to_vec::<f32>()?,
        "eval mode is deterministic (no dropout, running stats)"
    );
    assert_eq!(y1.shape(), a.shape());
    // Default init bounds: U(±1/sqrt(fan_in)).
    let w = Linear::new(100, 50, &dev)?
        .weight
        .abs()?
        .amax([], false)?
        .item()?;
    assert!(w <= 0.1 && w > 0.05);
    if let Some(gpu) = common::gpu() {
        net.to_device(&gpu)?;
        assert!(net
            .parameters()
            .iter()
            .all(|p| p.device() == gpu && p.requires_grad()));
        assert_eq!(net.forward(&x.to(&gpu)?)?.shape(), &[16, 3]);
    }
    Ok(())
}

#[test]
fn state_dicts_round_trip_and_mismatches_are_reported() -> Result<()> {
    let dev = Device::Cpu;
    let dir = tmpdir("io");
    let a = Sequential::new().append(Linear::new(3, 2, &dev)?);
    let path = dir.join("a.safetensors");
    wgtorch::io::save(&path, &a.state_dict())?;
    let mut b = Sequential::new().append(Linear::new(3, 2, &dev)?);
    b.load_state_dict(&wgtorch::io::load(&path, &dev)?, true)?;
    assert_eq!(
        a.parameters()[0].to_vec::<f32>()?,
        b.parameters()[0].to_vec::<f32>()?
    );
    // Missing and unexpected keys, shape mismatch.
    let mut c = Sequential::new().append(Linear::with_options(
        3,
        2,
        LinearOptions { bias: false },
        &dev,
    )?);
    let e = c
        .load_state_dict(&a.state_dict(), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Unexpected key(s) in state_dict: \"0.bias\""),
        "{e}"
    );
    let r = c.load_state_dict(&a.state_dict(), false)?;
    assert_eq!(r.unexpected_keys, vec!["0.bias"]);
    let mut d = Sequential::new().append(Linear::new(4, 2, &dev)?);
    let e = d
        .load_state_dict(&a.state_dict(), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("size mismatch for 0.weight: copying a param with shape [2, 3] from checkpoint, the shape in current model is [2, 4]"), "{e}");
    // Truncated, corrupt and foreign files.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(dir.join("t.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    let e = wgtorch::io::load(dir.join("t.safetensors"), &dev)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.safetensors") && e.contains("not a valid safetensors file"),
        "{e}"
    );
    std::fs::write(
        dir.join("junk.safetensors"),
        b"\xff\xff\xff\xff\xff\xff\xff\xffjunk",
    )
    .unwrap();
    assert!(wgtorch::io::load(dir.join("junk.safetensors"), &dev).is_err());
    let e = Checkpoint::load(&path, &dev).unwrap_err().to_string();
    assert!(e.contains("not a wgtorch checkpoint"), "{e}");
    assert!(Checkpoint::load(dir.join("none.safetensors"), &dev)
        .unwrap_err()
        .to_string()
        .contains("none.safetensors"));
    // Atomic save: an existing checkpoint survives a failed write (target is a directory).
    let ck = Checkpoint {
        model: a.state_dict(),
        epoch: 3,
        ..Default::default()
    };
    let cpath = dir.join("ck.safetensors");
    ck.save(&cpath)?;
    assert!(ck
        .save(dir.join("no-such-dir").join("ck.safetensors"))
        .is_err());
    assert_eq!(Checkpoint::load(&cpath, &dev)?.epoch, 3);
    assert!(std::fs::read_dir(&dir).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".tmp")));
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

#[test]
fn lstm_shapes_and_gradients() -> Result<()> {
    let _seed = common::seed_lock();
    let dev = Device::Cpu;
    wgtorch::manual_seed(4);
    let opts = RNNOptions {
        num_layers: 2,
        batch_first: true,
        ..Default::default()
    };
    let lstm = LSTM::with_options(3, 5, opts, &dev)?;
    let names: Vec<String> = lstm
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names[..4],
        ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    );
    let x = Tensor::randn([2, 4, 3], &dev)?;
    let (out, (h, c)) = lstm.forward_with_state(&x, None)?;
    assert_eq!(
        (out.shape(), h.shape(), c.shape()),
        (
            &[2usize, 4, 5][..],
            &[2usize, 2, 5][..],
            &[2usize, 2, 5][..]
        )
    );
    out.sum_all()?.backward()?;
    assert!(lstm.parameters().iter().all(|p| p.grad().is_some()));
    Ok(())
}

#[test]
fn transforms_do_what_torchvision_does() -> Result<()> {
    use wgtorch::data::transforms::*;
    let mut g = wgtorch::Generator::new(1);
    let x = Tensor::from_vec(
        (0..2 * 4 * 4).map(|v| v as f32).collect::<Vec<_>>(),
        [2, 4, 4],
        &Device::Cpu,
    )?;
    let n = Normalize {
        mean: vec![1.0, 2.0],
        std: vec![2.0, 4.0],
    }
    .apply(&x, &mut g)?
    .to_vec::<f32>()?;
    assert_eq!((n[0], n[16]), (-0.5, (16.0 - 2.0) / 4.0));
    let f = RandomHorizontalFlip { p: 1.0 }
        .apply(&x, &mut g)?
        .to_vec::<f32>()?;
    assert_eq!(&f[..4], &[3.0, 2.0, 1.0, 0.0]);
    assert_eq!(
        RandomHorizontalFlip { p: 0.0 }
            .apply(&x, &mut g)?
            .to_vec::<f32>()?,
        x.to_vec::<f32>()?
    );
    let c = CenterCrop { h: 2, w: 2 }.apply(&x, &mut g)?;
    assert_eq!(c.to_vec::<f32>()?[..4], [5.0, 6.0, 9.0, 10.0]);
    let r = Resize { h: 2, w: 2 }.apply(&x, &mut g)?.to_vec::<f32>()?;
    assert_eq!(
        r[..4],
        [2.5, 4.5, 10.5, 12.5],
        "bilinear, half-pixel centres"
    );
    // Bad input fails every time: an empty image for Resize (it used to underflow), a 2-d
    // input for the flip even on a draw that does not flip.
    let empty = Tensor::zeros([3, 0, 4], &Device::Cpu)?;
    let e = Resize { h: 2, w: 2 }
        .apply(&empty, &mut g)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot resize an empty image (3x0x4)"), "{e}");
    let flat = Tensor::zeros([4, 4], &Device::Cpu)?;
    assert!(RandomHorizontalFlip { p: 0.0 }
        .apply(&flat, &mut g)
        .is_err());
    // RandomCrop with padding: every output is a window of the zero-padded input.
    let rc = RandomCrop {
        size: 4,
        padding: 2,
    };
    for _ in 0..5 {
        let y = rc.apply(&x, &mut g)?;
        assert_eq!(y.shape(), &[2, 4, 4]);
        let v = y.to_vec::<f32>()?;
        assert!(v
            .iter()
            .all(|&p| p == 0.0 || x.to_vec::<f32>().unwrap().contains(&p)));
    }
    let composed = Compose(vec![
        Box::new(CenterCrop { h: 2, w: 2 }),
        Box::new(Normalize {
            mean: vec![0.0, 0.0],
            std: vec![0.5, 0.5],
        }),
    ]);
    assert_eq!(composed.apply(&x, &mut g)?.to_vec::<f32>()?[0], 10.0);
    let img =
        image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(3, 2, image::Rgb([255, 0, 51])));
    let t = to_tensor(&img)?;
    assert_eq!(
        (t.shape(), t.to_vec::<f32>()?[0], t.to_vec::<f32>()?[12]),
        (&[3usize, 2, 3][..], 1.0, 0.2)
    );
    assert!(Normalize {
        mean: vec![0.0],
        std: vec![1.0]
    }
    .apply(&x, &mut g)
    .is_err());
    Ok(())
}

#[test]
fn init_and_loss_modules() -> Result<()> {
    let _seed = common::seed_lock();
    use wgtorch::nn::init::{self, FanMode};
    use wgtorch::nn::{
        BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
    };
    let w = Tensor::zeros([256, 512], &Device::Cpu)?;
    let std = |t: &Tensor| t.std_dims([], false, false).unwrap().item().unwrap();
    init::kaiming_normal_(&w, 0.0, FanMode::FanIn, "relu")?;
    assert!((std(&w) - (2.0f64 / 512.0).sqrt()).abs() < 0.003);
    init::kaiming_uniform_(&w, 0.0, FanMode::FanOut, "relu")?;
    assert!((std(&w) - (2.0f64 / 256.0).sqrt()).abs() < 0.003);
    init::xavier_uniform_(&w, 1.0)?;
    assert!((std(&w) - (2.0f64 / 768.0).sqrt()).abs() < 0.003);
    init::xavier_normal_(&w, 1.0)?;
    assert!((std(&w) - (2.0f64 / 768.0).sqrt()).abs() < 0.003);
    init::constant_(&w, 0.25)?;
    assert_eq!(w.mean_all()?.item()?, 0.25);
    let x = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.0], [2, 2], &Device::Cpu)?;
    let t = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0], [2, 2], &Device::Cpu)?;
    let y = Tensor::from_vec(vec![1i32, 0], [2], &Device::Cpu)?;
    let f = |a: Tensor, b: Tensor| a.item().unwrap() - b.item().unwrap();
    assert_eq!(
        f(MSELoss::default().forward(&x, &t)?, F::mse_loss(&x, &t)?),
        0.0
    );
    assert_eq!(
        f(L1Loss::default().forward(&x, &t)?, F::l1_loss(&x, &t)?),
        0.0
    );
    assert_eq!(
        f(
            SmoothL1Loss::default().forward(&x, &t)?,
            F::smooth_l1_loss(&x, &t)?
        ),
        0.0
    );
    assert_eq!(
        f(
            BCEWithLogitsLoss::default().forward(&x, &t)?,
            F::binary_cross_entropy_with_logits(&x, &t)?
        ),
        0.0
    );
    assert_eq!(
        f(
            CrossEntropyLoss::default().forward(&x, &y)?,
            F::cross_entropy(&x, &y)?
        ),
        0.0
    );
    assert_eq!(
        f(
            NLLLoss::default().forward(&x.log_softmax(1)?, &y)?,
            F::cross_entropy(&x, &y)?
        ),
        0.0
    );
    let pw = BCEWithLogitsLoss::with_options(F::BinaryCrossEntropyWithLogitsOptions {
        pos_weight: Some(Tensor::from_slice(&[2.0f32, 1.0], [2], &Device::Cpu)?),
        ..Default::default()
    });
    assert!(pw.forward(&x, &t)?.item()? > BCEWithLogitsLoss::default().forward(&x, &t)?.item()?);
    Ok(())
}

#[test]
fn batches_keep_the_samples_dtype() -> Result<()> {
    // Token ids above 2^24 would not survive a trip through f32 (16_777_217 becomes 16_777_216).
    let ids: Vec<i64> = (0..8).map(|i| 16_777_217 + 2 * i).collect();
    let x = Tensor::from_vec(ids.clone(), [4, 2], &Device::Cpu)?;
    let y = Tensor::from_vec(vec![0i64, 1, 2, 3], [4], &Device::Cpu)?;
    let ds: Arc<dyn Dataset> = Arc::new(wgtorch::data::TensorDataset::new(&x, &y)?);
    for dev in common::devices() {
        let loader = DataLoader::new(ds.clone(), 3, &dev)?;
        let batches: Vec<_> = loader.epoch(0).collect::<Result<_>>()?;
        assert_eq!(batches.len(), 2);
        let (xb, yb) = &batches[0];
        assert_eq!(
            (xb.dtype(), xb.shape(), xb.device()),
            (wgtorch::DType::I64, &[3, 2][..], dev)
        );
        assert_eq!(yb.to_vec::<i64>()?, vec![0, 1, 2]);
        assert_eq!(xb.to_vec::<i64>()?, ids[..6].to_vec());
    }
    Ok(())
}

#[test]
fn two_loaders_do_not_change_each_others_augmentations() -> Result<()> {
    use wgtorch::data::transforms::RandomCrop;
    use wgtorch::data::{TensorDataset, Transformed};
    let x = Tensor::arange(0.0, 8.0 * 16.0, 1.0, &Device::Cpu)?.view([8, 1, 4, 4])?;
    let y = Tensor::zeros([8], &Device::Cpu)?.to_dtype(wgtorch::DType::I64)?;
    let ds = |_: ()| -> Result<Arc<dyn Dataset>> {
        Ok(Arc::new(Transformed {
            dataset: TensorDataset::new(&x, &y)?,
            transform: Arc::new(RandomCrop {
                size: 4,
                padding: 2,
            }),
        }))
    };
    let batches = |loader: &DataLoader, epoch| -> Result<Vec<Vec<f32>>> {
        loader.epoch(epoch).map(|b| b?.0.to_vec::<f32>()).collect()
    };
    for prefetch in [0, 2] {
        let mut train = DataLoader::new(ds(())?, 2, &Device::Cpu)?;
        let mut val = DataLoader::new(ds(())?, 2, &Device::Cpu)?;
        (train.prefetch, val.prefetch) = (prefetch, prefetch);
        let alone = batches(&train, 3)?;
        // Interleaved with another loader's epoch 0: the same crops.
        let mut it = train.epoch(3);
        let first = it.next().unwrap()?.0.to_vec::<f32>()?;
        let other = batches(&val, 0)?;
        let rest: Vec<Vec<f32>> = it.map(|b| b?.0.to_vec::<f32>()).collect::<Result<_>>()?;
        assert_eq!(first, alone[0]);
        assert_eq!(rest, alone[1..].to_vec(), "prefetch {prefetch}");
        assert_ne!(other, alone, "epochs 0 and 3 crop differently");
    }
    Ok(())
}

/// (n, num_replicas, shuffle, seed, epoch, drop_last, every rank's indices).
type Partition = (
    usize,
    usize,
    bool,
    u64,
    usize,
    bool,
    &'static [&'static [usize]],
);

/// PyTorch's `DistributedSampler` partitions for the same arguments, every rank, from
/// `tools/golden/distributed_sampler.py` (PyTorch 2.15): padding, drop_last, more ranks than
/// samples, an empty data set, and shuffles with PyTorch's own randperm (a seed past 2³²).
#[rustfmt::skip]
const PYTORCH_PARTITIONS: &[Partition] = &[
    (10, 3, false, 0, 0, false, &[&[0, 3, 6, 9], &[1, 4, 7, 0], &[2, 5, 8, 1]]),
    (10, 3, false, 0, 0, true, &[&[0, 3, 6], &[1, 4, 7], &[2, 5, 8]]),
    (10, 3, true, 0, 0, false, &[&[4, 5, 0, 2], &[1, 3, 8, 4], &[7, 9, 6, 1]]),
    (10, 3, true, 0, 1, false, &[&[5, 2, 9, 4], &[6, 0, 3, 5], &[1, 8, 7, 6]]),
    (17, 4, true, 5, 2, true, &[&[9, 7, 12, 15], &[5, 8, 10, 14], &[3, 6, 13, 4], &[11, 16, 1, 2]]),
    (17, 4, true, 5, 2, false, &[&[9, 7, 12, 15, 0], &[5, 8, 10, 14, 9], &[3, 6, 13, 4, 5], &[11, 16, 1, 2, 3]]),
    (5, 8, true, 1, 0, false, &[&[0], &[4], &[2], &[3], &[1], &[0], &[4], &[2]]),
    (5, 8, false, 0, 0, true, &[&[], &[], &[], &[], &[], &[], &[], &[]]),
    (0, 2, true, 0, 0, false, &[&[], &[]]),
    (50, 2, true, 42, 7, false, &[&[40, 1, 30, 48, 41, 5, 27, 4, 16, 21, 24, 17, 19, 14, 18, 46, 2, 45, 28, 36, 39, 9, 12, 47, 25], &[10, 26, 32, 13, 0, 29, 49, 35, 23, 20, 42, 34, 22, 38, 15, 3, 6, 43, 37, 7, 8, 44, 11, 31, 33]]),
    (23, 3, true, 8589934601, 3, true, &[&[18, 20, 22, 17, 12, 11, 8], &[2, 16, 10, 5, 0, 19, 9], &[15, 13, 21, 4, 3, 7, 6]]),
];

#[test]
fn distributed_sampler_matches_pytorch() -> Result<()> {
    for &(n, replicas, shuffle, seed, epoch, drop_last, want) in PYTORCH_PARTITIONS {
        for (rank, want) in want.iter().enumerate() {
            let opts = DistributedSamplerOptions {
                num_replicas: Some(replicas),
                rank: Some(rank),
                shuffle,
                seed,
                drop_last,
            };
            let mut s = DistributedSampler::new(n, opts)?;
            let case = format!("n={n} replicas={replicas} rank={rank} shuffle={shuffle} seed={seed} epoch={epoch} drop_last={drop_last}");
            assert_eq!(s.indices(epoch), *want, "{case}");
            assert_eq!(s.len(), want.len(), "{case}");
            s.set_epoch(epoch);
            assert_eq!(s.iter().collect::<Vec<_>>(), *want, "{case}");
        }
    }
    Ok(())
}

#[test]
fn distributed_sampler_and_loader_errors() -> Result<()> {
    let opts = |replicas, rank| DistributedSamplerOptions {
        num_replicas: Some(replicas),
        rank: Some(rank),
        ..Default::default()
    };
    let e = DistributedSampler::new(10, opts(2, 2))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Invalid rank 2, rank should be in the interval [0, 1]"),
        "{e}"
    );
    assert!(DistributedSampler::new(10, opts(0, 0)).is_err());
    // Without a process group the world must be given.
    #[cfg(not(feature = "mpi"))]
    {
        let e = DistributedSampler::new(10, Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("process group has not been initialized"), "{e}");
    }
    let x = Tensor::zeros([6, 2], &Device::Cpu)?;
    let y = Tensor::from_vec(vec![0i64; 6], [6], &Device::Cpu)?;
    let ds = Arc::new(wgtorch::data::TensorDataset::new(&x, &y)?);
    // PyTorch: "sampler option is mutually exclusive with shuffle".
    let both = DataLoader::new(ds.clone(), 2, &Device::Cpu)?
        .sampler(DistributedSampler::new(6, opts(2, 0))?)
        .shuffle(0);
    let e = both.epoch(0).next().unwrap().unwrap_err().to_string();
    assert!(e.contains("mutually exclusive with shuffle"), "{e}");
    // A sampler built for a larger data set is refused before any sample is read.
    let wrong = DataLoader::new(ds.clone(), 2, &Device::Cpu)?
        .sampler(DistributedSampler::new(60, opts(2, 1))?);
    let e = wrong.epoch(0).next().unwrap().unwrap_err().to_string();
    assert!(
        e.contains("out of range for a data set of 6 samples"),
        "{e}"
    );
    // Two ranks' loaders cover the data set once between them.
    let mut seen = Vec::new();
    for rank in 0..2 {
        let l = DataLoader::new(ds.clone(), 2, &Device::Cpu)?
            .sampler(DistributedSampler::new(6, opts(2, rank))?);
        assert_eq!(l.len(), 2);
        seen.extend(l.order(3));
    }
    seen.sort();
    assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
    Ok(())
}
