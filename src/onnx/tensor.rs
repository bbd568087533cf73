//! ONNX `TensorProto` to and from [`Tensor`]: element types, raw and typed data fields, and
//! external data files (only inside the model's folder).

use super::proto::{tensor_proto::DataType, TensorProto};
use crate::backend::cpu::CpuStorage;
use crate::{DType, Device, Error, Result, Tensor};
use half::{bf16, f16};
use std::path::Path;

/// The wgtorch dtype that holds an ONNX element type exactly: the narrow integers widen to
/// int32 and uint32 to int64, as the safetensors loader does; uint64 loads as int64 with every
/// value checked. Strings, complex and 8-bit floats are refused.
pub(crate) fn dtype_of(code: i32) -> Result<DType> {
    Ok(match DataType::try_from(code) {
        Ok(DataType::Float) => DType::F32,
        Ok(DataType::Double) => DType::F64,
        Ok(DataType::Float16) => DType::F16,
        Ok(DataType::Bfloat16) => DType::BF16,
        Ok(
            DataType::Int8 | DataType::Uint8 | DataType::Int16 | DataType::Uint16 | DataType::Int32,
        ) => DType::I32,
        Ok(DataType::Int64 | DataType::Uint32 | DataType::Uint64) => DType::I64,
        Ok(DataType::Bool) => DType::Bool,
        Ok(other) => {
            return Err(Error::msg(format!(
                "ONNX element type {} is not supported (wgtorch holds float, double, float16, \
                 bfloat16, the integers and bool)",
                other.as_str_name()
            )))
        }
        Err(_) => {
            return Err(Error::msg(format!(
                "ONNX element type {code} is not a valid TensorProto.DataType"
            )))
        }
    })
}

/// The ONNX element type of a wgtorch dtype.
pub(crate) fn code_of(dtype: DType) -> i32 {
    (match dtype {
        DType::F32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::Bool => DataType::Bool,
    }) as i32
}

/// Checked element count of ONNX dims (each ≥ 0).
pub(crate) fn numel_of(dims: &[i64], what: &str) -> Result<usize> {
    dims.iter().try_fold(1usize, |n, &d| {
        let d = usize::try_from(d)
            .map_err(|_| Error::msg(format!("{what}: negative dimension {d} in {dims:?}")))?;
        n.checked_mul(d).ok_or_else(|| {
            Error::msg(format!(
                "{what}: dimensions {dims:?} overflow the address space"
            ))
        })
    })
}

/// Where a tensor's external data may be read from: the model's folder, or nowhere (a model
/// given as bytes).
#[derive(Clone, Copy)]
pub(crate) enum ExternalData<'a> {
    /// Files relative to this folder, which they must not leave.
    Folder(&'a Path),
    /// External data is an error.
    Refused,
}

/// A `TensorProto` (an initializer, or a `Constant`'s or an attribute's tensor) as a CPU tensor.
/// Every length is checked against the dims: a truncated or oversized data field is an error
/// naming the tensor, never a short or padded tensor.
pub(crate) fn from_proto(t: &TensorProto, external: ExternalData<'_>) -> Result<Tensor> {
    let name = if t.name().is_empty() {
        "<unnamed tensor>"
    } else {
        t.name()
    };
    let what = format!("ONNX tensor '{name}'");
    if t.segment.is_some() {
        return Err(Error::msg(format!(
            "{what}: segmented tensors are not supported"
        )));
    }
    let numel = numel_of(&t.dims, &what)?;
    let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    let code = t.data_type();
    let dtype = dtype_of(code).map_err(|e| Error::msg(format!("{what}: {e}")))?;
    let elem = code_size(code);
    let external_bytes;
    let raw: Option<&[u8]> = if t.data_location == Some(1) {
        external_bytes = read_external(t, external, &what, numel.checked_mul(elem))?;
        Some(&external_bytes)
    } else if t.raw_data.is_some() {
        Some(t.raw_data())
    } else {
        None
    };
    let storage = match raw {
        Some(bytes) => {
            let want = numel
                .checked_mul(elem)
                .ok_or_else(|| Error::msg(format!("{what}: size overflows")))?;
            if bytes.len() != want {
                return Err(Error::msg(format!(
                    "{what}: raw data holds {} bytes, dims {:?} of {} need {want} (truncated or corrupt file)",
                    bytes.len(),
                    t.dims,
                    DataType::try_from(code).map(|d| d.as_str_name()).unwrap_or("?")
                )));
            }
            from_le_bytes(code, bytes, &what)?
        }
        None => from_typed_fields(t, code, numel, &what)?,
    };
    Ok(Tensor::from_storage(
        crate::backend::Storage::Cpu(storage),
        &shape,
        Device::Cpu,
    ))
    .and_then(|x| {
        if x.dtype() == dtype {
            Ok(x)
        } else {
            x.to_dtype(dtype)
        }
    })
}

