//! Saving and loading tensors as safetensors with PyTorch's key names, and training checkpoints.
//! Every write is atomic: a temporary file beside the target, fsync, rename.

mod checkpoint;
pub use checkpoint::Checkpoint;

use crate::backend::cpu::CpuStorage;
use crate::{DType, Device, Error, Result, Tensor};
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::io::Write;
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

/// Write `bytes` to `path` atomically: a crash mid-write never damages an existing file there.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(|e| io_err(path, e))
}

fn host_bytes(t: &Tensor) -> Result<(Dtype, Vec<u8>)> {
    let data = crate::tensor::block_on(t.host_storage_async())?;
    Ok(match data {
        CpuStorage::F32(v) => (Dtype::F32, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::F64(v) => (Dtype::F64, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::F16(v) => (Dtype::F16, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::BF16(v) => (Dtype::BF16, bytemuck::cast_slice(&v).to_vec()),
        CpuStorage::I32(v) => (Dtype::I32, bytemuck::cast_slice(&v).to_vec()),
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

/// Parse safetensors bytes into tensors on `device`, plus the metadata. Integer types load as I32
/// (PyTorch's int64 labels and counters), so a file written by `safetensors.torch.save_file` loads.
pub fn from_safetensors_bytes(path: &Path, bytes: &[u8], device: &Device) -> Result<Loaded> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| bad(path, format!("not a valid safetensors file: {e}")))?;
    let (_, meta) =
        safetensors::SafeTensors::read_metadata(bytes).map_err(|e| bad(path, e.to_string()))?;
    let mut out = Vec::new();
    let mut names: Vec<(String, TensorView<'_>)> = st.tensors();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in names {
        let d = v.data();
        let shape = v.shape().to_vec();
        let storage = match v.dtype() {
            Dtype::F32 => CpuStorage::F32(bytemuck::pod_collect_to_vec(d)),
            Dtype::F64 => CpuStorage::F64(bytemuck::pod_collect_to_vec(d)),
            Dtype::F16 => CpuStorage::F16(bytemuck::pod_collect_to_vec(d)),
            Dtype::BF16 => CpuStorage::BF16(bytemuck::pod_collect_to_vec(d)),
            Dtype::I32 => CpuStorage::I32(bytemuck::pod_collect_to_vec(d)),
            Dtype::I64 => CpuStorage::I32(
                bytemuck::pod_collect_to_vec::<u8, i64>(d)
                    .into_iter()
                    .map(|x| x as i32)
                    .collect(),
            ),
            Dtype::U8 | Dtype::I8 | Dtype::I16 | Dtype::U16 | Dtype::U32 => {
                let w = v.dtype().bitsize() / 8;
                CpuStorage::I32(
                    d.chunks(w)
                        .map(|c| {
                            let mut b = [0u8; 4];
                            b[..w].copy_from_slice(c);
                            i32::from_le_bytes(b)
                        })
                        .collect(),
                )
            }
            Dtype::BOOL => CpuStorage::Bool(d.iter().map(|&b| b != 0).collect()),
            other => {
                return Err(bad(
                    path,
                    format!("tensor {k}: dtype {other:?} is not supported"),
                ))
            }
        };
        let dtype = storage.dtype();
        let t = Tensor::from_storage(
            crate::tensor::place(storage, &Device::Cpu)?,
            &shape,
            Device::Cpu,
        );
        let t = if *device == Device::Cpu || (device.is_gpu() && dtype == DType::F64) {
            t
        } else {
            t.to(device)?
        };
        out.push((k, t));
    }
    Ok((out, meta.metadata().clone().unwrap_or_default()))
}

/// Load a safetensors file as named tensors on `device`.
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    Ok(from_safetensors_bytes(path, &bytes, device)?.0)
}
