//! Datasets and the DataLoader: an index past the end is an `Err` naming the dataset, and a
//! sample that fails to load (an `Err` or a panic in `get`) ends the epoch with an `Err` naming
//! the sample, with the prefetch thread joined, never a short epoch that looks complete.

use crate::common;
use std::path::PathBuf;
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;
use wgtorch::data::{
    random_split, transforms, Cifar10, DataLoader, Dataset, Digits, ImageFolder, Sample,
    Transformed,
};
use wgtorch::{Device, Error, Result, Tensor};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgtorch-bad-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// `ds.get(ds.len())` is `IndexOutOfRange` naming `name`, the index and the size.
fn assert_past_end(name: &str, ds: &dyn Dataset) {
    let n = ds.len();
    for i in [n, n + 1, usize::MAX] {
        let e = ds
            .get(i)
            .err()
            .unwrap_or_else(|| panic!("{name}.get({i}) gave a sample"));
        assert!(matches!(e, Error::IndexOutOfRange { .. }), "{name}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(name) && msg.contains(&format!("with size {n}")),
            "{name}.get({i}): {msg}"
        );
    }
    assert!(ds.get(n - 1).is_ok(), "{name}: the last sample");
}

/// Defect: `Cifar10::get(len)` and `ImageFolder::get(n)` panicked (slice and Vec indexing).
#[test]
fn dataset_get_past_the_end_is_an_error() -> Result<()> {
    let digits = Arc::new(Digits::load()?);
    assert_past_end("Digits", digits.as_ref());
    let e = digits.image32(digits.len()).unwrap_err().to_string();
    assert!(e.contains("index 1797"), "{e}");

    let dir = tmpdir("cifar");
    let record = |label: u8| std::iter::once(label).chain(std::iter::repeat_n(7u8, 3072));
    let bytes: Vec<u8> = (0..10).flat_map(record).collect();
    std::fs::write(dir.join("test_batch.bin"), bytes).expect("write");
    let cifar = Cifar10::new(&dir, false)?;
    assert_eq!(cifar.len(), 10);
    assert_past_end("Cifar10", &cifar);
    let e = cifar.get(10).unwrap_err().to_string();
    assert!(e.contains("index 10 ") && e.contains("size 10"), "{e}");
    std::fs::remove_dir_all(&dir).ok();

    let dir = tmpdir("imgfolder");
    for c in ["a", "b"] {
        std::fs::create_dir_all(dir.join(c)).expect("class dir");
        image::RgbImage::from_pixel(4, 4, image::Rgb([1, 2, 3]))
            .save(dir.join(c).join("0.png"))
            .expect("save");
    }
    assert_past_end("ImageFolder", &ImageFolder::new(&dir)?);
    std::fs::remove_dir_all(&dir).ok();

    let (train, test) = random_split(digits.clone(), 0.8, 0)?;
    assert_past_end("Subset", &train);
    assert_past_end("Subset", &test);
    let t = Transformed {
        dataset: train,
        transform: Arc::new(transforms::RandomHorizontalFlip { p: 0.5 }),
    };
    assert_past_end("Subset", &t);
    Ok(())
}

/// `random_split` with a fraction outside [0, 1] (or NaN) panicked in `split_off` or split
/// silently; now an `Err` like PyTorch's.
#[test]
fn random_split_fraction_outside_0_1_is_an_error() -> Result<()> {
    let ds: Arc<dyn Dataset> = Arc::new(Digits::load()?);
    for f in [1.5, -0.1, f64::NAN, f64::INFINITY] {
        let e = random_split(ds.clone(), f, 0)
            .err()
            .expect("an error")
            .to_string();
        assert!(
            e.contains("random_split") && e.contains("between 0 and 1"),
            "{e}"
        );
    }
    for (f, n) in [(0.0, 0), (1.0, 1797)] {
        let (a, b) = random_split(ds.clone(), f, 0)?;
        assert_eq!((a.len(), b.len()), (n, 1797 - n));
    }
    Ok(())
}

/// Ten 2×2 samples; sample `bad` fails: an `Err` or, with `panic`, a panic.
struct Failing {
    bad: usize,
    panic: bool,
}

