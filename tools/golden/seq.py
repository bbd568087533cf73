"""Golden cases for the sequence layers: RNN / LSTM / GRU, MultiheadAttention, scaled_dot_product_attention,
TransformerEncoderLayer / TransformerDecoderLayer / Transformer.

    /work/venv/bin/python tools/golden/seq.py      # writes tests/golden/seq.json

Module cases store the data tensors first, then the module's parameters in state_dict order (PyTorch's names in
`input_names`; the data names in `kwargs.inputs`, the parameter names in `kwargs.params`); the rest of `kwargs`
holds the constructor and call keywords. Outputs are the module's outputs flattened (output, h_n[, c_n]; or
attn_output[, attn_weights]). Dropout is 0, or the module is in eval mode (`kwargs.eval`).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import case, write  # noqa: E402

CASES = []
RTOL, ATOL = 1e-4, 1e-5


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [] if out is None else [out]


def module_case(name, op, module, data, ctor, call, positional=(), rtol=RTOL, atol=ATOL, eval_mode=False):
    """`data`: ordered {name: tensor}; `positional`: the data names passed positionally (in order), the rest
    as keywords; `call`: extra call keywords (booleans)."""
    module = module.double()
    if eval_mode:
        module.eval()
    pnames = [n for n, _ in module.named_parameters()]
    assert pnames == list(module.state_dict().keys())
    params = [p.detach().clone() for _, p in module.named_parameters()]
    dnames = list(data)
    nd = len(dnames)

    def fn(*xs):
        d = dict(zip(dnames, xs[:nd]))
        args = [d.pop(n) for n in positional]
        if op == "torch.nn.LSTM" and "h0" in d:
            args.append((d.pop("h0"), d.pop("c0")))
        args += [d.pop(n) for n in ("h0",) if n in d]
        return flat(functional_call(module, dict(zip(pnames, xs[nd:])), tuple(args), dict(d, **call)))

    # Masks are not differentiated (PyTorch's stacks may swap a float mask they detect as causal for the hint).
    inputs = list(data.values()) + params
    grad = [i for i, (n, x) in enumerate(zip(dnames + pnames, inputs)) if x.is_floating_point() and "mask" not in n]
    c = case(name, op, fn, inputs, rtol=rtol, atol=atol, grad=grad)
    c["kwargs"] = dict(ctor, **call, inputs=dnames, params=pnames, eval=eval_mode)
    c["input_names"] = dnames + pnames
    CASES.append(c)


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def recurrent():
    for name, cls, ctor, seq_shape, with_h0, ev in [
        ("rnn_tanh_2layer", nn.RNN, dict(input_size=3, hidden_size=5, num_layers=2), (4, 2, 3), True, False),
        ("rnn_relu_bidir_batch_first", nn.RNN,
         dict(input_size=3, hidden_size=4, nonlinearity="relu", batch_first=True, bidirectional=True), (2, 4, 3),
         True, False),
        ("rnn_nobias_unbatched", nn.RNN, dict(input_size=3, hidden_size=4, bias=False), (5, 3), True, False),
        ("gru_2layer", nn.GRU, dict(input_size=3, hidden_size=4, num_layers=2), (4, 2, 3), True, False),
        ("gru_bidir_batch_first_zero_state", nn.GRU,
         dict(input_size=4, hidden_size=3, batch_first=True, bidirectional=True), (2, 5, 4), False, False),
        ("gru_nobias_unbatched", nn.GRU, dict(input_size=3, hidden_size=4, bias=False), (3, 3), True, False),
        ("lstm_2layer_bidir", nn.LSTM, dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True),
         (4, 2, 3), True, False),
        ("lstm_batch_first_bidir_nobias", nn.LSTM,
         dict(input_size=3, hidden_size=4, batch_first=True, bidirectional=True, bias=False), (2, 3, 3), True, False),
        ("lstm_proj_2layer_bidir", nn.LSTM,
         dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True, proj_size=2), (3, 2, 3), True, False),
        ("lstm_dropout_eval", nn.LSTM, dict(input_size=3, hidden_size=4, num_layers=3, dropout=0.5), (3, 2, 3),
         False, True),
    ]:
        torch.manual_seed(len(CASES))
        m = cls(**ctor)
        x = randn(*seq_shape)
        data = {"input": x}
        if with_h0:
            d = 2 if ctor.get("bidirectional") else 1
            hs = (ctor.get("num_layers", 1) * d,) + ((seq_shape[0 if ctor.get("batch_first") else 1],)
                                                     if len(seq_shape) == 3 else ())
            data["h0"] = randn(*hs, ctor.get("proj_size") or ctor["hidden_size"])
            if cls is nn.LSTM:
                data["c0"] = randn(*hs, ctor["hidden_size"])
        ctor_kw = dict(ctor)
        module_case(name, f"torch.nn.{cls.__name__}", m, data, ctor_kw, {}, positional=("input",), eval_mode=ev)


def mha():
    E, H = 8, 2
    L, S, N = 4, 5, 2
    torch.manual_seed(100)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[0, -2:] = True
    bmask = torch.rand(L, S) < 0.3
    bmask[:, 0] = False
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    x = randn(L, N, E)
    specs = [
        ("mha_self_weights_averaged", {}, {"query": x, "key": x, "value": x}, {}),
        ("mha_cross_masks_per_head", {}, {"query": x, "key": randn(S, N, E), "value": randn(S, N, E),
                                         "attn_mask": bmask, "key_padding_mask": pad},
         {"average_attn_weights": False}),
        ("mha_float_mask3d_batch_first_no_weights", {"batch_first": True},
         {"query": randn(N, L, E), "key": randn(N, S, E), "value": randn(N, S, E), "attn_mask": randn(N * H, L, S)},
         {"need_weights": False}),
        ("mha_kdim_vdim_bias_kv", {"kdim": 5, "vdim": 3, "add_bias_kv": True},
         {"query": x, "key": randn(S, N, 5), "value": randn(S, N, 3), "key_padding_mask": pad, "attn_mask": bmask},
         {}),
        ("mha_zero_attn_bias_kv", {"add_zero_attn": True, "add_bias_kv": True},
         {"query": x, "key": randn(S, N, E), "value": randn(S, N, E), "key_padding_mask": pad, "attn_mask": bmask},
         {"average_attn_weights": False}),
        ("mha_causal_hint_no_weights", {}, {"query": x, "key": x, "value": x, "attn_mask": causal},
         {"is_causal": True, "need_weights": False}),
        ("mha_unbatched_nobias", {"bias": False}, {"query": randn(L, E), "key": randn(S, E), "value": randn(S, E),
                                                  "key_padding_mask": pad[0]}, {}),
    ]
    for name, ctor, data, call in specs:
        torch.manual_seed(len(CASES))
        m = nn.MultiheadAttention(E, H, **ctor)
        ctor = dict(ctor, embed_dim=E, num_heads=H)
        module_case(name, "torch.nn.MultiheadAttention", m, data, ctor, call, positional=("query", "key", "value"))


def sdpa():
    op = "torch.nn.functional.scaled_dot_product_attention"

    def add(name, inputs, names, kwargs):
        def fn(q, k, v, *m, **kw):
            return F.scaled_dot_product_attention(q, k, v, *m, **kw)
        c = case(name, op, fn, inputs, kwargs, rtol=RTOL, atol=ATOL)
        c["kwargs"] = dict(kwargs, inputs=names)
        CASES.append(c)

    torch.manual_seed(200)
    q, k, v = randn(2, 2, 3, 4), randn(2, 2, 5, 4), randn(2, 2, 5, 4)
    qkv = ["query", "key", "value"]
    add("sdpa_basic", [q, k, v], qkv, {})
    add("sdpa_causal_square", [randn(2, 2, 4, 4), randn(2, 2, 4, 4), randn(2, 2, 4, 6)], qkv, {"is_causal": True})
    add("sdpa_causal_rect", [q, k, v], qkv, {"is_causal": True})
    m = torch.rand(3, 5) < 0.5
    m[:, 1] = True
    m[2, :] = False  # a row with nothing to attend to: zeros
    add("sdpa_bool_mask_broadcast", [q, k, v, m], qkv + ["attn_mask"], {})
    add("sdpa_float_mask_scale", [q, k, v, randn(2, 1, 3, 5)], qkv + ["attn_mask"], {"scale": 0.3})
    add("sdpa_gqa", [randn(1, 4, 3, 4), randn(1, 2, 5, 4), randn(1, 2, 5, 2)], qkv, {"enable_gqa": True})
    add("sdpa_3d", [randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 3)], qkv, {})


def transformer():
    E, H, FF = 4, 2, 8
    S, T, N = 5, 3, 2
    torch.manual_seed(300)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[1, -1] = True
    causal = nn.Transformer.generate_square_subsequent_mask
    base = dict(d_model=E, nhead=H, dim_feedforward=FF, dropout=0.0)
    for name, extra, data, call in [
        ("enc_layer_post_relu", {}, {"src": randn(S, N, E), "src_mask": causal(S, dtype=torch.float64),
                                     "src_key_padding_mask": pad}, {}),
        ("enc_layer_pre_gelu_batch_first", {"norm_first": True, "activation": "gelu", "batch_first": True},
         {"src": randn(N, S, E), "src_mask": torch.rand(S, S) < 0.3}, {}),
        ("enc_layer_causal_hint", {"norm_first": True, "layer_norm_eps": 1e-3},
         {"src": randn(S, N, E), "src_mask": causal(S, dtype=torch.float64)}, {"is_causal": True}),
        ("enc_layer_no_bias", {"bias": False}, {"src": randn(S, N, E)}, {}),
    ]:
        torch.manual_seed(len(CASES))
        ctor = dict(base, **extra)
        m = nn.TransformerEncoderLayer(**ctor)
        module_case(name, "torch.nn.TransformerEncoderLayer", m, data, ctor, call, positional=("src",))
    mem_pad = torch.zeros(N, S, dtype=torch.bool)
    mem_pad[0, 0] = True
    for name, extra, data, call in [
        ("dec_layer_post_relu", {}, {"tgt": randn(T, N, E), "memory": randn(S, N, E),
                                     "tgt_mask": causal(T, dtype=torch.float64), "memory_key_padding_mask": mem_pad},
         {}),
        ("dec_layer_pre_gelu_batch_first", {"norm_first": True, "activation": "gelu", "batch_first": True},
         {"tgt": randn(N, T, E), "memory": randn(N, S, E), "tgt_mask": causal(T, dtype=torch.float64),
          "memory_mask": torch.rand(T, S) < 0.3}, {"tgt_is_causal": True}),
    ]:
        torch.manual_seed(len(CASES))
        ctor = dict(base, **extra)
        m = nn.TransformerDecoderLayer(**ctor)
        module_case(name, "torch.nn.TransformerDecoderLayer", m, data, ctor, call, positional=("tgt", "memory"))
    torch.manual_seed(len(CASES))
    ctor = dict(base, num_encoder_layers=2, num_decoder_layers=2)
    m = nn.Transformer(**ctor)
    data = {"src": randn(S, N, E), "tgt": randn(T, N, E), "tgt_mask": causal(T, dtype=torch.float64),
            "src_key_padding_mask": pad, "memory_key_padding_mask": pad}
    module_case("transformer_2layer", "torch.nn.Transformer", m, data, ctor, {}, positional=("src", "tgt"))


if __name__ == "__main__":
    recurrent()
    mha()
    sdpa()
    transformer()
    write("seq", CASES, "tools/golden/seq.py")
