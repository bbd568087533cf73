//! Sequence layers beyond the goldens (tests/golden/seq.json): PyTorch's state_dict names,
//! initialisation, dropout in train vs eval mode, bad shapes and masks, GPU against CPU, and
//! state_dicts saved by PyTorch. Every test holds the seed lock: module construction draws from
//! the global generator, which `gpu_matches_cpu` reseeds to build equal models.

mod common;

use common::{assert_close, vals};
use wgtorch::nn::functional as F;
use wgtorch::nn::*;
use wgtorch::{DType, Device, Result, Tensor};

fn names<M: Module>(m: &M) -> Vec<String> {
    m.state_dict().into_iter().map(|(n, _)| n).collect()
}

fn msg<T>(r: Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

fn no_dropout() -> TransformerLayerOptions {
    TransformerLayerOptions {
        dim_feedforward: 8,
        dropout: 0.0,
        ..Default::default()
    }
}

/// The lists below are `list(module.state_dict())` printed by PyTorch 2.15.
#[test]
fn state_dict_names_match_pytorch() -> Result<()> {
    let _seed = common::seed_lock();
    let dev = Device::Cpu;
    let bi2 = RNNOptions {
        num_layers: 2,
        bidirectional: true,
        ..Default::default()
    };
    let gru = GRU::with_options(3, 4, bi2, &dev)?;
    assert_eq!(
        names(&gru),
        [
            "weight_ih_l0",
            "weight_hh_l0",
            "bias_ih_l0",
            "bias_hh_l0",
            "weight_ih_l0_reverse",
            "weight_hh_l0_reverse",
            "bias_ih_l0_reverse",
            "bias_hh_l0_reverse",
            "weight_ih_l1",
            "weight_hh_l1",
            "bias_ih_l1",
            "bias_hh_l1",
            "weight_ih_l1_reverse",
            "weight_hh_l1_reverse",
            "bias_ih_l1_reverse",
            "bias_hh_l1_reverse"
        ]
    );
    let (w, _) = &gru.state_dict()[8];
    assert_eq!(
        gru.state_dict()[8].1.shape(),
        &[12, 8],
        "{w}: layer 1 takes both directions"
    );
    let nobias = RNNOptions {
        bias: false,
        ..Default::default()
    };
    assert_eq!(
        names(&LSTM::with_options(3, 4, nobias, &dev)?),
        ["weight_ih_l0", "weight_hh_l0"]
    );
    let sep = MultiheadAttentionOptions {
        kdim: Some(3),
        vdim: Some(5),
        add_bias_kv: true,
        ..Default::default()
    };
    assert_eq!(
        names(&MultiheadAttention::with_options(4, 2, sep, &dev)?),
        [
            "q_proj_weight",
            "k_proj_weight",
            "v_proj_weight",
            "in_proj_bias",
            "bias_k",
            "bias_v",
            "out_proj.weight",
            "out_proj.bias"
        ]
    );
    let nb = MultiheadAttentionOptions {
        bias: false,
        ..Default::default()
    };
    assert_eq!(
        names(&MultiheadAttention::with_options(4, 2, nb, &dev)?),
        ["in_proj_weight", "out_proj.weight"]
    );
    let opts = TransformerOptions {
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        layer: no_dropout(),
    };
    let want: Vec<String> = [
        "encoder.layers.0.self_attn.in_proj_weight",
        "encoder.layers.0.self_attn.in_proj_bias",
        "encoder.layers.0.self_attn.out_proj.weight",
        "encoder.layers.0.self_attn.out_proj.bias",
        "encoder.layers.0.linear1.weight",
        "encoder.layers.0.linear1.bias",
        "encoder.layers.0.linear2.weight",
        "encoder.layers.0.linear2.bias",
        "encoder.layers.0.norm1.weight",
        "encoder.layers.0.norm1.bias",
        "encoder.layers.0.norm2.weight",
        "encoder.layers.0.norm2.bias",
        "encoder.norm.weight",
        "encoder.norm.bias",
        "decoder.layers.0.self_attn.in_proj_weight",
        "decoder.layers.0.self_attn.in_proj_bias",
        "decoder.layers.0.self_attn.out_proj.weight",
        "decoder.layers.0.self_attn.out_proj.bias",
        "decoder.layers.0.multihead_attn.in_proj_weight",
        "decoder.layers.0.multihead_attn.in_proj_bias",
        "decoder.layers.0.multihead_attn.out_proj.weight",
        "decoder.layers.0.multihead_attn.out_proj.bias",
        "decoder.layers.0.linear1.weight",
        "decoder.layers.0.linear1.bias",
        "decoder.layers.0.linear2.weight",
        "decoder.layers.0.linear2.bias",
        "decoder.layers.0.norm1.weight",
        "decoder.layers.0.norm1.bias",
        "decoder.layers.0.norm2.weight",
        "decoder.layers.0.norm2.bias",
        "decoder.layers.0.norm3.weight",
        "decoder.layers.0.norm3.bias",
        "decoder.norm.weight",
        "decoder.norm.bias",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(names(&Transformer::with_options(4, 2, opts, &dev)?), want);
    let layer = TransformerEncoderLayer::with_options(4, 2, no_dropout(), &dev)?;
    let stack = TransformerEncoder::with_options(
        layer,
        2,
        TransformerStackOptions {
            norm: Some(LayerNorm::new(&[4], &dev)?),
        },
    )?;
    let n = names(&stack);
    assert_eq!(n.len(), 26);
    assert_eq!(
        (n[12].as_str(), n[24].as_str(), n[25].as_str()),
        (
            "layers.1.self_attn.in_proj_weight",
            "norm.weight",
            "norm.bias"
        )
    );
    Ok(())
}

/// PyTorch's initialisation: RNN weights U(±1/√H); MHA in_proj xavier-uniform with zero biases;
/// the encoder stack's layers are copies (equal values, distinct tensors); Transformer matrices
/// xavier-uniform.
#[test]
fn initialisation_as_pytorch() -> Result<()> {
    let _seed = common::seed_lock();
    wgtorch::manual_seed(1);
    let dev = Device::Cpu;
    let max_abs = |t: &Tensor| vals(t).iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let rnn = RNN::new(3, 16, &dev)?;
    for (n, t) in rnn.state_dict() {
        let m = max_abs(&t);
        assert!(m <= 0.25 && m > 0.15, "{n}: max |w| {m}");
    }
    let mha = MultiheadAttention::new(8, 2, &dev)?;
    let w = mha.in_proj_weight.as_ref().unwrap();
    let bound = (6.0f64 / (8.0 + 24.0)).sqrt();
    assert!(max_abs(w) <= bound && max_abs(w) > 0.8 * bound);
    assert_eq!(max_abs(mha.in_proj_bias.as_ref().unwrap()), 0.0);
    assert_eq!(max_abs(mha.out_proj.bias.as_ref().unwrap()), 0.0);
    assert!(max_abs(&mha.out_proj.weight) <= 1.0 / 8f64.sqrt());
    let layer = TransformerEncoderLayer::with_options(4, 2, no_dropout(), &dev)?;
    let enc = TransformerEncoder::new(layer, 2)?;
    let (a, b) = (&enc.layers[0].linear1.weight, &enc.layers[1].linear1.weight);
    assert_eq!(vals(a), vals(b));
    assert_ne!(a.id(), b.id());
    assert_eq!(enc.parameters().len(), 24);
    let opts = TransformerOptions {
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        layer: no_dropout(),
    };
    let t = Transformer::with_options(4, 2, opts, &dev)?;
    let l1 = &t.encoder.layers[0].linear1.weight; // [8, 4]: xavier bound sqrt(6 / 12)
    assert!(max_abs(l1) <= 0.5f64.sqrt() && max_abs(l1) > 0.45);
    assert_eq!(
        max_abs(t.decoder.layers[0].self_attn.in_proj_bias.as_ref().unwrap()),
        0.0
    );
    Ok(())
}

fn shaped(shape: &[usize], dev: &Device) -> Result<Tensor> {
    Tensor::randn(shape, dev)
}

/// Dropout between recurrent layers, in attention and in the transformer layers draws masks in
/// training mode and is the identity in eval mode (equal to the same weights with p = 0).
#[test]
fn dropout_in_train_mode_identity_in_eval() -> Result<()> {
    let _seed = common::seed_lock();
    wgtorch::manual_seed(2);
    let dev = Device::Cpu;
    let x = shaped(&[5, 2, 3], &dev)?;
    let drop = RNNOptions {
        num_layers: 3,
        dropout: 0.5,
        ..Default::default()
    };
    let mut lstm = LSTM::with_options(3, 6, drop, &dev)?;
    let mut plain = LSTM::with_options(
        3,
        6,
        RNNOptions {
            dropout: 0.0,
            ..drop
        },
        &dev,
    )?;
    plain.load_state_dict(&lstm.state_dict(), true)?;
    let want = vals(&plain.forward(&x)?);
    assert_ne!(vals(&lstm.forward(&x)?), want, "training mode drops");
    lstm.eval();
    assert_eq!(vals(&lstm.forward(&x)?), want);
    lstm.train();
    assert_ne!(vals(&lstm.forward(&x)?), want);

    let mopts = MultiheadAttentionOptions {
        dropout: 0.5,
        ..Default::default()
    };
    let mut mha = MultiheadAttention::with_options(8, 2, mopts, &dev)?;
    let mut mha0 = MultiheadAttention::new(8, 2, &dev)?;
    mha0.load_state_dict(&mha.state_dict(), true)?;
    let q = shaped(&[4, 2, 8], &dev)?;
    let run = |m: &MultiheadAttention| -> Result<Vec<f64>> {
        let (o, w) = m.forward(&q, &q, &q, MhaArgs::default())?;
        Ok([vals(&o), vals(&w.unwrap())].concat())
    };
    let want = run(&mha0)?;
    assert_ne!(run(&mha)?, want);
    mha.eval();
    assert_eq!(run(&mha)?, want);

    let opts = TransformerOptions {
        num_encoder_layers: 2,
        num_decoder_layers: 1,
        layer: TransformerLayerOptions {
            dim_feedforward: 8,
            dropout: 0.3,
            ..Default::default()
        },
    };
    let mut t = Transformer::with_options(8, 2, opts, &dev)?;
    let (src, tgt) = (shaped(&[5, 2, 8], &dev)?, shaped(&[3, 2, 8], &dev)?);
    let a = vals(&t.forward(&src, &tgt, TransformerArgs::default())?);
    let b = vals(&t.forward(&src, &tgt, TransformerArgs::default())?);
    assert_ne!(a, b, "training mode draws fresh masks");
    t.eval();
    let a = vals(&t.forward(&src, &tgt, TransformerArgs::default())?);
    let b = vals(&t.forward(&src, &tgt, TransformerArgs::default())?);
    assert_eq!(a, b);

    // sdpa applies dropout_p whenever it is > 0 (it has no mode); p = 1 drops everything.
    let (q, k) = (shaped(&[2, 3, 4], &dev)?, shaped(&[2, 5, 4], &dev)?);
    let all = F::SdpaOptions {
        dropout_p: 1.0,
        ..Default::default()
    };
    assert!(
        vals(&F::scaled_dot_product_attention_with(&q, &k, &k, all)?)
            .iter()
            .all(|&v| v == 0.0)
    );
    let none = F::SdpaOptions {
        dropout_p: 0.0,
        ..Default::default()
    };
    assert_eq!(
        vals(&F::scaled_dot_product_attention_with(&q, &k, &k, none)?),
        vals(&F::scaled_dot_product_attention(&q, &k, &k)?)
    );
    Ok(())
}

#[test]
fn bad_shapes_and_masks_are_errors() -> Result<()> {
    let _seed = common::seed_lock();
    for dev in common::devices() {
        let d = &dev;
        let gru = GRU::new(3, 4, d)?;
        let m = msg(gru.forward_with_state(&shaped(&[5, 2, 7], d)?, None));
        assert!(
            m.contains("GRU")
                && m.contains("input.size(-1) must be equal to input_size. Expected 3, got 7"),
            "{m}"
        );
        let m = msg(gru.forward_with_state(&shaped(&[1, 5, 2, 3], d)?, None));
        assert!(
            m.contains("Expected input to be 2D or 3D, got 4D tensor instead"),
            "{m}"
        );
        let m = msg(gru.forward_with_state(&shaped(&[5, 2, 3], d)?, Some(&shaped(&[1, 3, 4], d)?)));
        assert!(
            m.contains("Expected hx size [1, 2, 4], got [1, 3, 4]"),
            "{m}"
        );
        let m = msg(gru.forward_with_state(&shaped(&[5, 2, 3], d)?, Some(&shaped(&[1, 4], d)?)));
        assert!(
            m.contains("For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
            "{m}"
        );
        let lstm = LSTM::new(3, 4, d)?;
        let (h, c) = (shaped(&[1, 2, 4], d)?, shaped(&[1, 2, 5], d)?);
        let m = msg(lstm.forward_with_state(&shaped(&[5, 2, 3], d)?, Some((&h, &c))));
        assert!(
            m.contains("LSTM") && m.contains("Expected hidden[1] size [1, 2, 4], got [1, 2, 5]"),
            "{m}"
        );
        let bad = RNNOptions {
            dropout: 1.5,
            ..Default::default()
        };
        assert!(msg(RNN::with_options(3, 4, bad, d))
            .contains("dropout should be a number in range [0, 1]"));
        assert!(msg(RNN::new(3, 0, d)).contains("hidden_size must be greater than zero"));
        let proj = RNNOptions {
            proj_size: 2,
            ..Default::default()
        };
        assert!(msg(GRU::with_options(3, 4, proj, d))
            .contains("proj_size argument is only supported for LSTM"));
        assert!(msg(LSTM::with_options(3, 2, proj, d))
            .contains("proj_size has to be smaller than hidden_size"));
        let lstm = LSTM::with_options(3, 4, proj, d)?;
        let (h, c) = (shaped(&[1, 2, 4], d)?, shaped(&[1, 2, 4], d)?);
        let m = msg(lstm.forward_with_state(&shaped(&[5, 2, 3], d)?, Some((&h, &c))));
        assert!(
            m.contains("Expected hidden[0] size [1, 2, 2], got [1, 2, 4]"),
            "{m}"
        );

        let mha = MultiheadAttention::new(8, 2, d)?;
        assert!(msg(MultiheadAttention::new(8, 3, d))
            .contains("embed_dim must be divisible by num_heads"));
        let x = shaped(&[4, 2, 8], d)?;
        let m = msg(mha.forward(&shaped(&[4, 2, 6], d)?, &x, &x, MhaArgs::default()));
        assert!(
            m.contains("was expecting embedding dimension of 8, but got 6"),
            "{m}"
        );
        let mask = Tensor::zeros([4, 3], d)?;
        let args = MhaArgs {
            attn_mask: Some(&mask),
            ..Default::default()
        };
        let m = msg(mha.forward(&x, &x, &x, args));
        assert!(
            m.contains("The shape of the 2D attn_mask is [4, 3], but should be [4, 4]."),
            "{m}"
        );
        let pad = Tensor::zeros_like(&Tensor::zeros([2, 5], d)?)?.to_dtype(DType::Bool)?;
        let args = MhaArgs {
            key_padding_mask: Some(&pad),
            ..Default::default()
        };
        let m = msg(mha.forward(&x, &x, &x, args));
        assert!(
            m.contains("expecting key_padding_mask shape of [2, 4], but got [2, 5]"),
            "{m}"
        );
        let args = MhaArgs {
            is_causal: true,
            ..Default::default()
        };
        assert!(msg(mha.forward(&x, &x, &x, args))
            .contains("Need attn_mask if specifying the is_causal hint"));
        let m = msg(mha.forward(&x, &shaped(&[4, 8], d)?, &x, MhaArgs::default()));
        assert!(
            m.contains("expected `key` and `value` to be 3-D but found 2-D and 3-D"),
            "{m}"
        );

        let (q, k) = (shaped(&[2, 3, 4], d)?, shaped(&[2, 5, 4], d)?);
        let mask = Tensor::ones([3, 5], d)?.to_dtype(DType::Bool)?;
        let both = F::SdpaOptions {
            attn_mask: Some(&mask),
            is_causal: true,
            ..Default::default()
        };
        let m = msg(F::scaled_dot_product_attention_with(&q, &k, &k, both));
        assert!(
            m.contains("Explicit attn_mask should not be set when is_causal=True"),
            "{m}"
        );
        let m = msg(F::scaled_dot_product_attention(
            &q,
            &k,
            &shaped(&[2, 4, 4], d)?,
        ));
        assert!(m.contains("scaled_dot_product_attention"), "{m}");
        let wide = Tensor::zeros([2, 2, 3, 5], d)?;
        let o = F::SdpaOptions {
            attn_mask: Some(&wide),
            ..Default::default()
        };
        let m = msg(F::scaled_dot_product_attention_with(&q, &k, &k, o));
        assert!(
            m.contains("does not broadcast to the attention weights' shape [2, 3, 5]"),
            "{m}"
        );
        let int_mask = Tensor::zeros([3, 5], d)?.to_dtype(DType::I32)?;
        let o = F::SdpaOptions {
            attn_mask: Some(&int_mask),
            ..Default::default()
        };
        assert!(msg(F::scaled_dot_product_attention_with(&q, &k, &k, o))
            .contains("Expected attn_mask dtype to be bool or float"));
        let gqa = F::SdpaOptions {
            enable_gqa: true,
            ..Default::default()
        };
        let m = msg(F::scaled_dot_product_attention_with(
            &shaped(&[1, 3, 2, 4], d)?,
            &shaped(&[1, 2, 2, 4], d)?,
            &shaped(&[1, 2, 2, 4], d)?,
            gqa,
        ));
        assert!(m.contains("must be a multiple"), "{m}");

        let opts = TransformerOptions {
            num_encoder_layers: 1,
            num_decoder_layers: 1,
            layer: no_dropout(),
        };
        let t = Transformer::with_options(8, 2, opts, d)?;
        let m = msg(t.forward(
            &shaped(&[5, 2, 8], d)?,
            &shaped(&[3, 3, 8], d)?,
            TransformerArgs::default(),
        ));
        assert!(
            m.contains("the batch number of src and tgt must be equal"),
            "{m}"
        );
        let m = msg(t.forward(
            &shaped(&[5, 2, 8], d)?,
            &shaped(&[3, 2, 6], d)?,
            TransformerArgs::default(),
        ));
        assert!(
            m.contains("the feature number of src and tgt must be equal to d_model"),
            "{m}"
        );
    }
    Ok(())
}

#[test]
fn square_subsequent_mask_and_causal_equivalence() -> Result<()> {
    let _seed = common::seed_lock();
    for dev in common::devices() {
        let m = Transformer::generate_square_subsequent_mask(3, &dev)?;
        let inf = f64::NEG_INFINITY;
        assert_eq!(vals(&m), [0.0, inf, inf, 0.0, 0.0, inf, 0.0, 0.0, 0.0]);
        // is_causal equals the explicit float mask, and a bool keep-mask (tril).
        wgtorch::manual_seed(3);
        let q = Tensor::randn([2, 2, 3, 4], &dev)?;
        let causal = F::SdpaOptions {
            is_causal: true,
            ..Default::default()
        };
        let a = vals(&F::scaled_dot_product_attention_with(&q, &q, &q, causal)?);
        let with_mask = F::SdpaOptions {
            attn_mask: Some(&m),
            ..Default::default()
        };
        let b = vals(&F::scaled_dot_product_attention_with(
            &q, &q, &q, with_mask,
        )?);
        assert_close("causal vs float mask", &a, &b, 1e-6, 1e-6);
        let keep = m.eq_scalar(0.0)?;
        let with_bool = F::SdpaOptions {
            attn_mask: Some(&keep),
            ..Default::default()
        };
        let c = vals(&F::scaled_dot_product_attention_with(
            &q, &q, &q, with_bool,
        )?);
        assert_close("causal vs bool mask", &a, &c, 1e-6, 1e-6);
    }
    Ok(())
}

/// Build the module with the same seed on the CPU and on `gpu`, run it, backpropagate
/// `sum(out²)` and compare outputs and parameter gradients.
fn compare<M: Module>(
    name: &str,
    gpu: &Device,
    make: impl Fn(&Device) -> Result<M>,
    run: impl Fn(&M, &Device) -> Result<Vec<Tensor>>,
) -> Result<()> {
    let mut res = Vec::new();
    for dev in [Device::Cpu, *gpu] {
        wgtorch::manual_seed(5);
        let m = make(&dev)?;
        let outs = run(&m, &dev)?;
        let mut loss = outs[0].square()?.sum_all()?;
        for o in &outs[1..] {
            loss = loss.add(&o.square()?.sum_all()?)?;
        }
        loss.backward()?;
        let mut v: Vec<Vec<f64>> = outs.iter().map(vals).collect();
        for (n, p) in m.named_parameters() {
            let g = p
                .grad()
                .unwrap_or_else(|| panic!("{name}: {n} has no gradient on {dev}"));
            v.push(vals(&g));
        }
        res.push(v);
    }
    assert_eq!(res[0].len(), res[1].len());
    for (i, (g, c)) in res[1].iter().zip(&res[0]).enumerate() {
        assert_close(&format!("{name} [{i}] gpu vs cpu"), g, c, 1e-3, 1e-4);
    }
    Ok(())
}

/// The same modules (same seed) give the same outputs and gradients on the GPU as on the CPU.
#[test]
fn gpu_matches_cpu() -> Result<()> {
    let Some(gpu) = common::gpu() else {
        return Ok(());
    };
    let _seed = common::seed_lock();
    let cpu = Device::Cpu;
    wgtorch::manual_seed(6);
    let x = Tensor::randn([2, 4, 3], &cpu)?;
    let src = Tensor::randn([2, 5, 8], &cpu)?;
    let tgt = Tensor::randn([2, 3, 8], &cpu)?;
    let mut pad = vec![0.0; 10];
    pad[9] = 1.0;
    let pad = Tensor::from_f64(&pad, [2, 5], DType::Bool, &cpu)?;
    let bi = RNNOptions {
        num_layers: 2,
        bidirectional: true,
        batch_first: true,
        ..Default::default()
    };
    compare(
        "LSTM",
        &gpu,
        |d| LSTM::with_options(3, 4, bi, d),
        |m, d| {
            let (o, (h, c)) = m.forward_with_state(&x.to(d)?, None)?;
            Ok(vec![o, h, c])
        },
    )?;
    compare(
        "GRU",
        &gpu,
        |d| GRU::with_options(3, 4, bi, d),
        |m, d| {
            let (o, h) = m.forward_with_state(&x.to(d)?, None)?;
            Ok(vec![o, h])
        },
    )?;
    let relu = RNNOptions {
        nonlinearity: Nonlinearity::Relu,
        ..bi
    };
    compare(
        "RNN",
        &gpu,
        |d| RNN::with_options(3, 4, relu, d),
        |m, d| {
            let (o, h) = m.forward_with_state(&x.to(d)?, None)?;
            Ok(vec![o, h])
        },
    )?;
    let bf = MultiheadAttentionOptions {
        batch_first: true,
        ..Default::default()
    };
    compare(
        "MultiheadAttention",
        &gpu,
        |d| MultiheadAttention::with_options(8, 2, bf, d),
        |m, d| {
            let (s, p) = (src.to(d)?, pad.to(d)?);
            let args = MhaArgs {
                key_padding_mask: Some(&p),
                average_attn_weights: false,
                ..Default::default()
            };
            let (o, w) = m.forward(&s, &s, &s, args)?;
            Ok(vec![o, w.unwrap()])
        },
    )?;
    let opts = TransformerOptions {
        num_encoder_layers: 2,
        num_decoder_layers: 2,
        layer: TransformerLayerOptions {
            batch_first: true,
            norm_first: true,
            activation: Activation::Gelu,
            ..no_dropout()
        },
    };
    compare(
        "Transformer",
        &gpu,
        |d| Transformer::with_options(8, 2, opts, d),
        |m, d| {
            let mask = Transformer::generate_square_subsequent_mask(3, d)?;
            let p = pad.to(d)?;
            let args = TransformerArgs {
                tgt_mask: Some(&mask),
                tgt_is_causal: true,
                src_key_padding_mask: Some(&p),
                memory_key_padding_mask: Some(&p),
                ..Default::default()
            };
            Ok(vec![m.forward(&src.to(d)?, &tgt.to(d)?, args)?])
        },
    )?;
    Ok(())
}

fn golden() -> std::path::PathBuf {
    std::env::var("WGTORCH_GOLDEN_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden")
        })
}

/// The tensors of `ts` under `prefix`, renamed without it.
fn under(ts: &[(String, Tensor)], prefix: &str) -> Vec<(String, Tensor)> {
    ts.iter()
        .filter_map(|(k, t)| k.strip_prefix(prefix).map(|n| (n.to_string(), t.clone())))
        .collect()
}

fn get<'a>(ts: &'a [(String, Tensor)], k: &str) -> &'a Tensor {
    &ts.iter()
        .find(|(n, _)| n == k)
        .unwrap_or_else(|| panic!("missing {k}"))
        .1
}

