//! Layers and functionals take PyTorch's arguments (issue #12, item 7): required ones
//! positional in PyTorch's order, keyword ones in an options struct with PyTorch's defaults.
//! Numbers against PyTorch are in tests/golden/layers.json (tools/golden/layers.py); these check
//! the layer forms, the defaults and the errors, on every device.

mod common;

use common::{assert_close, vals};
use wgtorch::nn::functional as F;
use wgtorch::nn::{
    AdaptiveAvgPool2d, Approximate, AvgPool2d, BatchNorm1d, BatchNorm2d, BatchNormOptions, Conv2d,
    Conv2dOptions, Dropout, Embedding, EmbeddingOptions, Flatten, FlattenOptions, GELUOptions,
    LayerNorm, LayerNormOptions, LeakyReLU, Linear, LinearOptions, MaxPool2d, ModuleExt, GELU,
};
use wgtorch::{Device, Result, Tensor};

#[test]
fn conv2d_takes_pytorchs_positional_order() -> Result<()> {
    for dev in common::devices() {
        let x = Tensor::zeros([1, 1, 28, 28], &dev)?;
        // nn.Conv2d(1, 32, 3, 1): the fourth argument is the stride, as in PyTorch.
        let c = Conv2d::with_options(
            1,
            32,
            3,
            Conv2dOptions {
                stride: 1.into(),
                ..Default::default()
            },
            &dev,
        )?;
        assert_eq!(c.forward(&x)?.shape(), &[1, 32, 26, 26]);
        assert_eq!(
            Conv2d::new(1, 32, 3, &dev)?.forward(&x)?.shape(),
            &[1, 32, 26, 26]
        );
        let opts = Conv2dOptions {
            stride: [2, 1].into(),
            padding: (1, 0).into(),
            dilation: 2.into(),
            groups: 1,
            bias: false,
        };
        let c = Conv2d::with_options(1, 4, [3, 5], opts, &dev)?;
        assert_eq!(c.weight.shape(), &[4, 1, 3, 5]);
        assert!(c.bias.is_none() && c.named_parameters().len() == 1);
        // H: (28 + 2 - 2*2 - 1)/2 + 1 = 13; W: (28 - 2*4 - 1)/1 + 1 = 20.
        assert_eq!(c.forward(&x)?.shape(), &[1, 4, 13, 20]);
    }
    let e = Conv2d::with_options(
        3,
        4,
        3,
        Conv2dOptions {
            groups: 2,
            ..Default::default()
        },
        &Device::Cpu,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        e.contains("Conv2d") && e.contains("in_channels must be divisible by groups"),
        "{e}"
    );
    Ok(())
}

