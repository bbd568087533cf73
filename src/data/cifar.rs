//! CIFAR-10 from its official binary format, and its download (with checksum and extraction).

use super::{Dataset, Sample};
use crate::{Device, Error, Result, Tensor};
use std::path::{Path, PathBuf};

const RECORD: usize = 1 + 3 * 32 * 32;

/// The CIFAR-10 binary version (torchvision's `CIFAR10(root, train)`, reading the binary rather
/// than the Python-pickle release): `data_batch_1.bin` … `data_batch_5.bin` (train) and
/// `test_batch.bin` (test) in a directory (or its `cifar-10-batches-bin` subdirectory). Each
/// record is a label byte and 3×32×32 pixel bytes; samples are `[3, 32, 32]` f32 in [0, 1].
///
/// ```
/// use wgtorch::data::{Cifar10, Dataset};
/// // A two-record test split, written by hand.
/// let dir = std::env::temp_dir().join(format!("wgtorch-doc-cifar-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let mut bytes = Vec::new();
/// for label in [3u8, 7] {
///     bytes.push(label);
///     bytes.extend(std::iter::repeat(255u8).take(3 * 32 * 32));
/// }
/// std::fs::write(dir.join("test_batch.bin"), &bytes).unwrap();
/// let test = Cifar10::new(&dir, false)?;
/// let (img, label) = test.get(1)?;
/// assert_eq!((test.len(), label, img.shape()), (2, 7, &[3usize, 32, 32][..]));
/// assert!(Cifar10::new(&dir, true).is_err()); // no data_batch_*.bin here
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Cifar10 {
    data: Vec<u8>,
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: e,
    }
}

impl Cifar10 {
    /// Read the train (`train = true`, 50,000 samples) or test split (10,000) from `dir` into
    /// memory. A missing directory or file, a file that is not whole records, or a label past 9
    /// is an [`Error::Io`] naming the path.
    pub fn new(dir: impl AsRef<Path>, train: bool) -> Result<Cifar10> {
        let mut dir = dir.as_ref().to_path_buf();
        if !dir.join("test_batch.bin").exists() && dir.join("cifar-10-batches-bin").is_dir() {
            dir = dir.join("cifar-10-batches-bin");
        }
        if !dir.is_dir() {
            return Err(io_err(
                &dir,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "CIFAR-10 directory not found (use --download to fetch it)",
                ),
            ));
        }
        let files: Vec<PathBuf> = if train {
            (1..=5)
                .map(|i| dir.join(format!("data_batch_{i}.bin")))
                .collect()
        } else {
            vec![dir.join("test_batch.bin")]
        };
        let mut data = Vec::new();
        for f in files {
            let bytes = std::fs::read(&f).map_err(|e| io_err(&f, e))?;
            if bytes.is_empty() || bytes.len() % RECORD != 0 {
                return Err(io_err(&f, std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} bytes is not a whole number of {RECORD}-byte CIFAR-10 records (truncated or not CIFAR-10 binary)", bytes.len()))));
            }
            if let Some(pos) = bytes.chunks(RECORD).position(|r| r[0] > 9) {
                return Err(io_err(
                    &f,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "record {pos} has label {} (expected 0..9)",
                            bytes[pos * RECORD]
                        ),
                    ),
                ));
            }
            data.extend(bytes);
        }
        Ok(Cifar10 { data })
    }
}

impl Dataset for Cifar10 {
    fn len(&self) -> usize {
        self.data.len() / RECORD
    }
    fn get(&self, i: usize) -> Result<Sample> {
        super::check_index("Cifar10", i, self.len())?;
        let r = &self.data[i * RECORD..(i + 1) * RECORD];
        let v: Vec<f32> = r[1..].iter().map(|&b| b as f32 / 255.0).collect();
        Ok((Tensor::from_vec(v, [3, 32, 32], &Device::Cpu)?, r[0] as i32))
    }
}

#[cfg(feature = "download")]
/// Download the `.tar.gz` at `url`, check its SHA-256 against `sha256_hex` (if given), and extract
/// it into `dir` (torchvision's `download=True`; the archive is kept as
/// `dir/cifar-10-binary.tar.gz`). Returns the directory holding the `.bin` files, to pass to
/// [`Cifar10::new`]. A network failure, a checksum mismatch or a bad archive is an
/// [`Error::Io`]. Only with the `download` feature (on by default; off in the browser).
pub fn download_cifar10(
    url: &str,
    dir: impl AsRef<Path>,
    sha256_hex: Option<&str>,
) -> Result<PathBuf> {
    use sha2::Digest;
    use std::io::Read;
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let net = |e: String| Error::Io {
        path: url.to_string(),
        source: std::io::Error::other(e),
    };
    let mut resp = ureq::get(url)
        .call()
        .map_err(|e| net(format!("download failed: {e}")))?;
    let mut bytes = Vec::new();
    resp.body_mut()
        .as_reader()
        .read_to_end(&mut bytes)
        .map_err(|e| net(format!("download interrupted: {e}")))?;
    if let Some(want) = sha256_hex {
        let got: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if !got.eq_ignore_ascii_case(want) {
            return Err(net(format!(
                "checksum mismatch: expected sha256 {want}, got {got}"
            )));
        }
    }
    let archive = dir.join("cifar-10-binary.tar.gz");
    crate::io::write_atomic(&archive, &bytes)?;
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    ar.unpack(dir).map_err(|e| io_err(&archive, e))?;
    let sub = dir.join("cifar-10-batches-bin");
    Ok(if sub.is_dir() { sub } else { dir.to_path_buf() })
}