/// State_dicts saved by PyTorch (../shared/golden/onnx: a 2-layer GELU TransformerEncoder and an
/// LSTM tagger) load strictly by name and reproduce PyTorch's outputs.
#[test]
fn pytorch_state_dicts_load_and_match() -> Result<()> {
    let _seed = common::seed_lock();
    let dir = golden().join("onnx");
    for dev in common::devices() {
        let load = |n: &str| wgtorch::io::load(dir.join(n), &dev);
        // emb + pos -> TransformerEncoder(2 x (d 32, nhead 4, ff 64, gelu, batch_first)) -> mean over time -> cls
        let sd = load("transformer_encoder.state_dict.safetensors")?;
        let io = load("transformer_encoder.io.safetensors")?;
        let opts = TransformerLayerOptions {
            dim_feedforward: 64,
            dropout: 0.0,
            activation: Activation::Gelu,
            batch_first: true,
            ..Default::default()
        };
        let mut enc =
            TransformerEncoder::new(TransformerEncoderLayer::with_options(32, 4, opts, &dev)?, 2)?;
        enc.load_state_dict(&under(&sd, "enc."), true)?;
        enc.eval();
        let ids = get(&io, "input.0");
        let t = ids.shape()[1];
        let h = ids
            .embedding(get(&sd, "emb.weight"))?
            .add(&get(&sd, "pos").narrow(1, 0, t)?)?;
        let y = enc
            .forward(&h, EncoderArgs::default())?
            .mean_dims([1], false)?;
        let y = y.linear(get(&sd, "cls.weight"), Some(get(&sd, "cls.bias")))?;
        assert_close(
            &format!("transformer_encoder on {dev}"),
            &vals(&y),
            &vals(get(&io, "output.0")),
            1e-4,
            1e-4,
        );

        // emb -> LSTM(12, 16, batch_first) -> tanh -> out
        let sd = load("lstm_tagger.state_dict.safetensors")?;
        let io = load("lstm_tagger.io.safetensors")?;
        let bf = RNNOptions {
            batch_first: true,
            ..Default::default()
        };
        let mut lstm = LSTM::with_options(12, 16, bf, &dev)?;
        lstm.load_state_dict(&under(&sd, "lstm."), true)?;
        let h = get(&io, "input.0").embedding(get(&sd, "emb.weight"))?;
        let y = lstm.forward(&h)?.tanh()?;
        let y = y.linear(get(&sd, "out.weight"), Some(get(&sd, "out.bias")))?;
        assert_close(
            &format!("lstm_tagger on {dev}"),
            &vals(&y),
            &vals(get(&io, "output.0")),
            1e-4,
            1e-4,
        );
    }
    Ok(())
}