/// Bytes per element as stored in the file.
fn code_size(code: i32) -> usize {
    match DataType::try_from(code) {
        Ok(DataType::Double | DataType::Int64 | DataType::Uint64) => 8,
        Ok(DataType::Float | DataType::Int32 | DataType::Uint32) => 4,
        Ok(DataType::Float16 | DataType::Bfloat16 | DataType::Int16 | DataType::Uint16) => 2,
        _ => 1,
    }
}

fn chunks<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    bytes
        .chunks_exact(N)
        .map(|c| c.try_into().expect("exact chunk"))
}

fn from_le_bytes(code: i32, b: &[u8], what: &str) -> Result<CpuStorage> {
    Ok(
        match DataType::try_from(code).expect("checked by dtype_of") {
            DataType::Float => CpuStorage::F32(chunks::<4>(b).map(f32::from_le_bytes).collect()),
            DataType::Double => CpuStorage::F64(chunks::<8>(b).map(f64::from_le_bytes).collect()),
            DataType::Float16 => CpuStorage::F16(
                chunks::<2>(b)
                    .map(|c| f16::from_bits(u16::from_le_bytes(c)))
                    .collect(),
            ),
            DataType::Bfloat16 => CpuStorage::BF16(
                chunks::<2>(b)
                    .map(|c| bf16::from_bits(u16::from_le_bytes(c)))
                    .collect(),
            ),
            DataType::Int8 => CpuStorage::I32(b.iter().map(|&v| v as i8 as i32).collect()),
            DataType::Uint8 => CpuStorage::I32(b.iter().map(|&v| v as i32).collect()),
            DataType::Int16 => CpuStorage::I32(
                chunks::<2>(b)
                    .map(|c| i16::from_le_bytes(c) as i32)
                    .collect(),
            ),
            DataType::Uint16 => CpuStorage::I32(
                chunks::<2>(b)
                    .map(|c| u16::from_le_bytes(c) as i32)
                    .collect(),
            ),
            DataType::Int32 => CpuStorage::I32(chunks::<4>(b).map(i32::from_le_bytes).collect()),
            DataType::Uint32 => CpuStorage::I64(
                chunks::<4>(b)
                    .map(|c| u32::from_le_bytes(c) as i64)
                    .collect(),
            ),
            DataType::Int64 => CpuStorage::I64(chunks::<8>(b).map(i64::from_le_bytes).collect()),
            DataType::Uint64 => CpuStorage::I64(
                chunks::<8>(b)
                    .map(|c| u64_to_i64(u64::from_le_bytes(c), what))
                    .collect::<Result<_>>()?,
            ),
            DataType::Bool => CpuStorage::Bool(b.iter().map(|&v| v != 0).collect()),
            _ => unreachable!("dtype_of refuses the rest"),
        },
    )
}

fn u64_to_i64(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::msg(format!("{what}: uint64 value {v} does not fit int64")))
}

fn from_typed_fields(t: &TensorProto, code: i32, numel: usize, what: &str) -> Result<CpuStorage> {
    let dt = DataType::try_from(code).expect("checked by dtype_of");
    let len = match dt {
        DataType::Float => t.float_data.len(),
        DataType::Double => t.double_data.len(),
        DataType::Int64 => t.int64_data.len(),
        DataType::Uint32 | DataType::Uint64 => t.uint64_data.len(),
        _ => t.int32_data.len(),
    };
    if len != numel {
        return Err(Error::msg(format!(
            "{what}: holds {len} values, dims {:?} need {numel} (truncated or corrupt file)",
            t.dims
        )));
    }
    let i32s = || t.int32_data.iter().copied();
    Ok(match dt {
        DataType::Float => CpuStorage::F32(t.float_data.clone()),
        DataType::Double => CpuStorage::F64(t.double_data.clone()),
        DataType::Int64 => CpuStorage::I64(t.int64_data.clone()),
        DataType::Uint32 => {
            CpuStorage::I64(t.uint64_data.iter().map(|&v| (v as u32) as i64).collect())
        }
        DataType::Uint64 => CpuStorage::I64(
            t.uint64_data
                .iter()
                .map(|&v| u64_to_i64(v, what))
                .collect::<Result<_>>()?,
        ),
        DataType::Float16 => CpuStorage::F16(i32s().map(|v| f16::from_bits(v as u16)).collect()),
        DataType::Bfloat16 => CpuStorage::BF16(i32s().map(|v| bf16::from_bits(v as u16)).collect()),
        DataType::Bool => CpuStorage::Bool(i32s().map(|v| v != 0).collect()),
        DataType::Int8 => CpuStorage::I32(i32s().map(|v| v as i8 as i32).collect()),
        DataType::Uint8 => CpuStorage::I32(i32s().map(|v| v as u8 as i32).collect()),
        DataType::Int16 => CpuStorage::I32(i32s().map(|v| v as i16 as i32).collect()),
        DataType::Uint16 => CpuStorage::I32(i32s().map(|v| v as u16 as i32).collect()),
        _ => CpuStorage::I32(i32s().collect()),
    })
}