#[test]
fn layer_forms_equal_their_functionals() -> Result<()> {
    for dev in common::devices() {
        wgtorch::manual_seed(1);
        let x = Tensor::randn([2, 4, 7, 6], &dev)?;
        let conv = Conv2d::with_options(
            4,
            6,
            3,
            Conv2dOptions {
                padding: 1.into(),
                groups: 2,
                ..Default::default()
            },
            &dev,
        )?;
        let f = F::conv2d_with(
            &x,
            &conv.weight,
            conv.bias.as_ref(),
            F::Conv2dFuncOptions {
                padding: 1.into(),
                groups: 2,
                ..Default::default()
            },
        )?;
        assert_eq!(vals(&conv.forward(&x)?), vals(&f));
        // MaxPool2d(2): stride defaults to the kernel size.
        assert_eq!(MaxPool2d::new(2).forward(&x)?.shape(), &[2, 4, 3, 3]);
        assert_eq!(
            vals(&MaxPool2d::new(2).forward(&x)?),
            vals(&F::max_pool2d(&x, 2)?)
        );
        let mp = F::MaxPool2dOptions {
            stride: Some(1.into()),
            padding: 1.into(),
            dilation: 2.into(),
        };
        assert_eq!(
            vals(&MaxPool2d::with_options(3, mp).forward(&x)?),
            vals(&F::max_pool2d_with(&x, 3, mp)?)
        );
        let ap = F::AvgPool2dOptions {
            padding: 1.into(),
            count_include_pad: false,
            ..Default::default()
        };
        assert_eq!(
            vals(&AvgPool2d::with_options(3, ap).forward(&x)?),
            vals(&F::avg_pool2d_with(&x, 3, ap)?)
        );
        assert_eq!(AvgPool2d::new([2, 3]).forward(&x)?.shape(), &[2, 4, 3, 2]);
        assert_eq!(
            AdaptiveAvgPool2d::new(1).forward(&x)?.shape(),
            &[2, 4, 1, 1]
        );
        assert_eq!(
            AdaptiveAvgPool2d::new([3, 2]).forward(&x)?.shape(),
            &[2, 4, 3, 2]
        );
        let fc = Linear::new(6, 3, &dev)?;
        assert_eq!(
            vals(&fc.forward(&x)?),
            vals(&F::linear(&x, &fc.weight, fc.bias.as_ref())?)
        );
        assert_eq!(Flatten::new().forward(&x)?.shape(), &[2, 168]);
        let fl = Flatten::with_options(FlattenOptions {
            start_dim: 0,
            end_dim: 1,
        });
        assert_eq!(fl.forward(&x)?.shape(), &[8, 7, 6]);
        let (exact, tanh) = (
            GELU::new(),
            GELU::with_options(GELUOptions {
                approximate: Approximate::Tanh,
            }),
        );
        assert_eq!(vals(&exact.forward(&x)?), vals(&x.gelu()?));
        assert_eq!(vals(&tanh.forward(&x)?), vals(&x.gelu_tanh()?));
        assert_eq!(LeakyReLU::default().negative_slope, 0.01);
        assert_eq!(
            vals(&LeakyReLU::new(0.2).forward(&x)?),
            vals(&x.leaky_relu(0.2)?)
        );
    }
    Ok(())
}

#[test]
fn avg_pool_divisor_override_zero_is_an_error() {
    let x = Tensor::zeros([1, 1, 4, 4], &Device::Cpu).unwrap();
    let opts = F::AvgPool2dOptions {
        divisor_override: Some(0),
        ..Default::default()
    };
    let e = F::avg_pool2d_with(&x, 2, opts).unwrap_err().to_string();
    assert!(
        e.contains("avg_pool2d") && e.contains("divisor must be not zero"),
        "{e}"
    );
}

#[test]
fn linear_bias_option() -> Result<()> {
    let fc = Linear::with_options(3, 2, LinearOptions { bias: false }, &Device::Cpu)?;
    assert!(fc.bias.is_none() && fc.state_dict().len() == 1);
    assert_eq!(Linear::new(3, 2, &Device::Cpu)?.state_dict().len(), 2);
    Ok(())
}

#[test]
fn embedding_padding_idx_row_starts_at_zero_and_gets_no_gradient() -> Result<()> {
    for dev in common::devices() {
        let emb = Embedding::with_options(
            5,
            3,
            EmbeddingOptions {
                padding_idx: Some(-1),
            },
            &dev,
        )?;
        assert_eq!(emb.padding_idx, Some(4));
        assert_eq!(vals(&emb.weight.narrow(0, 4, 1)?), [0.0; 3]);
        let idx = Tensor::from_vec(vec![4i32, 1, 4, 2], [2, 2], &dev)?;
        let y = emb.forward(&idx)?;
        assert_eq!(y.shape(), &[2, 2, 3]);
        y.sum_all()?.backward()?;
        let g = vals(&emb.weight.grad().unwrap());
        assert_eq!(
            &g[12..15],
            &[0.0; 3],
            "{dev:?}: no gradient to the padding row"
        );
        assert_eq!(&g[3..6], &[1.0; 3]);
        for bad in [5, -6] {
            let e = Embedding::with_options(
                5,
                3,
                EmbeddingOptions {
                    padding_idx: Some(bad),
                },
                &dev,
            )
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
            assert!(
                e.contains("Padding_idx must be within num_embeddings"),
                "{e}"
            );
        }
    }
    Ok(())
}

