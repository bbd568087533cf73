"""Goldens for rounding and division remainders: floor, ceil, round (halves to even), trunc, remainder
(the divisor's sign, Python's %) and fmod (the dividend's sign), in f32, f16, int64 and int32, with
negative operands on both sides, broadcasting, views, scalars and special values; and pow with the
scalar exponents PyTorch computes by products, square roots and division.

    python tools/golden/ops_d.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import case, write  # noqa: E402

torch.manual_seed(0)
nan, inf = float("nan"), float("inf")
cases = []
T = torch.tensor
PERM = [{"permute": [1, 0]}]


def r(*shape, scale=4.0):
    return torch.randn(*shape, dtype=torch.float64) * scale


def divisor(*shape):
    """Divisors of either sign, away from zero, not integers (so quotients fall between integers)."""
    m = torch.rand(*shape, dtype=torch.float64) * 2.5 + 0.3
    s = torch.where(torch.rand(*shape) < 0.5, -1.0, 1.0).double()
    return m * s


def add(name, op, fn, inputs, kwargs=None, views=None, **kw):
    """A case whose fn takes the inputs only (kwargs are for the Rust side); `views[i]`: the
    format's view list for input i, which fn must apply itself."""
    c = case(name, op, lambda *a, **_: fn(*a), inputs, kwargs, **kw)
    for inp, v in zip(c["inputs"], views or []):
        if v:
            inp["view"] = v
    cases.append(c)


HALF = dict(dtype="f16", rtol=1e-3, atol=1e-3)