impl Dataset for Failing {
    fn len(&self) -> usize {
        10
    }
    fn get(&self, i: usize) -> Result<Sample> {
        if i == self.bad {
            if self.panic {
                panic!("sample {i} is corrupt (deliberate panic)");
            }
            return Err(Error::Io {
                path: format!("sample-{i}.bin"),
                source: std::io::Error::other("deliberate read error"),
            });
        }
        Ok((Tensor::full([2, 2], i as f64, &Device::Cpu)?, i as i32))
    }
}

/// Run `f` on another thread; fail if it takes longer than a minute (a hang).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    std::thread::spawn(move || tx.send(f()).ok());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the DataLoader hung")
}

/// Iterate one epoch of batch size 1 over `Failing { bad: 5, panic }` with `prefetch`, and check
/// it yields batches 0..5, then the error naming sample 5 with `expect` in it, then ends, with the
/// prefetch thread gone (its handle on the dataset dropped).
fn check_epoch_stops_at_sample_5(dev: Device, panic: bool, prefetch: usize, expect: &'static str) {
    let ds = Arc::new(Failing { bad: 5, panic });
    let held = ds.clone();
    let items = within_a_minute(move || {
        let mut loader = DataLoader::new(held, 1, &dev).expect("loader");
        loader.prefetch = prefetch;
        let mut it = loader.epoch(0);
        let items: Vec<Result<i32>> = it
            .by_ref()
            .map(|b| b.and_then(|(x, _)| Ok(x.to_vec::<f32>()?[0] as i32)))
            .collect();
        assert!(it.next().is_none(), "the iterator resumed after the end");
        drop(loader);
        items
    });
    let what = format!("{dev:?} panic={panic} prefetch={prefetch}");
    assert_eq!(items.len(), 6, "{what}: {items:?}");
    for (i, b) in items[..5].iter().enumerate() {
        assert_eq!(b.as_ref().ok(), Some(&(i as i32)), "{what}");
    }
    let e = items[5].as_ref().expect_err("sample 5 failed");
    assert!(
        matches!(e, Error::DataLoader { index: Some(5), .. }),
        "{what}: {e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("DataLoader: sample 5:") && msg.contains(expect),
        "{what}: {msg}"
    );
    assert_eq!(
        Arc::strong_count(&ds),
        1,
        "{what}: the thread still holds the dataset"
    );
}

/// Defect: a `Dataset` that panicked inside the prefetch thread ended the epoch early with no
/// error (5 of 10 batches).
#[test]
fn dataloader_panic_in_get_is_an_error_not_a_short_epoch() {
    for dev in common::devices() {
        for prefetch in [2, 0] {
            check_epoch_stops_at_sample_5(dev, true, prefetch, "panicked: sample 5 is corrupt");
        }
    }
}

/// An `Err` from `get` names the sample, keeps the dataset's error as its source, and ends the
/// epoch (the batches after it are not loaded).
#[test]
fn dataloader_error_from_get_names_the_sample_and_ends_the_epoch() {
    for dev in common::devices() {
        for prefetch in [2, 0] {
            check_epoch_stops_at_sample_5(dev, false, prefetch, "deliberate read error");
        }
    }
    let mut it = DataLoader::new(
        Arc::new(Failing {
            bad: 0,
            panic: false,
        }),
        4,
        &Device::Cpu,
    )
    .expect("loader")
    .epoch(0);
    let e = it.next().and_then(|b| b.err()).expect("an error");
    let source = std::error::Error::source(&e).expect("a source");
    assert!(source.to_string().contains("sample-0.bin"), "{source}");
}

/// Dropping an epoch's iterator part-way stops and joins its prefetch thread.
#[test]
fn dataloader_dropped_mid_epoch_joins_its_thread() {
    let ds = Arc::new(Failing {
        bad: usize::MAX,
        panic: false,
    });
    let held = ds.clone();
    within_a_minute(move || {
        let loader = DataLoader::new(held, 1, &Device::Cpu).expect("loader");
        let mut it = loader.epoch(0);
        assert!(it.next().is_some_and(|b| b.is_ok()));
    });
    assert_eq!(Arc::strong_count(&ds), 1);
}
