"""Goldens for the elementwise activations and transcendental functions at the far ends of f32:
tiny arguments (where `exp(x) - 1`, `1 - e^{-2|x|}` or `1 - erfc` cancel), the tails (where
`log(1 + eˣ)` loses eˣ, `x²` overflows f32 from |x| ≈ 1.8e19, and densities underflow),
infinities and NaN, forward and gradient, each compared relative to PyTorch's value (atol at the scale of f32's subnormals).

    python tools/golden/extremes.py

sin and cos run to the largest f32 and near multiples of π/2: WGSL's builtins on a GPU (lavapipe's)
did not reduce such arguments exactly (sin(1e10) was -1), so the prelude's `sin_f`/`cos_f` do.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import case, write  # noqa: E402

F = torch.nn.functional
nan, inf = float("nan"), float("inf")
T = torch.tensor
TINY = [-1e-30, -1e-8, -1e-5, -0.0, 0.0, 1e-30, 1e-8, 1e-5, 0.3]
TAILS = [-1e30, -3e19, -1e10, -100.0, -20.0, 20.0, 100.0, 1e10, 3e19, 1e30]
SPECIAL = [inf, -inf, nan]
EVERY = TINY + TAILS + SPECIAL
TRIG = [-3.4e38, -1e10, -1e6, -5000.0, -100.0, -20.0, 20.0, 100.0, 5000.0, 1e6, 1e8, 1e10, 1e20,
        1e30, 3.4e38, 0.7853982, 1.5707964, 3.1415927, 4.712389, 6.2831855]
POSITIVE = [1e-30, 1e-8, 1e-5, 0.3, 20.0, 1e10, 1e30, 0.0, inf, nan]
cases = []

for name, op, fn, xs, kw in [
    ("exp", "torch.exp", torch.exp, EVERY, {}),
    # And near 1, where WGSL bounds only the absolute error (lavapipe's was 73% off at 1 - 2^-24).
    ("log", "torch.log", torch.log,
     POSITIVE + [1 - 2**-24, 1 - 2**-23, 0.99999, 0.999, 0.9, 1 + 2**-23, 1.001], {}),
    ("sqrt", "torch.sqrt", torch.sqrt, POSITIVE, {}),
    ("rsqrt", "torch.rsqrt", torch.rsqrt, POSITIVE, {}),
    ("sin", "torch.sin", torch.sin, TINY + TRIG + SPECIAL, {}),
    ("cos", "torch.cos", torch.cos, TINY + TRIG + SPECIAL, {}),
    ("tanh", "torch.tanh", torch.tanh, EVERY, {}),
    # Not at 20: PyTorch's f32 gradient through the output, σ(1 - σ), is 0 there (σ rounds to
    # 1), where float64 keeps 2e-9.
    ("sigmoid", "torch.sigmoid", torch.sigmoid, [x for x in EVERY if x != 20.0], {}),
    ("relu", "torch.nn.functional.relu", F.relu, EVERY, {}),
    # -4 to -8: 1 + erf(x/√2) cancels (a GPU gave -0 at -5.5, where the value is -1.04e-7; even
    # PyTorch's float64 gelu is 1.9% off at -8), so the reference is x·erfc(-x/√2)/2.
    ("gelu", "torch.nn.functional.gelu", lambda x: x * 0.5 * torch.special.erfc(-x * 0.5**0.5),
     EVERY + [-4.0, -5.5, -8.0], {"approximate": "none"}),
    # Not at |x| >= 3e19: x³ overflows f32 (from about 7e12), and PyTorch's f32 gradient is NaN
    # there too.
    ("gelu_tanh", "torch.nn.functional.gelu", lambda x: F.gelu(x, approximate="tanh"),
     [x for x in EVERY if not abs(x) > 1e10], {"approximate": "tanh"}),
    ("silu", "torch.nn.functional.silu", F.silu, EVERY, {}),
    ("elu", "torch.nn.functional.elu", F.elu, EVERY, {"alpha": 1.0}),
    ("leaky_relu", "torch.nn.functional.leaky_relu", lambda x: F.leaky_relu(x, 0.1), EVERY,
     {"negative_slope": 0.1}),
    # -16 to -5 too: log1p's correction with 1 + eˣ between 1 + 1e-7 and 1.01.
    ("softplus", "torch.nn.functional.softplus", F.softplus, EVERY + [-16.0, -10.0, -5.0],
     {"beta": 1.0, "threshold": 20.0}),
    ("reciprocal", "torch.reciprocal", torch.reciprocal, EVERY, {}),
    ("erf", "torch.erf", torch.erf, EVERY, {}),
    ("abs", "torch.abs", torch.abs, EVERY, {}),
    # NaN gives 0 and -0 gives +0 (PyTorch's `(0 < x) - (x < 0)`); WGSL's sign leaves both to the
    # driver.
    ("sign", "torch.sign", torch.sign, EVERY + [1e-45, -1e-45], {}),
    ("floor", "torch.floor", torch.floor, EVERY + [2.5, -2.5, -0.5], {}),
    ("ceil", "torch.ceil", torch.ceil, EVERY + [2.5, -2.5, -0.5], {}),
    ("round", "torch.round", torch.round, EVERY + [2.5, -2.5, 0.5, -0.5, 3.5], {}),
    ("trunc", "torch.trunc", torch.trunc, EVERY + [2.5, -2.5, -0.5], {}),
    ("clamp", "torch.clamp", lambda x: x.clamp(-1.0, 1.0), EVERY, {"min": -1.0, "max": 1.0}),
]:
    # Relative to PyTorch's value; atol below f32's smallest normal, so only subnormal-sized
    # differences pass absolutely.
    c = case(f"extreme_{name}", op, lambda x, fn=fn, **_: fn(x), [T(xs, dtype=torch.float64)], kw,
             rtol=2e-5, atol=1e-38)
    cases.append(c)

# NaN and zeros as truth values and in comparisons: NaN != x is true and NaN is true as a bool
# (SPIR-V's `!=` is ordered, false for NaN), ±0 is false, a subnormal true (a GPU may flush it).
A = T([nan, 1.0, nan, 0.0, -0.0, 1e-45, inf, -inf, 2.0], dtype=torch.float64)
B = T([1.0, nan, nan, -0.0, 0.0, 0.0, inf, 1.0, 2.0], dtype=torch.float64)
for name, op, fn, xs, kw in [
    ("ne_nan", "torch.ne", torch.ne, [A, B], {}),
    ("eq_nan", "torch.eq", torch.eq, [A, B], {}),
    ("ne_scalar_nan", "torch.ne", lambda x, other: torch.ne(x, other), [A], {"other": 1.0}),
    ("bool_nan", "torch.Tensor.bool", torch.Tensor.bool, [A], {}),
    ("logical_and_nan", "torch.logical_and", torch.logical_and, [A, B], {}),
    ("logical_or_nan", "torch.logical_or", torch.logical_or, [A, B], {}),
    ("all_nan", "torch.all", torch.all, [T([nan, 1e-45, -1.0], dtype=torch.float64)], {}),
    ("any_nan", "torch.any", torch.any, [T([0.0, nan, -0.0], dtype=torch.float64)], {}),
    ("any_zeros", "torch.any", torch.any, [T([0.0, -0.0], dtype=torch.float64)], {}),
]:
    cases.append(case(f"truth_{name}", op, lambda *x, fn=fn, **k: fn(*x, **k), xs, kw))

write("extremes", cases, "tools/golden/extremes.py")