# floor / ceil / round / trunc: halves of both signs (round takes them to even), negative zero,
# large values (integral already), inf and NaN; the gradient is zero.
special = T([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, -3.7, 3.7, 0.49999997, 4194304.5, 1e30, -inf, inf, nan])
for name, fn in [("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round), ("trunc", torch.trunc)]:
    op = f"torch.{name}"
    add(f"{name}_f32", op, fn, [r(3, 5)])
    add(f"{name}_special", op, fn, [special])
    add(f"{name}_transposed", op, lambda x, fn=fn: fn(x.permute(1, 0)), [r(4, 3)], views=[PERM])
    add(f"{name}_f16", op, fn, [T([-2.5, -0.5, 0.5, 1.5, 2.5, -1.25, 3.75, 1000.5])], **HALF)
    add(f"{name}_0d", op, fn, [T(-1.5)])
    add(f"{name}_empty", op, fn, [r(0, 3)])
    # Integers come back unchanged (a copy), in their dtype.
    add(f"{name}_i64", op, fn, [T([[-7, 0, 5], [2 ** 31 - 1, -2 ** 31, 3]])])
    add(f"{name}_i32", op, fn, [T([-7, 0, 5], dtype=torch.int32)])

# remainder / fmod
for name, fn in [("remainder", torch.remainder), ("fmod", torch.fmod)]:
    op = f"torch.{name}"
    # Floats: negative operands on both sides, gradients for both.
    add(f"{name}_f32", op, fn, [r(3, 4, scale=6.0), divisor(3, 4)])
    add(f"{name}_signs", op, fn, [T([-7.5, 7.5, -7.5, 7.5, -6.0, 6.0, 0.25, -0.25]),
                                  T([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, -1.0, 1.0])])
    # Broadcasting both ways, a 0-d divisor, a transposed dividend.
    add(f"{name}_broadcast", op, fn, [r(2, 3, 4, scale=6.0), divisor(4)])
    add(f"{name}_broadcast_both", op, fn, [r(3, 1, scale=6.0), divisor(1, 4)])
    add(f"{name}_0d_divisor", op, fn, [r(5, scale=6.0), T(-1.75)])
    add(f"{name}_transposed", op, lambda a, b, fn=fn: fn(a.permute(1, 0), b), [r(4, 3, scale=6.0), divisor(3, 4)],
        views=[PERM, None])
    add(f"{name}_sliced_divisor", op, lambda a, b, fn=fn: fn(a, b[:, ::2]), [r(2, 3, scale=6.0), divisor(2, 6)],
        views=[None, [{"slice": {"dim": 1, "start": 0, "step": 2}}]])
    # Large quotients, exact remainders (fmod is exact; no rounding of a / b may show).
    add(f"{name}_large_quotient", op, fn, [T([1e7, -1e7, 3e30, -3e30, 16777215.0, 0.3, 0.7]),
                                           T([0.1, 0.1, -7.0, 7.0, -0.5, 0.1, -0.1])], grad=[0])
    # Special values: infinite divisors, zero divisors (NaN), NaN and infinite dividends, zeros.
    add(f"{name}_special", op, fn, [T([5.0, -1.0, 0.0, -0.0, 3.0, nan, inf, -3.0, 7.0, 1.0]),
                                    T([inf, inf, 2.0, 2.0, 0.0, 1.0, 1.0, -inf, -0.0, nan])])
    add(f"{name}_f16", op, fn, [T([-7.5, 7.5, -7.5, 7.5, 5.25, -5.25, 100.0, -0.75]),
                                T([2.0, -2.0, 2.0, -2.0, 0.5, 1.5, -3.0, 0.25])], **HALF)
    add(f"{name}_empty", op, fn, [r(0, 3), divisor(3)])
    # Integers: exact, negative operands on both sides, i32's most negative value by -1 (values
    # within int32: a GPU holds int64 as int32), broadcasting, views.
    ia = T([-7, 7, -7, 7, 0, -1, 1, 13, -13, 6, -6, 2 ** 31 - 1, -2 ** 31, -2 ** 31])
    ib = T([3, 3, -3, -3, 5, 5, -5, 4, 4, -4, -4, -2, -1, 7])
    add(f"{name}_i64", op, fn, [ia, ib])
    add(f"{name}_i32", op, fn, [ia.int(), ib.int()])
    add(f"{name}_i64_broadcast", op, fn, [T([[-9], [9], [4]]), T([2, -2, 3, -3])])
    add(f"{name}_i32_transposed", op, lambda a, b, fn=fn: fn(a.permute(1, 0), b),
        [T([[-9, 5, 7], [9, -5, 8]], dtype=torch.int32), T([4, -4], dtype=torch.int32)], views=[PERM, None])
    # Mixed: int64 with f32 promotes to f32; int32 with int64 to int64.
    add(f"{name}_int_float", op, fn, [T([-7, 7, 5]), T([2.5, -2.5, 0.75])])
    add(f"{name}_i32_i64", op, fn, [T([-7, 7, 5], dtype=torch.int32), T([3, -3, 2])])
    # Scalar divisors: an integer keeps integer tensors integer, a float makes them f32.
    add(f"{name}_scalar_int", op, lambda a, fn=fn: fn(a, -3), [T([-7, 7, 0, 8])], {"other": -3})
    add(f"{name}_scalar_i32", op, lambda a, fn=fn: fn(a, 4), [T([-7, 7, 0, 8], dtype=torch.int32)], {"other": 4})
    add(f"{name}_scalar_float_on_int", op, lambda a, fn=fn: fn(a, 2.5), [T([-7, 7, 0, 8])], {"other": 2.5})
    add(f"{name}_scalar_f32", op, lambda a, fn=fn: fn(a, -1.5), [r(2, 3, scale=6.0)], {"other": -1.5})
    add(f"{name}_scalar_f16", op, lambda a, fn=fn: fn(a, 0.75), [T([-7.5, 7.5, 1.0, -2.0])], {"other": 0.75}, **HALF)

# pow with a scalar exponent: PyTorch's CPU forms for 2, 3 and -2 (products), 0.5 and -0.5 (a square
# root) and -1 (a division), special values included (the root of -inf is NaN, not pow's inf).
pow_special = T([-0.0, 0.0, -inf, inf, nan, -2.5, 1e-10, -1e-10, 3.0, 0.1])
for e in [2.0, 3.0, -2.0, 0.5, -0.5, -1.0]:
    base = r(3, 4).abs() + 0.5 if e in (0.5, -0.5) else r(3, 4)
    add(f"pow_scalar_{e}", "torch.pow", lambda x, e=e: torch.pow(x, e), [base], {"exponent": e})
    add(f"pow_scalar_{e}_special", "torch.pow", lambda x, e=e: torch.pow(x, e), [pow_special], {"exponent": e},
        grad=[])

write("ops_d", cases, "tools/golden/ops_d.py")
