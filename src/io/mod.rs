//! Saving and loading tensors as safetensors with PyTorch's key names, and training checkpoints.
//! Every write is atomic: a temporary file beside the target, fsync, rename. Every load checks the
//! file before trusting it: a regular file, a header within it, shapes whose sizes fit, integer
//! values that fit wgtorch's integer dtypes, a dtype the device holds.
//!
//! PyTorch's `torch.save(model.state_dict(), path)` / `model.load_state_dict(torch.load(path))`,
//! in the safetensors format (`safetensors.torch.save_file` / `load_file` read the same files):
//!
//! ```
//! use wgtorch::nn::{Linear, ModuleExt};
//! use wgtorch::{io, DType, Device, Tensor};
//! let dev = Device::Cpu;
//! let dir = std::env::temp_dir().join(format!("wgtorch-doc-io-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("model.safetensors");
//!
//! let fc = Linear::new(4, 2, &dev)?;
//! io::save(&path, &fc.state_dict())?;
//! let loaded = io::load(&path, &dev)?; // sorted by name
//! assert_eq!(loaded.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["bias", "weight"]);
//! let mut fc2 = Linear::new(4, 2, &dev)?;
//! fc2.load_state_dict(&loaded, true)?;
//! assert_eq!(fc2.weight.to_vec::<f32>()?, fc.weight.to_vec::<f32>()?);
//!
//! // Dtypes are kept exactly.
//! io::save(&path, &[("ids".to_string(), Tensor::from_vec(vec![1i64, 2], [2], &dev)?)])?;
//! assert_eq!(io::load(&path, &dev)?[0].1.dtype(), DType::I64);
//! std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), wgtorch::Error>(())
//! ```
//!
//! A whole training run (model, optimizer, scheduler state, RNG, metrics) goes in a
//! [`Checkpoint`].

mod checkpoint;
mod file;
pub use checkpoint::Checkpoint;
pub use file::write_atomic;

use crate::backend::cpu::CpuStorage;
use crate::{Device, Error, Result, Tensor};
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::path::Path;

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: e,
    }
}

fn bad(path: &Path, msg: impl Into<String>) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into()),
    }
}

