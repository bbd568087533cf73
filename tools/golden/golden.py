"""Shared writer for the repo's own golden op files (format `wgtorch-golden/1`, as ../shared/golden/README.md).

Each generator in tools/golden/ builds a list of cases with `case(...)` and calls `write(name, cases)`, which
writes tests/golden/NAME.json; tests/golden.rs runs every file there on the CPU and the GPU.

    python tools/golden/<family>.py        # needs torch (a dev-time tool, never a test dependency)

Reference values are computed in float64 from the inputs as stored (rounded to the case's dtype), then rounded
to that dtype, as the shared goldens are.
"""
import json
import math
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
          torch.int32: "i32", torch.bool: "bool", torch.float64: "f32"}


def _num(x):
    if isinstance(x, bool):
        return x
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def enc(t, dtype=None, requires_grad=None):
    """A tensor as the format's {"shape", "dtype", "data"} (floats stored as f32 unless `dtype` says)."""
    t = t.detach()
    name = dtype or DTYPES[t.dtype]
    if t.dtype.is_floating_point:
        t = t.to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}.get(name, torch.float32))
        data = [_num(float(v)) for v in t.double().flatten().tolist()]
    elif t.dtype == torch.bool:
        data = [bool(v) for v in t.flatten().tolist()]
    else:
        data = [int(v) for v in t.flatten().tolist()]
    out = {"shape": list(t.shape), "dtype": name, "data": data}
    if requires_grad is not None:
        out["requires_grad"] = requires_grad
    return out


def case(name, op, fn, inputs, kwargs=None, grad=None, rtol=1e-5, atol=1e-6, dtype=None, seed=0):
    """Run `fn(*inputs, **kwargs)` in float64 (float inputs rounded to `dtype` or f32 first) and record
    outputs, a random upstream gradient per floating output, and input gradients for the float inputs in
    `grad` (indices; default: every float input)."""
    kwargs = kwargs or {}
    g = torch.Generator().manual_seed(seed)
    low = {"f16": torch.float16, "bf16": torch.bfloat16}.get(dtype, torch.float32)
    xs = []
    for x in inputs:
        if x.dtype.is_floating_point:
            x = x.to(low).double()
        xs.append(x)
    if grad is None:
        grad = [i for i, x in enumerate(xs) if x.dtype.is_floating_point]
    leaves = [x.clone().requires_grad_(i in grad) for i, x in enumerate(xs)]
    out = fn(*leaves, **kwargs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    diff = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    gos = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(low).double() for o in diff]
    grads = [None] * len(leaves)
    if diff:
        gs = torch.autograd.grad(diff, [leaves[i] for i in grad], gos, allow_unused=True)
        for i, gi in zip(grad, gs):
            grads[i] = enc(gi if gi is not None else torch.zeros_like(leaves[i]), dtype)
    c = {
        "name": name, "op": op, "kwargs": kwargs,
        "inputs": [enc(x, dtype if x.dtype.is_floating_point else None, i in grad) for i, x in enumerate(xs)],
        "output": [enc(o, dtype if o.dtype.is_floating_point else None) for o in outs],
        "rtol": rtol, "atol": atol,
    }
    if diff:
        c["grad_output"] = [enc(go, dtype) for go in gos]
        c["grads"] = grads
    if dtype:
        c["dtype"] = dtype
    return c


def write(name, cases, generator):
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    path = os.path.join(ROOT, "tests", "golden", name + ".json")
    doc = {"format": "wgtorch-golden/1", "generator": generator, "torch": torch.__version__, "cases": cases}
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.relpath(path, ROOT)}")