/// Reads a tensor's external data: `location` relative to the model's folder (never an
/// absolute path, never outside the folder, symlinks resolved), `offset` and `length` checked
/// against the file and the dims.
fn read_external(
    t: &TensorProto,
    external: ExternalData<'_>,
    what: &str,
    want: Option<usize>,
) -> Result<Vec<u8>> {
    let ExternalData::Folder(folder) = external else {
        return Err(Error::msg(format!(
            "{what}: the data is in an external file, which a model loaded from bytes cannot \
             read; load it from its path (Model::load) instead"
        )));
    };
    let get = |key: &str| {
        t.external_data
            .iter()
            .find(|e| e.key() == key)
            .map(|e| e.value().to_string())
    };
    let location = get("location")
        .ok_or_else(|| Error::msg(format!("{what}: external data without a 'location'")))?;
    let parse = |key: &str| -> Result<Option<u64>> {
        get(key)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    Error::msg(format!("{what}: external data {key} '{v}' is not a number"))
                })
            })
            .transpose()
    };
    let (offset, length) = (parse("offset")?.unwrap_or(0), parse("length")?);
    let rel = Path::new(&location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(Error::msg(format!(
            "{what}: external data location '{location}' must be a plain relative path inside the \
             model's folder"
        )));
    }
    let folder_real = folder.canonicalize().map_err(|e| {
        Error::msg(format!(
            "{what}: the model's folder {}: {e}",
            folder.display()
        ))
    })?;
    let file = folder_real.join(rel).canonicalize().map_err(|e| {
        Error::msg(format!(
            "{what}: external data file '{location}' in {}: {e}",
            folder.display()
        ))
    })?;
    if !file.starts_with(&folder_real) {
        return Err(Error::msg(format!(
            "{what}: external data file '{location}' resolves outside the model's folder"
        )));
    }
    let want = want.ok_or_else(|| Error::msg(format!("{what}: size overflows")))?;
    if let Some(len) = length {
        if len != want as u64 {
            return Err(Error::msg(format!(
                "{what}: external data length {len} does not match the dims ({want} bytes)"
            )));
        }
    }
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&file)
        .map_err(|e| Error::msg(format!("{what}: external data file '{location}': {e}")))?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    if offset.checked_add(want as u64).is_none_or(|end| end > size) {
        return Err(Error::msg(format!(
            "{what}: external data '{location}' holds {size} bytes, the tensor needs {want} at offset {offset}"
        )));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::msg(format!("{what}: external data '{location}': {e}")))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(want)
        .map_err(|_| Error::msg(format!("{what}: cannot allocate {want} bytes")))?;
    f.take(want as u64)
        .read_to_end(&mut buf)
        .map_err(|e| Error::msg(format!("{what}: external data '{location}': {e}")))?;
    Ok(buf)
}

/// A tensor (any device; read back to the host) as a `TensorProto` with raw little-endian data.
pub(crate) fn to_proto(name: &str, t: &Tensor) -> Result<TensorProto> {
    let data = crate::tensor::block_on(t.host_storage_async())?;
    let raw: Vec<u8> = match &data {
        CpuStorage::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::F16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        CpuStorage::BF16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        CpuStorage::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuStorage::Bool(v) => v.iter().map(|&b| b as u8).collect(),
    };
    Ok(TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(code_of(t.dtype())),
        name: Some(name.to_string()),
        raw_data: Some(raw),
        ..Default::default()
    })
}