#[test]
fn dropout_functional_and_layer() -> Result<()> {
    let e = Dropout::new(1.5)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("dropout probability has to be between 0 and 1, but got 1.5"),
        "{e}"
    );
    let x = Tensor::ones([4], &Device::Cpu)?;
    assert!(F::dropout(&x, -0.1, false).is_err());
    assert_eq!(vals(&F::dropout(&x, 1.0, true)?), [0.0; 4]);
    assert_eq!(Dropout::default().p, 0.5);
    Ok(())
}

#[test]
fn batch_norm_options() -> Result<()> {
    for dev in common::devices() {
        let x1 = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 6.0], [2, 2], &dev)?;
        let x2 = Tensor::from_vec(vec![5.0f32, 0.0, 7.0, 4.0], [2, 2], &dev)?;
        // momentum=None: the running mean is the plain average of the batch means.
        let opts = BatchNormOptions {
            momentum: None,
            ..Default::default()
        };
        let bn = BatchNorm1d::with_options(2, opts, &dev)?;
        bn.forward(&x1)?;
        bn.forward(&x2)?;
        let rm = vals(bn.running_mean.as_ref().unwrap());
        assert_close(
            "cumulative running mean",
            &rm,
            &[(2.0 + 6.0) / 2.0, (4.0 + 2.0) / 2.0],
            1e-6,
            1e-6,
        );
        // Unbiased batch variances: ch0 {1,3} -> 2, {5,7} -> 2; ch1 {2,6} -> 8, {0,4} -> 8.
        let rv = vals(bn.running_var.as_ref().unwrap());
        assert_close("cumulative running var", &rv, &[2.0, 8.0], 1e-6, 1e-6);
        assert_eq!(vals(bn.num_batches_tracked.as_ref().unwrap()), [2.0]);
        // Without running statistics the batch's are used in eval mode too; without affine
        // there are no parameters.
        let opts = BatchNormOptions {
            affine: false,
            track_running_stats: false,
            ..Default::default()
        };
        let mut bn = BatchNorm2d::with_options(2, opts, &dev)?;
        assert!(bn.state_dict().is_empty());
        bn.eval();
        let y = vals(&bn.forward(&x1)?);
        assert_close(
            "batch stats in eval",
            &y,
            &[-1.0, -1.0, 1.0, 1.0],
            1e-4,
            1e-4,
        );
        let mut bn = BatchNorm2d::new(2, &dev)?;
        bn.eval();
        let y = vals(&bn.forward(&x1)?);
        assert_close(
            "running stats in eval",
            &y,
            &[1.0, 2.0, 3.0, 6.0],
            1e-4,
            1e-4,
        );
    }
    Ok(())
}

#[test]
fn layer_norm_options() -> Result<()> {
    let dev = Device::Cpu;
    let names =
        |m: &LayerNorm| -> Vec<String> { m.state_dict().into_iter().map(|(n, _)| n).collect() };
    assert_eq!(names(&LayerNorm::new(&[3], &dev)?), ["weight", "bias"]);
    let no_bias = LayerNorm::with_options(
        &[3],
        LayerNormOptions {
            bias: false,
            ..Default::default()
        },
        &dev,
    )?;
    assert_eq!(names(&no_bias), ["weight"]);
    let plain = LayerNormOptions {
        elementwise_affine: false,
        eps: 0.5,
        ..Default::default()
    };
    let ln = LayerNorm::with_options(&[2], plain, &dev)?;
    assert!(names(&ln).is_empty());
    // x = [1, 3]: mean 2, var 1, (x - 2) / sqrt(1.5).
    let y = vals(&ln.forward(&Tensor::from_vec(vec![1.0f32, 3.0], [1, 2], &dev)?)?);
    let s = 1.5f64.sqrt();
    assert_close("layer_norm eps", &y, &[-1.0 / s, 1.0 / s], 1e-5, 1e-6);
    Ok(())
}
