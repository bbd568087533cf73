//! Bad input gives a clear error naming the op and the shapes, dtypes or devices; never a panic.

mod common;

use wgtorch::nn::functional as F;
use wgtorch::{DType, Device, Tensor};

fn msg<T: std::fmt::Debug>(r: wgtorch::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn shape_dtype_dim_and_index_errors() {
    for dev in common::devices() {
        let a = Tensor::zeros([2, 3], &dev).unwrap();
        let b = Tensor::zeros([4], &dev).unwrap();
        let m = msg(a.add(&b));
        assert!(
            m.contains("must match the size of tensor b")
                && m.contains("[2, 3]")
                && m.contains("[4]"),
            "{m}"
        );
        let m = msg(a.matmul(&Tensor::zeros([2, 3], &dev).unwrap()));
        assert!(m.contains("cannot be multiplied (2x3 and 2x3)"), "{m}");
        let m = msg(a.sum_dims([2], false));
        assert!(
            m.contains("Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
            "{m}"
        );
        // select / unbind / movedim / linspace, in PyTorch's words.
        let m = msg(a.select(1, 3));
        assert!(
            m.contains("select: index 3 is out of bounds for dimension 1 with size 3"),
            "{m}"
        );
        assert!(msg(a.select(0, -3)).contains("index -3 is out of bounds"));
        let m = msg(Tensor::scalar(1.0f32, &dev).unwrap().select(0, 0));
        assert!(
            m.contains("select() cannot be applied to a 0-dim tensor."),
            "{m}"
        );
        assert!(msg(a.unbind(2)).contains("Dimension out of range"));
        let m = msg(a.movedim([0, 0], [1, 0]));
        assert!(m.contains("repeated dim in `source` ([0, 0])"), "{m}");
        let m = msg(a.movedim([0, 1], [1]));
        assert!(
            m.contains("should contain the same number of dims as destination"),
            "{m}"
        );
        let m = msg(Tensor::linspace_dtype(0.0, 1.0, 3, DType::Bool, &dev));
        assert!(
            m.contains("linspace: not implemented for dtype bool"),
            "{m}"
        );
        let m = msg(a.t().unwrap().view([6]));
        assert!(m.contains("Use .reshape(...) instead"), "{m}");
        assert!(a.t().unwrap().reshape([6]).is_ok());
        let m = msg(a.reshape([4, 2]));
        assert!(
            m.contains("shape '[4, 2]' is invalid for input of size 6"),
            "{m}"
        );
        let i = Tensor::from_vec(vec![0.0f32, 1.0], [2], &dev).unwrap();
        let m = msg(a.index_select(0, &i));
        assert!(
            m.contains("index_select") && m.contains("int64") && m.contains("float32"),
            "{m}"
        );
        let x = Tensor::zeros([2, 3, 8, 8], &dev).unwrap();
        let w = Tensor::zeros([4, 2, 3, 3], &dev).unwrap();
        let m = msg(F::conv2d(&x, &w, None));
        assert!(
            m.contains("expected input[2, 3, 8, 8] to have 2 channels"),
            "{m}"
        );
        let m = msg(Tensor::cat(&[a.clone(), b.clone()], 0));
        assert!(m.contains("Sizes of tensors must match"), "{m}");
        let m = msg(a.matmul(
            &Tensor::zeros_like(&a)
                .unwrap()
                .to_dtype(DType::I32)
                .unwrap(),
        ));
        assert!(m.contains("matmul") && m.contains("int32"), "{m}");
    }
    // Host-side index bounds.
    let x = Tensor::zeros([3, 2], &Device::Cpu).unwrap();
    let i = Tensor::from_vec(vec![0i32, 5], [2], &Device::Cpu).unwrap();
    let m = msg(x.index_select(0, &i));
    assert!(
        m.contains("index 5 is out of bounds for dimension 0 with size 3"),
        "{m}"
    );
}

#[test]
fn device_and_dtype_placement_errors() {
    let Some(gpu) = common::gpu() else { return };
    let a = Tensor::zeros([2], &Device::Cpu).unwrap();
    let b = Tensor::zeros([2], &gpu).unwrap();
    let m = msg(a.add(&b));
    assert!(m.starts_with("Expected all tensors to be on the same device, but found at least two devices, cpu and gpu:0"), "{m}");
    let d = Tensor::zeros([2], &Device::Cpu)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap();
    let m = msg(d.to(&gpu));
    let adapter = wgtorch::backend::gpu::context(0)
        .unwrap()
        .adapter_name()
        .to_string();
    assert!(
        m.contains("dtype float64 is not supported on device gpu:0") && m.contains(&adapter),
        "{m}"
    );
}

#[test]
fn missing_gpu_ordinal_is_an_error_not_a_panic() {
    let m = msg(Tensor::zeros([1], &Device::Gpu(99)));
    assert!(m.contains("gpu:99 does not exist"), "{m}");
}

#[test]
fn oversized_buffer_names_the_limit_and_adapter() {
    let Some(gpu) = common::gpu() else { return };
    // 2^31 f32 elements = 8 GiB, past any storage-binding limit lavapipe or a browser offers.
    let m = msg(Tensor::zeros([1usize << 31], &gpu));
    assert!(
        m.contains("max_storage_buffer_binding_size") && m.contains("adapter"),
        "{m}"
    );
}
