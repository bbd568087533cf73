//! roll: a composite of narrow and cat along each rolled dim.

use crate::error::InOp;
use crate::shape::wrap_dim;
use crate::{Error, Result, Tensor};

impl Tensor {
    /// Roll elements along `dims` by `shifts` (torch.roll): element `i` moves to
    /// `(i + shift) mod size`; negative shifts roll the other way. With `dims` empty the tensor
    /// is rolled as if flattened, by the single shift given, and its shape restored.
    ///
    /// ```
    /// # use wgtorch::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [4], &Device::Cpu)?;
    /// assert_eq!(x.roll(&[1], &[0])?.to_vec::<f32>()?, [4.0, 1.0, 2.0, 3.0]);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn roll(&self, shifts: &[isize], dims: &[isize]) -> Result<Tensor> {
        if shifts.is_empty() {
            return Err(Error::arg("roll", "`shifts` required"));
        }
        if shifts.len() != dims.len() && !(dims.is_empty() && shifts.len() == 1) {
            return Err(Error::arg(
                "roll",
                format!(
                    "shifts and dimensions must align. shifts: {}, dims:{}",
                    shifts.len(),
                    dims.len()
                ),
            ));
        }
        if dims.is_empty() || self.ndim() == 0 {
            for &d in dims {
                wrap_dim("roll", d, self.ndim())?;
            }
            let flat = self.reshape([-1])?;
            let zeros = vec![0; shifts.len()];
            return flat.roll(shifts, &zeros)?.reshape(self.shape());
        }
        let mut y: Option<Tensor> = None;
        for (&s, &d) in shifts.iter().zip(dims) {
            let d = wrap_dim("roll", d, self.ndim())?;
            let x = y.as_ref().unwrap_or(self);
            let n = x.shape()[d];
            if n == 0 {
                continue;
            }
            let s = s.rem_euclid(n as isize) as usize;
            if s == 0 {
                continue;
            }
            let parts = [
                x.narrow(d as isize, n - s, s)?,
                x.narrow(d as isize, 0, n - s)?,
            ];
            y = Some(Tensor::cat(&parts, d as isize).in_op("roll")?);
        }
        match y {
            Some(y) => Ok(y),
            // Nothing moved: still a new tensor, as PyTorch returns.
            None => self.copy_as(self.dtype(), "roll"),
        }
    }
}
