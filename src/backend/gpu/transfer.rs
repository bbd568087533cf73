//! Host transfers: uploads (int64 narrowed to the int32 a GPU holds, with an error past its
//! range), readbacks (and the context's wait for its queue), and the int64 ops that run on the
//! host to stay exact.

use super::*;

/// Upload host data.
pub(crate) fn upload(
    ctx: &Arc<GpuContext>,
    ordinal: usize,
    data: &CpuStorage,
) -> Result<GpuStorage> {
    upload_as("to", ctx, ordinal, data)
}

/// int64 values as the int32 a GPU holds them in, or the error naming `op`, the first value out
/// of range and the limits (never wrapped).
pub(super) fn narrow_i64(op: &'static str, v: &[i64]) -> Result<Vec<i32>> {
    let mut out = crate::backend::cpu::try_vec(op, v.len())?;
    for &x in v {
        out.push(i32::try_from(x).map_err(|_| {
            Error::arg(
                op,
                format!(
                    "value {x} does not fit int64 on a GPU, which holds int64 as int32 \
                     (range [{}, {}]); keep this tensor on the CPU",
                    i32::MIN,
                    i32::MAX
                ),
            )
        })?);
    }
    Ok(out)
}

/// Upload host data; an int64 value outside int32 is an error naming `op`.
fn upload_as(
    op: &'static str,
    ctx: &Arc<GpuContext>,
    ordinal: usize,
    data: &CpuStorage,
) -> Result<GpuStorage> {
    let dtype = data.dtype();
    let t = gpu_type(ctx, ordinal, dtype)?;
    // Refused before the bools' and int64s' host copies below.
    ctx.check_size(op, bytes_of(t, data.len()))?;
    let bools: Vec<u32>;
    let longs: Vec<i32>;
    let bytes: &[u8] = match data {
        CpuStorage::F32(v) => bytemuck::cast_slice(v),
        CpuStorage::I32(v) => bytemuck::cast_slice(v),
        CpuStorage::I64(v) => {
            longs = narrow_i64(op, v)?;
            bytemuck::cast_slice(&longs)
        }
        CpuStorage::Bool(v) => {
            bools = v.iter().map(|&b| b as u32).collect();
            bytemuck::cast_slice(&bools)
        }
        CpuStorage::F16(v) => bytemuck::cast_slice(v),
        CpuStorage::BF16(v) => bytemuck::cast_slice(v),
        CpuStorage::F64(_) => {
            return Err(Error::DTypeNotOnDevice {
                dtype,
                device: Device::Gpu(ordinal),
                adapter: ctx.adapter_name().to_string(),
            })
        }
    };
    Ok(GpuStorage {
        buf: Arc::new(ctx.upload(op, bytes)?),
        dtype,
    })
}

/// int64 on a GPU is held as int32 (WGSL has no 64-bit integers). The ops whose int64 result can
/// leave the int32 range (add, sub, mul, sums, products, cumulative sums, scatter_add, casts
/// from floating point) run here instead of in a kernel: the operands are read back, the CPU
/// kernel `f` computes in i64 (wrapping as PyTorch's int64 does, which no int32-range operands
/// can reach), and the result is uploaded with [`narrow_i64`]'s check, so a value past int32 is
/// an error naming `op`, never a wrapped number. Each such op waits for the GPU; the common
/// int64 uses (indices, labels, comparisons, argmax, bool sums) stay on the device.
pub(super) fn via_host(
    op: &'static str,
    inputs: &[(&GpuStorage, &Layout)],
    f: impl FnOnce(&[CpuStorage]) -> Result<CpuStorage>,
) -> Result<GpuStorage> {
    let ctx = inputs[0].0.ctx();
    let mut host = Vec::with_capacity(inputs.len());
    for (s, l) in inputs {
        // Elements up to the view's last one (the kernels' layouts index into the whole buffer).
        let n = if l.numel() == 0 {
            0
        } else {
            l.offset
                + l.shape
                    .iter()
                    .zip(&l.strides)
                    .map(|(&d, &st)| (d - 1) * st)
                    .sum::<usize>()
                + 1
        };
        host.push(crate::tensor::block_on(download(s, n))?);
    }
    let out = f(&host)?;
    upload_as(op, ctx, ctx.ordinal, &out)
}

