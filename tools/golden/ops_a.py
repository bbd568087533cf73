"""Goldens for tril/triu, sort/argsort/topk, maximum/minimum (NaN, ties), clamp with tensor bounds,
all/any, isnan/isinf/isfinite, nan_to_num and roll (issue #12 item 5, first half).

    /work/venv/bin/python tools/golden/ops_a.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import case, write  # noqa: E402

torch.manual_seed(0)
nan, inf = float("nan"), float("inf")
cases = []


def view_fn(t, views):
    for v in views or []:
        if "permute" in v:
            t = t.permute(*v["permute"])
        elif "slice" in v:
            s = v["slice"]
            d = s["dim"] % t.dim()
            t = t[(slice(None),) * d + (slice(s.get("start", 0), s.get("end"), s.get("step", 1)),)]
    return t


def add(name, op, fn, inputs, kwargs=None, views=None, **kw):
    """A case whose inputs may be views (`views[i]`: the format's view list for input i)."""
    views = views or [None] * len(inputs)

    def f(*xs, **kws):
        return fn(*[view_fn(x, v) for x, v in zip(xs, views)], **kws)

    c = case(name, op, f, inputs, kwargs, **kw)
    for inp, v in zip(c["inputs"], views):
        if v:
            inp["view"] = v
    cases.append(c)


T = torch.tensor
randn = torch.randn

# tril / triu: any batch dims, both signs of diagonal, a transposed input, zero size, int.
add("tril_3x4", "torch.tril", torch.tril, [randn(3, 4)], {"diagonal": 0})
add("tril_batch_dneg1", "torch.tril", torch.tril, [randn(2, 3, 3)], {"diagonal": -1})
add("tril_transposed_d1", "torch.tril", torch.tril, [randn(4, 3)], {"diagonal": 1}, views=[[{"permute": [1, 0]}]])
add("triu_4x3_d1", "torch.triu", torch.triu, [randn(4, 3)], {"diagonal": 1})
add("triu_batch_dneg2", "torch.triu", torch.triu, [randn(2, 2, 4, 3)], {"diagonal": -2})
add("triu_far_diagonal", "torch.triu", torch.triu, [randn(3, 3)], {"diagonal": 5})
add("tril_zero_size", "torch.tril", torch.tril, [randn(0, 3)], {"diagonal": 0})
add("triu_int", "torch.triu", torch.triu, [torch.arange(1, 13).reshape(3, 4)], {"diagonal": 0})
add("tril_nan_masked", "torch.tril", torch.tril, [T([[1.0, nan], [inf, 2.0]])], {"diagonal": 0})

# sort / argsort / topk: stable tie order, NaN largest, padding (lengths not powers of two),
# non-contiguous inputs, 0-d.
ties = T([[2.0, 1.0, nan, 1.0, 2.0, -0.0, 0.0, nan, -inf, 1.0], [3.0, 3.0, 3.0, 1.0, inf, 0.0, -1.0, 3.0, 2.0, 2.0]])
add("sort_last", "torch.sort", torch.sort, [randn(3, 5)], {"dim": -1})
add("sort_desc_dim0", "torch.sort", torch.sort, [randn(4, 3)], {"dim": 0, "descending": True})
add("sort_stable_ties_nan", "torch.sort", torch.sort, [ties], {"dim": 1, "stable": True})
add("sort_stable_ties_nan_desc", "torch.sort", torch.sort, [ties], {"dim": -1, "descending": True, "stable": True})
add("sort_long_rows_ties", "torch.sort", torch.sort, [torch.randint(0, 9, (3, 37)).double()], {"stable": True})
add("sort_permuted", "torch.sort", torch.sort, [randn(5, 4)], {"dim": 1}, views=[[{"permute": [1, 0]}]])
add("sort_0d", "torch.sort", torch.sort, [T(1.5)], {})
add("sort_int_stable", "torch.sort", torch.sort, [T([3, 1, 2, 1, 3, -5])], {"stable": True})
add("sort_int_desc", "torch.sort", torch.sort, [T([[3, 1, 2, 1], [0, 7, 7, -2]])], {"descending": True, "stable": True})
add("sort_bool", "torch.sort", torch.sort, [T([True, False, True, False])], {"stable": True})
add("sort_zero_rows", "torch.sort", torch.sort, [randn(0, 4)], {"dim": 1})
add("sort_f16", "torch.sort", torch.sort, [randn(2, 6)], {"descending": True}, dtype="f16", rtol=1e-3, atol=1e-3)
add("argsort_dim0", "torch.argsort", torch.argsort, [randn(5, 3)], {"dim": 0})
add("argsort_ties_desc", "torch.argsort", torch.argsort, [ties], {"descending": True, "stable": True})
add("topk_last", "torch.topk", torch.topk, [randn(3, 6)], {"k": 3})
add("topk_smallest_dim0", "torch.topk", torch.topk, [randn(5, 2)], {"k": 2, "dim": 0, "largest": False})
add("topk_nan_largest", "torch.topk", torch.topk, [T([1.0, nan, 3.0, -1.0])], {"k": 2})
add("topk_k0", "torch.topk", torch.topk, [randn(2, 3)], {"k": 0})
add("topk_sliced", "torch.topk", torch.topk, [randn(3, 8)], {"k": 2}, views=[[{"slice": {"dim": 1, "start": 1, "step": 2}}]])
add("topk_0d", "torch.topk", torch.topk, [T(2.5)], {"k": 1})
add("topk_0d_k0", "torch.topk", torch.topk, [T(2.5)], {"k": 0})

# maximum / minimum: broadcasting, NaN on either side, ties (gradient halved, PyTorch's rule).
a = T([[nan, 1.0, 2.0], [3.0, -1.0, 0.5]])
b = T([1.0, nan, 2.0])
add("maximum_nan_ties_broadcast", "torch.maximum", torch.maximum, [a, b])
add("minimum_nan_ties_broadcast", "torch.minimum", torch.minimum, [a, b])

# clamp with tensor bounds.
x = T([[-2.0, 0.5, 3.0, nan], [1.0, 2.0, -1.0, 0.0]])
lo = T([[-1.0, 0.5, 0.0, 0.0]])
hi = T([[1.0], [-2.0]])
add("clamp_min_tensor", "torch.clamp_min", torch.clamp_min, [x, lo])
add("clamp_max_tensor", "torch.clamp_max", torch.clamp_max, [x, hi])
add("clamp_tensor_both", "torch.clamp:tensor", lambda x, lo, hi: torch.clamp(x, min=lo, max=hi), [x, lo, hi])
add("clamp_tensor_nan_bound", "torch.clamp:tensor", lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
    [T([1.0, 5.0, 0.5]), T([nan, 2.0, 0.0]), T([2.0, 3.0, nan])])
# Every (x, min, max) over {0, 1, 2, NaN}: ties, min > max and NaN in each place (PyTorch's rule).
grid = torch.tensor([[x, lo, hi] for x in (0.0, 1.0, 2.0, nan) for lo in (0.0, 1.0, 2.0, nan)
                     for hi in (0.0, 1.0, 2.0, nan)]).T.contiguous()
add("clamp_tensor_grid", "torch.clamp:tensor", lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
    [grid[0], grid[1], grid[2]])
add("clamp_tensor_transposed", "torch.clamp:tensor", lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
    [randn(3, 2), T(-0.5), T([0.3, 0.2, 0.4])], views=[[{"permute": [1, 0]}], None, None])

# all / any.
z = T([[1.0, 0.0, nan], [2.0, -1.0, 3.0]])
add("all_whole", "torch.all", torch.all, [z])
add("any_whole_zeros", "torch.any", torch.any, [torch.zeros(2, 3)])
add("all_dim1", "torch.all", torch.all, [z], {"dim": 1})
add("any_dim0_keepdim", "torch.any", torch.any, [T([[0.0, 0.0, nan], [0.0, -0.0, 0.0]])], {"dim": 0, "keepdim": True})
add("all_bool_dim_neg1", "torch.all", torch.all, [T([[True, False], [True, True]])], {"dim": -1})
add("any_int", "torch.any", torch.any, [T([0, 0, 3])])
add("all_empty", "torch.all", torch.all, [torch.zeros(0, 3)])
add("any_empty_dim", "torch.any", torch.any, [torch.zeros(2, 0)], {"dim": 1})
add("all_empty_dim_keepdim", "torch.all", torch.all, [torch.zeros(2, 0)], {"dim": 1, "keepdim": True})

# isnan / isinf / isfinite / nan_to_num.
w = T([[0.0, -0.0, nan, inf], [-inf, 1.5, -2.0, 3e38]])
add("isnan", "torch.isnan", torch.isnan, [w])
add("isinf", "torch.isinf", torch.isinf, [w])
add("isfinite", "torch.isfinite", torch.isfinite, [w])
add("isnan_int", "torch.isnan", torch.isnan, [T([1, 2])])
add("isfinite_f16", "torch.isfinite", torch.isfinite, [T([1.0, 7e4, nan])], dtype="f16")
add("nan_to_num_default", "torch.nan_to_num", lambda x: torch.nan_to_num(x.float()), [w])
add("nan_to_num_values", "torch.nan_to_num", lambda x, **k: torch.nan_to_num(x.float(), **k), [w],
    {"nan": 1.5, "posinf": 100.0, "neginf": -7.0})
add("nan_to_num_posinf_only", "torch.nan_to_num", lambda x, **k: torch.nan_to_num(x.float(), **k), [w],
    {"posinf": 9.0})
add("nan_to_num_f16", "torch.nan_to_num", lambda x: torch.nan_to_num(x.half()), [T([nan, inf, -inf, 2.0])],
    dtype="f16", rtol=1e-3, atol=1e-3)
add("nan_to_num_int", "torch.nan_to_num", torch.nan_to_num, [T([1, -2, 3])])

# roll: several dims, negative shifts, flattened when dims is empty, views.
add("roll_two_dims", "torch.roll", torch.roll, [randn(3, 4)], {"shifts": [1, -2], "dims": [0, 1]})
add("roll_flat", "torch.roll", torch.roll, [randn(2, 3)], {"shifts": 4})
add("roll_negative_big", "torch.roll", torch.roll, [randn(2, 5)], {"shifts": [-7], "dims": [-1]})
add("roll_same_dim_twice", "torch.roll", torch.roll, [randn(4)], {"shifts": [1, 2], "dims": [0, 0]})
add("roll_permuted", "torch.roll", torch.roll, [randn(3, 2, 2)], {"shifts": [1, 1], "dims": [0, 2]},
    views=[[{"permute": [2, 0, 1]}]])
add("roll_zero_size", "torch.roll", torch.roll, [randn(0, 3)], {"shifts": [1], "dims": [1]})
add("roll_0d", "torch.roll", torch.roll, [T(3.0)], {"shifts": 1})

# Views and 0-d operands for the rest.
add("triu_sliced", "torch.triu", torch.triu, [randn(3, 6)], {"diagonal": 0},
    views=[[{"slice": {"dim": 1, "start": 0, "step": 2}}]])
add("argsort_permuted_desc", "torch.argsort", torch.argsort, [randn(3, 4)], {"dim": 1, "descending": True},
    views=[[{"permute": [1, 0]}]])
add("maximum_transposed_0d", "torch.maximum", torch.maximum, [randn(3, 2), T(0.1)], views=[[{"permute": [1, 0]}], None])
add("minimum_0d", "torch.minimum", torch.minimum, [T(nan), T(2.0)])
add("any_dim_permuted", "torch.any", torch.any, [T([[0.0, 1.0], [0.0, 0.0], [0.0, nan]])], {"dim": 1},
    views=[[{"permute": [1, 0]}]])
add("all_0d", "torch.all", torch.all, [T(0.0)])
add("any_0d_dim_keepdim", "torch.any", torch.any, [T(nan)], {"dim": -1, "keepdim": True})
add("isinf_transposed", "torch.isinf", torch.isinf, [w], views=[[{"permute": [1, 0]}]])
add("nan_to_num_transposed", "torch.nan_to_num", lambda x: torch.nan_to_num(x.float()), [w],
    views=[[{"permute": [1, 0]}]])
add("nan_to_num_0d", "torch.nan_to_num", lambda x: torch.nan_to_num(x.float()), [T(-inf)])

write("ops_a", cases, "tools/golden/ops_a.py")
