//! Transforms on `[C, H, W]` f32 CPU tensors (torchvision's `transforms`), plus [`to_tensor`]
//! from `image` images. Random transforms draw from the generator they are given (seeded per
//! sample and epoch by [`super::Transformed`]), so runs are reproducible whatever the threading.
//! Each returns a new contiguous f32 CPU tensor; an input that is not `[C, H, W]` is an
//! [`Error::Shape`].
//!
//! ```
//! use wgtorch::data::transforms::{CenterCrop, Compose, Normalize, RandomCrop, Transform};
//! use wgtorch::{Device, Generator, Tensor};
//! let img = Tensor::full([3, 8, 8], 0.75, &Device::Cpu)?;
//! let augment = Compose(vec![
//!     Box::new(RandomCrop { size: 8, padding: 2 }), // pad to 12x12, crop 8x8 at random
//!     Box::new(CenterCrop { h: 4, w: 4 }), // the middle stays inside the image
//!     Box::new(Normalize { mean: vec![0.5; 3], std: vec![0.25; 3] }),
//! ]);
//! let out = augment.apply(&img, &mut Generator::new(0))?;
//! assert_eq!(out.shape(), &[3, 4, 4]);
//! assert_eq!(out.to_vec::<f32>()?, vec![1.0; 48]); // (0.75 - 0.5) / 0.25
//! # Ok::<(), wgtorch::Error>(())
//! ```

use crate::{Device, Error, Generator, Result, Tensor};
use std::cell::Cell;

thread_local! {
    /// The epoch that seeds [`super::Transformed`]'s augmentations on this thread. Per thread,
    /// so that two loaders (train and validation, each prefetching on its own thread) cannot
    /// change each other's draws.
    static EPOCH_SALT: Cell<u64> = const { Cell::new(0) };
}

