//! [`GpuType`]: how each dtype is held in a GPU buffer, and the WGSL that declares and reads
//! or writes such a binding.

use crate::DType;

/// How a dtype is stored on the GPU. Half types take 2 bytes per element in both of their forms
/// (the same bytes): native `f16` arrays where the adapter has SHADER_F16, else two values packed
/// per `u32` and unpacked to f32 (bf16 is always packed: WGSL has no bf16 type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuType {
    /// `f32` arrays (float32).
    F32,
    /// `i32` arrays: int32, and int64 (held as int32; WGSL has no 64-bit integers).
    I32,
    /// bool, one u32 per element.
    U32,
    /// Native `f16` (requires `enable f16;`).
    F16,
    /// f16 packed two per u32.
    F16Packed,
    /// bf16 packed two per u32.
    BF16Packed,
}

impl GpuType {
    /// The storage type of `dtype`; `native_f16` picks the f16 form.
    pub fn of(dtype: DType, native_f16: bool) -> Option<GpuType> {
        match dtype {
            DType::F32 => Some(GpuType::F32),
            // int64 is held as int32 (WGSL has no 64-bit integers): see `DType::I64`.
            DType::I32 | DType::I64 => Some(GpuType::I32),
            DType::Bool => Some(GpuType::U32),
            DType::F16 if native_f16 => Some(GpuType::F16),
            DType::F16 => Some(GpuType::F16Packed),
            DType::BF16 => Some(GpuType::BF16Packed),
            DType::F64 => None,
        }
    }
    /// Short name used in pipeline keys.
    pub fn key(self) -> &'static str {
        match self {
            GpuType::F32 => "f32",
            GpuType::I32 => "i32",
            GpuType::U32 => "bool",
            GpuType::F16 => "f16",
            GpuType::F16Packed => "f16packed",
            GpuType::BF16Packed => "bf16packed",
        }
    }
    /// The WGSL type kernels compute in.
    pub fn compute(self) -> &'static str {
        match self {
            GpuType::I32 => "i32",
            GpuType::U32 => "u32",
            _ => "f32",
        }
    }
    /// Bytes of storage for `n` elements.
    pub fn bytes(self, n: usize) -> u64 {
        match self {
            GpuType::F16 | GpuType::F16Packed | GpuType::BF16Packed => {
                (n as u64 * 2).next_multiple_of(4)
            }
            _ => n as u64 * 4,
        }
    }
    /// Declaration of binding `b` named `name`, with its accessors `ld_name(i)` (reads) and, when
    /// written, `st_name(i, v)`, converting between storage and compute type.
    pub(super) fn decl(self, b: u32, name: &str, write: bool) -> String {
        let c = self.compute();
        let head = |arr: &str| {
            let access = if write { "read_write" } else { "read" };
            format!("@group(0) @binding({b}) var<storage, {access}> {name}: {arr};\n")
        };
        match (self, write) {
            (GpuType::F32 | GpuType::I32 | GpuType::U32, false) => {
                head(&format!("array<{c}>")) + &format!("fn ld_{name}(i: u32) -> {c} {{ return {name}[i]; }}\n")
            }
            (GpuType::F32 | GpuType::I32 | GpuType::U32, true) => {
                head(&format!("array<{c}>"))
                    + &format!("fn ld_{name}(i: u32) -> {c} {{ return {name}[i]; }}\n")
                    + &format!("fn st_{name}(i: u32, v: {c}) {{ {name}[i] = v; }}\n")
            }
            (GpuType::F16, false) => head("array<f16>") + &format!("fn ld_{name}(i: u32) -> f32 {{ return f32({name}[i]); }}\n"),
            (GpuType::F16, true) => {
                head("array<f16>")
                    + &format!("fn ld_{name}(i: u32) -> f32 {{ return f32({name}[i]); }}\n")
                    + &format!("fn st_{name}(i: u32, v: f32) {{ {name}[i] = f16(v); }}\n")
            }
            (GpuType::F16Packed, false) => {
                head("array<u32>") + &format!("fn ld_{name}(i: u32) -> f32 {{ return unpack2x16float({name}[i >> 1u])[i & 1u]; }}\n")
            }
            (GpuType::BF16Packed, false) => head("array<u32>") + &format!(
                "fn ld_{name}(i: u32) -> f32 {{\n    let w = {name}[i >> 1u];\n    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));\n}}\n"
            ),
            (GpuType::F16Packed | GpuType::BF16Packed, true) => {
                let half = if self == GpuType::F16Packed {
                    "pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu".to_string()
                } else {
                    // Round to nearest even; NaN stays NaN.
                    "select((bitcast<u32>(v) + 0x7fffu + ((bitcast<u32>(v) >> 16u) & 1u)) >> 16u, 0x7fc0u, is_nan_f(v))".to_string()
                };
                let unpack = if self == GpuType::F16Packed {
                    "unpack2x16float(w)[i & 1u]"
                } else {
                    "bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u))"
                };
                head("array<atomic<u32>>") + &format!(
                    "fn ld_{name}(i: u32) -> f32 {{\n    let w = atomicLoad(&{name}[i >> 1u]);\n    return {unpack};\n}}\n"
                ) + &format!(
                    "fn st_{name}(i: u32, v: f32) {{\n    let h = {half};\n    let sh = (i & 1u) * 16u;\n    atomicAnd(&{name}[i >> 1u], ~(0xffffu << sh));\n    atomicOr(&{name}[i >> 1u], h << sh);\n}}\n"
                )
            }
        }
    }
    pub(super) fn native_f16(self) -> bool {
        self == GpuType::F16
    }
    /// Every storage type (for the validation tests).
    pub const ALL: [GpuType; 6] = [
        GpuType::F32,
        GpuType::I32,
        GpuType::U32,
        GpuType::F16,
        GpuType::F16Packed,
        GpuType::BF16Packed,
    ];
    /// The floating-point storage types.
    pub const FLOATS: [GpuType; 4] = [
        GpuType::F32,
        GpuType::F16,
        GpuType::F16Packed,
        GpuType::BF16Packed,
    ];
}
