//! Saving and loading tensors as safetensors with PyTorch's key names, and training checkpoints.
//! Every write is atomic: a temporary file beside the target, fsync, rename. Every load checks the
//! file before trusting it: a regular file, a header within it, shapes whose sizes fit, integer
//! values that fit wgtorch's integer dtypes, a dtype the device holds.

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

/// Serialize named tensors (any device) with string metadata.
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

/// Save a state_dict (e.g. `model.state_dict()`) as a safetensors file, atomically.
pub fn save(path: impl AsRef<Path>, tensors: &[(String, Tensor)]) -> Result<()> {
    let bytes = to_safetensors_bytes(tensors, None)?;
    write_atomic(path.as_ref(), &bytes)
}

/// Named tensors and the file's string metadata.
pub type Loaded = (Vec<(String, Tensor)>, HashMap<String, String>);

/// Parse safetensors bytes into tensors on `device`, plus the metadata. `path` names the source in
/// errors.
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

/// Load a safetensors file as named tensors on `device` (see [`from_safetensors_bytes`]).
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let bytes = file::read_safetensors(path)?;
    Ok(from_safetensors_bytes(path, &bytes, device)?.0)
}