fn host_bytes(t: &Tensor) -> Result<(Dtype, Vec<u8>)> {
    let data = crate::tensor::block_on(t.host_storage_async())?;
    Ok(match data {
        CpuStorage::F32(v) => (Dtype::F32, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::F64(v) => (Dtype::F64, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::F16(v) => (Dtype::F16, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::BF16(v) => (Dtype::BF16, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::I32(v) => (Dtype::I32, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::I64(v) => (Dtype::I64, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::Bool(v) => (Dtype::BOOL, v.iter().map(|&b| b as u8).collect()),
    })
}

/// Serialize named tensors (any device and dtype; each is read back to the host, which blocks
/// on a GPU) with optional string metadata, as safetensors bytes (`safetensors.torch.save`).
///
/// ```
/// use std::collections::HashMap;
/// use std::path::Path;
/// use wgtorch::{io, Device, Tensor};
/// let dev = Device::Cpu;
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev)?;
/// let meta = HashMap::from([("step".to_string(), "7".to_string())]);
/// let bytes = io::to_safetensors_bytes(&[("w".to_string(), t)], Some(meta))?;
/// let (tensors, meta) = io::from_safetensors_bytes(Path::new("<memory>"), &bytes, &dev)?;
/// assert_eq!(tensors[0].1.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
/// assert_eq!(meta["step"], "7");
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn to_safetensors_bytes(
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut owned = Vec::with_capacity(tensors.len());
    for (k, t) in tensors {
        let (dt, bytes) = host_bytes(t)?;
        owned.push((k.clone(), dt, t.shape().to_vec(), bytes));
    }
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(k, dt, s, b)| {
            Ok((
                k.clone(),
                TensorView::new(*dt, s.clone(), b)
                    .map_err(|e| Error::arg("save", e.to_string()))?,
            ))
        })
        .collect::<Result<_>>()?;
    safetensors::serialize(views, metadata).map_err(|e| Error::arg("save", e.to_string()))
}

/// Save a state_dict (e.g. `model.state_dict()`) as a safetensors file, atomically (see
/// [`write_atomic`]; PyTorch's `torch.save(model.state_dict(), path)`, in safetensors). Tensors
/// keep their dtypes and shapes; a write failure is an [`Error::Io`] naming the path, and leaves
/// any existing file there intact.
pub fn save(path: impl AsRef<Path>, tensors: &[(String, Tensor)]) -> Result<()> {
    let bytes = to_safetensors_bytes(tensors, None)?;
    write_atomic(path.as_ref(), &bytes)
}

/// Named tensors (sorted by name) and the file's string metadata.
pub type Loaded = (Vec<(String, Tensor)>, HashMap<String, String>);

/// Parse safetensors bytes into tensors on `device` (sorted by name), plus the metadata. `path`
/// names the source in errors. Malformed bytes, a shape that does not match its data, and an
/// unsupported dtype (F8 variants and the like) are an [`Error::Io`] of kind `InvalidData`.
///
/// I32 and I64 load as themselves; the narrower integer types (I8, U8, I16, U16) load as I32 and
/// U32 and U64 as I64, exactly: a U64 value past int64 is refused, naming the tensor, the dtype
/// and the value, never wrapped. On a GPU, int64 is stored as int32 ([`crate::DType::I64`]): a
/// value outside int32 is refused there. A dtype the device cannot hold (F64 on a GPU) is
/// [`Error::DTypeNotOnDevice`]: load on the CPU and convert with `to_dtype` first.
pub fn from_safetensors_bytes(path: &Path, bytes: &[u8], device: &Device) -> Result<Loaded> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| bad(path, format!("not a valid safetensors file: {e}")))?;
    let (_, meta) =
        safetensors::SafeTensors::read_metadata(bytes).map_err(|e| bad(path, e.to_string()))?;
    let mut out = Vec::new();
    let mut names: Vec<(String, TensorView<'_>)> = st.tensors();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in names {
        check_shape(path, &k, &v)?;
        let storage = decode(path, &k, &v)?;
        let placed = crate::tensor::place(storage, device)?;
        out.push((k, Tensor::from_storage(placed, v.shape(), *device)));
    }
    Ok((out, meta.metadata().clone().unwrap_or_default()))
}

/// Refuse a shape whose element count or strides overflow (`[0, 2^40, 2^40]` has no elements but
/// a stride of 2^80), or whose data is not exactly the file's bytes for the tensor.
fn check_shape(path: &Path, key: &str, v: &TensorView<'_>) -> Result<()> {
    let shape = v.shape();
    // Every stride and the element count divide this product; 8 bytes is the widest element.
    let fits = shape
        .iter()
        .try_fold(8usize, |acc, &d| acc.checked_mul(d.max(1)))
        .is_some_and(|b| isize::try_from(b).is_ok());
    if !fits {
        return Err(bad(
            path,
            format!("tensor {key}: shape {shape:?} is too large: its element count or strides overflow {} bits", usize::BITS - 1),
        ));
    }
    let numel: usize = shape.iter().product();
    let bytes = numel.checked_mul(v.dtype().bitsize()).map(|b| b / 8);
    if bytes != Some(v.data().len()) {
        return Err(bad(
            path,
            format!(
                "tensor {key}: shape {shape:?} of {:?} needs {} bytes but the file holds {}",
                v.dtype(),
                bytes.map_or("too many".to_string(), |b| b.to_string()),
                v.data().len()
            ),
        ));
    }
    Ok(())
}

/// The tensor's elements as a host storage of the dtype wgtorch holds them in.
fn decode(path: &Path, key: &str, v: &TensorView<'_>) -> Result<CpuStorage> {
    let d = v.data();
    let dt = v.dtype();
    let int = |x: Result<Vec<i32>>| x.map(CpuStorage::I32);
    let long = |x: Result<Vec<i64>>| x.map(CpuStorage::I64);
    match dt {
        Dtype::F32 => Ok(CpuStorage::F32(bytemuck::pod_collect_to_vec(d))),
        Dtype::F64 => Ok(CpuStorage::F64(bytemuck::pod_collect_to_vec(d))),
        Dtype::F16 => Ok(CpuStorage::F16(bytemuck::pod_collect_to_vec(d))),
        Dtype::BF16 => Ok(CpuStorage::BF16(bytemuck::pod_collect_to_vec(d))),
        Dtype::I32 => Ok(CpuStorage::I32(bytemuck::pod_collect_to_vec(d))),
        Dtype::I64 => Ok(CpuStorage::I64(bytemuck::pod_collect_to_vec(d))),
        Dtype::BOOL => Ok(CpuStorage::Bool(d.iter().map(|&b| b != 0).collect())),
        Dtype::I8 => int(to_int(path, key, dt, d, i8::from_le_bytes)),
        Dtype::U8 => int(to_int(path, key, dt, d, u8::from_le_bytes)),
        Dtype::I16 => int(to_int(path, key, dt, d, i16::from_le_bytes)),
        Dtype::U16 => int(to_int(path, key, dt, d, u16::from_le_bytes)),
        Dtype::U32 => long(to_int(path, key, dt, d, u32::from_le_bytes)),
        Dtype::U64 => long(to_int(path, key, dt, d, u64::from_le_bytes)),
        other => Err(bad(
            path,
            format!("tensor {key}: dtype {other:?} is not supported"),
        )),
    }
}

/// Little-endian `W`-byte integers to `I` (int32 or int64), exactly: a value out of `I`'s range
/// is an error.
fn to_int<T, I: crate::dtype::Elem, const W: usize>(
    path: &Path,
    key: &str,
    dtype: Dtype,
    d: &[u8],
    from_le: fn([u8; W]) -> T,
) -> Result<Vec<I>>
where
    T: Copy + TryInto<I> + std::fmt::Display,
{
    d.chunks_exact(W)
        .map(|c| {
            let mut b = [0u8; W];
            b.copy_from_slice(c);
            let x = from_le(b);
            x.try_into().map_err(|_| {
                bad(
                    path,
                    format!(
                        "tensor {key}: value {x} of dtype {dtype:?} does not fit in {} \
                         (wgtorch's integer dtype for it); refusing to wrap it",
                        I::DTYPE
                    ),
                )
            })
        })
        .collect()
}

/// Load a safetensors file as named tensors on `device`, sorted by name (see
/// [`from_safetensors_bytes`] for the dtypes and checks; PyTorch's `torch.load` of a state dict,
/// or `safetensors.torch.load_file`). Pass the result to `ModuleExt::load_state_dict`. A
/// missing or non-regular file is an [`Error::Io`] naming the path.
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let bytes = file::read_safetensors(path)?;
    Ok(from_safetensors_bytes(path, &bytes, device)?.0)
}
