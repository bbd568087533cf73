//! The embedded handwritten-digits set (UCI optical digits, CC BY 4.0; see data/README.md).

use super::{Dataset, Sample};
use crate::{Device, Error, Result, Tensor};
use std::io::Read;

static DIGITS_GZ: &[u8] = include_bytes!("../../data/digits.csv.gz");

/// 1,797 8×8 digits, served as `[3, 32, 32]` f32 images (each pixel 4×4 and the gray level in all
/// three channels, values in [0, 1]) so the CIFAR-sized CNN runs on them unchanged; labels 0–9.
/// Embedded in the crate: no download, no files.
///
/// ```
/// use wgtorch::data::{Dataset, Digits};
/// let digits = Digits::load()?;
/// assert_eq!(digits.len(), 1797);
/// let (img, label) = digits.get(0)?;
/// assert_eq!(img.shape(), &[3, 32, 32]);
/// assert_eq!(label, digits.labels()[0]);
/// let (x8, y) = digits.tensors8()?; // the stored 8x8 images, for MNIST-shaped models
/// assert_eq!((x8.shape(), y.shape()), (&[1797usize, 1, 8, 8][..], &[1797usize][..]));
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct Digits {
    pixels: Vec<[u8; 64]>,
    labels: Vec<i32>,
}

impl Digits {
    /// Decode the embedded copy (an [`Error::Io`] or [`Error::InvalidArgument`] only if the
    /// embedded file were damaged).
    pub fn load() -> Result<Digits> {
        let mut text = String::new();
        flate2::read::GzDecoder::new(DIGITS_GZ)
            .read_to_string(&mut text)
            .map_err(|e| Error::Io {
                path: "data/digits.csv.gz (embedded)".into(),
                source: e,
            })?;
        let mut pixels = Vec::new();
        let mut labels = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Vec<u8> = line
                .split(',')
                .map(|x| x.trim().parse::<u8>())
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| Error::arg("Digits", format!("line {}: {e}", n + 1)))?;
            if v.len() != 65 {
                return Err(Error::arg(
                    "Digits",
                    format!("line {}: expected 65 values, got {}", n + 1, v.len()),
                ));
            }
            let mut p = [0u8; 64];
            p.copy_from_slice(&v[..64]);
            pixels.push(p);
            labels.push(v[64] as i32);
        }
        Ok(Digits { pixels, labels })
    }
    /// The labels (0–9), one per sample.
    pub fn labels(&self) -> &[i32] {
        &self.labels
    }
    /// The 8×8 image of sample `i` as it is stored, row-major, values in [0, 1] (pixel / 16);
    /// an [`Error::IndexOutOfRange`] past the end.
    pub fn image8(&self, i: usize) -> Result<Vec<f32>> {
        super::check_index("Digits", i, self.len())?;
        Ok(self.pixels[i].iter().map(|&p| p as f32 / 16.0).collect())
    }
    /// Every sample as one `[1797, 1, 8, 8]` f32 tensor (values in [0, 1]) and the labels as
    /// `[1797]` int64, e.g. for a [`super::TensorDataset`] or for MNIST-shaped models.
    pub fn tensors8(&self) -> Result<(Tensor, Tensor)> {
        let n = self.len();
        let mut v = crate::backend::cpu::try_vec("Digits", n * 64)?;
        for p in &self.pixels {
            v.extend(p.iter().map(|&p| p as f32 / 16.0));
        }
        let labels: Vec<i64> = self.labels.iter().map(|&l| l as i64).collect();
        Ok((
            Tensor::from_vec(v, [n, 1, 8, 8], &Device::Cpu)?,
            Tensor::from_vec(labels, [n], &Device::Cpu)?,
        ))
    }
    /// The 32×32 gray image of sample `i` (each stored pixel repeated 4×4), row-major, values in
    /// [0, 1]; an [`Error::IndexOutOfRange`] past the end.
    pub fn image32(&self, i: usize) -> Result<Vec<f32>> {
        super::check_index("Digits", i, self.len())?;
        let p = &self.pixels[i];
        let mut out = vec![0f32; 32 * 32];
        for y in 0..32 {
            for x in 0..32 {
                out[y * 32 + x] = p[(y / 4) * 8 + x / 4] as f32 / 16.0;
            }
        }
        Ok(out)
    }
}

impl Dataset for Digits {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get(&self, i: usize) -> Result<Sample> {
        let g = self.image32(i)?;
        let mut v = Vec::with_capacity(3 * 1024);
        for _ in 0..3 {
            v.extend_from_slice(&g);
        }
        Ok((
            Tensor::from_vec(v, [3, 32, 32], &Device::Cpu)?,
            self.labels[i],
        ))
    }
}