/// Run `f` with the augmentation seed of `epoch` on this thread (restored afterwards).
pub(crate) fn with_epoch<R>(epoch: usize, f: impl FnOnce() -> R) -> R {
    let salt = (epoch as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let before = EPOCH_SALT.with(|s| s.replace(salt));
    let r = f();
    EPOCH_SALT.with(|s| s.set(before));
    r
}
pub(crate) fn epoch_salt() -> u64 {
    EPOCH_SALT.with(Cell::get)
}

/// A sample transform (a torchvision transform's `__call__`, with the random source explicit).
/// Implement it for your own augmentations:
///
/// ```
/// use wgtorch::data::transforms::Transform;
/// use wgtorch::{Device, Generator, Result, Tensor};
/// struct GaussianNoise(f64);
/// impl Transform for GaussianNoise {
///     fn apply(&self, x: &Tensor, g: &mut Generator) -> Result<Tensor> {
///         let noise: Vec<f32> = (0..x.numel()).map(|_| (self.0 * g.normal()) as f32).collect();
///         x.add(&Tensor::from_vec(noise, x.shape(), &Device::Cpu)?)
///     }
/// }
/// let x = Tensor::zeros([1, 2, 2], &Device::Cpu)?;
/// let a = GaussianNoise(0.1).apply(&x, &mut Generator::new(1))?;
/// let b = GaussianNoise(0.1).apply(&x, &mut Generator::new(1))?;
/// assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?); // same seed, same noise
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub trait Transform: Send + Sync {
    /// Transform `x` (`[C, H, W]`), drawing any randomness from `g`.
    fn apply(&self, x: &Tensor, g: &mut Generator) -> Result<Tensor>;
}

/// An image → `[3, H, W]` f32 CPU tensor in [0, 1] (torchvision's ToTensor). Any image is
/// converted to 8-bit RGB first (gray is repeated, alpha dropped).
pub fn to_tensor(img: &image::DynamicImage) -> Result<Tensor> {
    let rgb = img.to_rgb8();
    let (w, h) = (rgb.width() as usize, rgb.height() as usize);
    let mut v = vec![0f32; 3 * h * w];
    for (x, y, p) in rgb.enumerate_pixels() {
        for c in 0..3 {
            v[c * h * w + y as usize * w + x as usize] = p[c] as f32 / 255.0;
        }
    }
    Tensor::from_vec(v, [3, h, w], &Device::Cpu)
}

fn chw(op: &'static str, x: &Tensor) -> Result<(usize, usize, usize, Vec<f32>)> {
    if x.ndim() != 3 {
        return Err(Error::shape(
            op,
            format!("expected a [C, H, W] image tensor, got {:?}", x.shape()),
        ));
    }
    Ok((
        x.shape()[0],
        x.shape()[1],
        x.shape()[2],
        x.to_dtype(crate::DType::F32)?.to_vec::<f32>()?,
    ))
}

/// Apply transforms in order, sharing the generator (torchvision's `Compose`).
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Transform for Compose {
    fn apply(&self, x: &Tensor, g: &mut Generator) -> Result<Tensor> {
        let mut y = x.clone();
        for t in &self.0 {
            y = t.apply(&y, g)?;
        }
        Ok(y)
    }
}

/// `(x - mean[c]) / std[c]` per channel (torchvision's `Normalize`). `mean` and `std` need one
/// value per channel, else an [`Error::Shape`].
pub struct Normalize {
    /// Channel means.
    pub mean: Vec<f32>,
    /// Channel standard deviations.
    pub std: Vec<f32>,
}

impl Transform for Normalize {
    fn apply(&self, x: &Tensor, _g: &mut Generator) -> Result<Tensor> {
        let (c, h, w, mut v) = chw("Normalize", x)?;
        if self.mean.len() != c || self.std.len() != c {
            return Err(Error::shape(
                "Normalize",
                format!(
                    "{} means and {} stds for {c} channels",
                    self.mean.len(),
                    self.std.len()
                ),
            ));
        }
        for ch in 0..c {
            for p in &mut v[ch * h * w..(ch + 1) * h * w] {
                *p = (*p - self.mean[ch]) / self.std[ch];
            }
        }
        Tensor::from_vec(v, [c, h, w], &Device::Cpu)
    }
}

/// Pad by `padding` zeros on every side, then crop a random `size × size` window
/// (torchvision's `RandomCrop(size, padding)`). A window larger than the padded image is an
/// [`Error::Shape`].
pub struct RandomCrop {
    /// Output side.
    pub size: usize,
    /// Zero padding on each side first.
    pub padding: usize,
}

impl Transform for RandomCrop {
    fn apply(&self, x: &Tensor, g: &mut Generator) -> Result<Tensor> {
        let (c, h, w, v) = chw("RandomCrop", x)?;
        let (ph, pw) = (h + 2 * self.padding, w + 2 * self.padding);
        if self.size > ph || self.size > pw {
            return Err(Error::shape(
                "RandomCrop",
                format!(
                    "Required crop size {} is larger than the padded input {ph}x{pw}",
                    self.size
                ),
            ));
        }
        let top = g.below((ph - self.size + 1) as u64) as usize;
        let left = g.below((pw - self.size + 1) as u64) as usize;
        let s = self.size;
        let mut out = vec![0f32; c * s * s];
        for ch in 0..c {
            for y in 0..s {
                for xx in 0..s {
                    let (sy, sx) = (
                        (top + y) as isize - self.padding as isize,
                        (left + xx) as isize - self.padding as isize,
                    );
                    if sy >= 0 && sx >= 0 && (sy as usize) < h && (sx as usize) < w {
                        out[ch * s * s + y * s + xx] =
                            v[ch * h * w + sy as usize * w + sx as usize];
                    }
                }
            }
        }
        Tensor::from_vec(out, [c, s, s], &Device::Cpu)
    }
}

/// Mirror left-right with probability `p` (torchvision's `RandomHorizontalFlip`; its default
/// `p` is 0.5).
pub struct RandomHorizontalFlip {
    /// Probability.
    pub p: f64,
}

impl Transform for RandomHorizontalFlip {
    fn apply(&self, x: &Tensor, g: &mut Generator) -> Result<Tensor> {
        // The shape is checked whether or not this draw flips, so a bad input fails every time.
        let (c, h, w, v) = chw("RandomHorizontalFlip", x)?;
        if g.uniform() >= self.p {
            return Ok(x.clone());
        }
        let mut out = v.clone();
        for row in 0..c * h {
            for xx in 0..w {
                out[row * w + xx] = v[row * w + w - 1 - xx];
            }
        }
        Tensor::from_vec(out, [c, h, w], &Device::Cpu)
    }
}

/// Bilinear resize to `h × w` (torchvision's `Resize((h, w))` without antialiasing;
/// align_corners = false). A zero output side is an [`Error::InvalidArgument`].
pub struct Resize {
    /// Output height.
    pub h: usize,
    /// Output width.
    pub w: usize,
}

impl Transform for Resize {
    fn apply(&self, x: &Tensor, _g: &mut Generator) -> Result<Tensor> {
        let (c, h, w, v) = chw("Resize", x)?;
        if self.h == 0 || self.w == 0 {
            return Err(Error::arg("Resize", "output size must be positive"));
        }
        if h == 0 || w == 0 {
            return Err(Error::shape(
                "Resize",
                format!("cannot resize an empty image ({c}x{h}x{w})"),
            ));
        }
        let mut out = vec![0f32; c * self.h * self.w];
        let (sy, sx) = (h as f32 / self.h as f32, w as f32 / self.w as f32);
        for ch in 0..c {
            for y in 0..self.h {
                let fy = ((y as f32 + 0.5) * sy - 0.5).max(0.0);
                let (y0, ty) = (fy.floor() as usize, fy.fract());
                let y1 = (y0 + 1).min(h - 1);
                let y0 = y0.min(h - 1);
                for xx in 0..self.w {
                    let fx = ((xx as f32 + 0.5) * sx - 0.5).max(0.0);
                    let (x0, tx) = (fx.floor() as usize, fx.fract());
                    let x1 = (x0 + 1).min(w - 1);
                    let x0 = x0.min(w - 1);
                    let at = |yy: usize, xq: usize| v[ch * h * w + yy * w + xq];
                    let top = at(y0, x0) * (1.0 - tx) + at(y0, x1) * tx;
                    let bot = at(y1, x0) * (1.0 - tx) + at(y1, x1) * tx;
                    out[ch * self.h * self.w + y * self.w + xx] = top * (1.0 - ty) + bot * ty;
                }
            }
        }
        Tensor::from_vec(out, [c, self.h, self.w], &Device::Cpu)
    }
}

/// Crop the central `h × w` window (torchvision's `CenterCrop((h, w))`; the top-left corner is
/// rounded down). A window larger than the image is an [`Error::Shape`] (torchvision pads
/// instead).
pub struct CenterCrop {
    /// Output height.
    pub h: usize,
    /// Output width.
    pub w: usize,
}

impl Transform for CenterCrop {
    fn apply(&self, x: &Tensor, _g: &mut Generator) -> Result<Tensor> {
        if x.ndim() != 3 || self.h > x.shape()[1] || self.w > x.shape()[2] {
            return Err(Error::shape(
                "CenterCrop",
                format!("cannot crop {}x{} from {:?}", self.h, self.w, x.shape()),
            ));
        }
        let top = (x.shape()[1] - self.h) / 2;
        let left = (x.shape()[2] - self.w) / 2;
        x.narrow(1, top, self.h)?
            .narrow(2, left, self.w)?
            .contiguous()
    }
}