/// Read the first `n` elements back (async at the core; the blocking API wraps it).
pub(crate) async fn download(s: &GpuStorage, n: usize) -> Result<CpuStorage> {
    let half = matches!(s.dtype, DType::F16 | DType::BF16);
    let len = if half { n as u64 * 2 } else { n as u64 * 4 };
    let bytes = s.ctx().read_async(s.raw(), len).await?;
    Ok(match s.dtype {
        DType::F16 => CpuStorage::F16(bytemuck::pod_collect_to_vec(&bytes)),
        DType::BF16 => CpuStorage::BF16(bytemuck::pod_collect_to_vec(&bytes)),
        DType::F32 => CpuStorage::F32(bytemuck::pod_collect_to_vec(&bytes)),
        DType::I32 => CpuStorage::I32(bytemuck::pod_collect_to_vec(&bytes)),
        DType::I64 => CpuStorage::I64(
            bytemuck::pod_collect_to_vec::<u8, i32>(&bytes)
                .into_iter()
                .map(i64::from)
                .collect(),
        ),
        DType::Bool => CpuStorage::Bool(
            bytemuck::pod_collect_to_vec::<u8, u32>(&bytes)
                .into_iter()
                .map(|x| x != 0)
                .collect(),
        ),
        // GPU storage is never f64 (uploads refuse it): an error rather than a panic.
        DType::F64 => return Err(s.ctx().failed("readback", "float64 storage on a GPU")),
    })
}

impl GpuContext {
    /// `Error::Gpu` for `op` on this adapter, saying `msg`.
    fn failed(&self, op: &'static str, msg: impl ToString) -> Error {
        Error::Gpu {
            op,
            adapter: self.info.name.clone(),
            msg: msg.to_string(),
        }
    }

    /// Copy `bytes` bytes of `buf` back to the host, waiting for the work before it; the
    /// index-check flag comes back with them and a failure it records is the error.
    pub(crate) async fn read_async(&self, buf: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        if bytes == 0 && !self.checks.dirty() {
            return Ok(Vec::new());
        }
        let padded = bytes.next_multiple_of(4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgtorch-readback"),
            size: padded + super::checks::SLOT_BYTES,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let flagged = self.with_encoder(|enc| {
            if padded > 0 {
                enc.copy_buffer_to_buffer(buf, 0, &staging, 0, padded);
            }
            self.checks.copy_back(enc, &staging, padded)
        });
        self.submit();
        let done = super::oneshot::OneShot::new();
        let tx = done.sender();
        staging.map_async(wgpu::MapMode::Read, .., move |r| tx.send(r.is_ok()));
        // Natively the map completes inside this poll; in the browser the event loop completes it
        // and the await below yields to it.
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| self.failed("readback", e))?;
        let mapped = done.await;
        self.take_error("readback")?;
        if !mapped {
            return Err(self.failed("readback", "mapping the readback buffer failed"));
        }
        let data = staging
            .get_mapped_range(..)
            .map_err(|e| self.failed("readback", e))?
            .to_vec();
        staging.unmap();
        if flagged {
            self.checks.report(&data[padded as usize..])?;
        }
        crate::profiler::transfer(crate::profiler::Transfer::ReadBack, bytes);
        Ok(data[..bytes as usize].to_vec())
    }

    /// Wait until all submitted work is done (reporting an index-check failure, if any).
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        if self.checks.dirty() {
            return pollster::block_on(self.read_async(self.checks.buffer(), 0)).map(drop);
        }
        self.submit();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| self.failed("synchronize", e))?;
        self.take_error("synchronize")
    }
}
