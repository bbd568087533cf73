"""Goldens for the index writes and shape helpers of issue #12 item 5 (second half): index_add,
index_put, masked_scatter, meshgrid, view_as, new_full. Run: /work/venv/bin/python tools/golden/ops_b.py"""
import torch

from golden import case, write

torch.manual_seed(0)
cases = []
L = torch.tensor
PERM = [{"permute": [1, 0]}]


def mk(name, op, fn, inputs, kwargs=None, **kw):
    """`case` with an fn that takes the inputs only (the kwargs are for the Rust side)."""
    return case(name, op, lambda *a, **_: fn(*a), inputs, kwargs, **kw)


def r(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def viewed(c, i, view):
    """Mark input i of case c as given through `view` (the generator's fn applies the same view)."""
    c["inputs"][i]["view"] = view
    return c


def index_add(x, i, s, dim, alpha=1):
    return torch.index_add(x, dim, i, s, alpha=alpha)


# index_add
cases.append(mk("index_add_dim0", "torch.index_add", lambda x, i, s: index_add(x, i, s, 0),
                  [r(4, 3), L([0, 2, 0, 3, 2]), r(5, 3)], {"dim": 0}))
cases.append(mk("index_add_dim1_alpha", "torch.index_add", lambda x, i, s: index_add(x, i, s, -1, 2.5),
                  [r(2, 4, 3), L([2, 0]), r(2, 4, 2)], {"dim": -1, "alpha": 2.5}))
cases.append(viewed(mk("index_add_noncontig", "torch.index_add", lambda x, i, s: index_add(x.permute(1, 0), i, s, 1),
                         [r(3, 4), L([1, 1, 0]), r(4, 3)], {"dim": 1}), 0, PERM))
cases.append(mk("index_add_0d", "torch.index_add", lambda x, i, s: index_add(x, i, s, 0),
                  [r(()), L(0), r(())], {"dim": 0}))
cases.append(mk("index_add_empty_index", "torch.index_add", lambda x, i, s: index_add(x, i, s, 0),
                  [r(3, 2), torch.zeros(0, dtype=torch.long), r(0, 2)], {"dim": 0}))
cases.append(mk("index_add_int", "torch.index_add", lambda x, i, s: index_add(x, i, s, 0, 3),
                  [L([[1, 2], [3, 4]]), L([1, 1]), L([[1, 1], [2, 2]])], {"dim": 0, "alpha": 3}))


# index_put: inputs are [self, values, index tensors...]; kwargs "indices" says where each goes
# ("t": the next index input, null: a full slice).
def index_put(pattern, accumulate):
    def f(x, v, *idx):
        it = iter(idx)
        ind = [next(it) if p == "t" else None for p in pattern]
        return torch.ops.aten.index_put(x, ind, v, accumulate)
    return f


def put_case(name, x, v, idx, pattern, accumulate=False, view=None, fn_view=None):
    fn = index_put(pattern, accumulate)
    g = fn if fn_view is None else (lambda x, v, *i: fn(fn_view(x), v, *i))
    c = mk(name, "torch.index_put", g, [x, v] + idx, {"indices": pattern, "accumulate": accumulate})
    return viewed(c, 0, view) if view else c


cases.append(put_case("index_put_rows", r(4, 3), r(2, 3), [L([3, 0])], ["t"]))
cases.append(put_case("index_put_rows_broadcast_value", r(4, 3), r(3), [L([1, -1])], ["t"]))
cases.append(put_case("index_put_points", r(3, 4), r(3), [L([0, 2, 1]), L([3, -4, 1])], ["t", "t"]))
cases.append(put_case("index_put_broadcast_indices", r(3, 4), r(2, 3),
                      [L([[0], [2]]), L([1, 2, 3])], ["t", "t"]))
cases.append(put_case("index_put_slice_then_index", r(2, 5, 3), r(2, 2, 3), [L([4, 1])], [None, "t"]))
cases.append(put_case("index_put_nonadjacent", r(3, 2, 4), r(2, 2), [L([0, 2]), L([3, 1])], ["t", None, "t"]))
cases.append(put_case("index_put_mask", r(3, 4), r(5),
                      [L([[True, False, True, False], [False, False, False, True], [True, True, False, False]])], ["t"]))
cases.append(put_case("index_put_mask_rows", r(4, 2), r(1), [L([True, False, True, True])], ["t"]))
cases.append(put_case("index_put_accumulate_dups", r(4, 3), r(5, 3), [L([1, 3, 1, 1, 0])], ["t"], accumulate=True))
cases.append(put_case("index_put_accumulate_points", r(3, 3), r(4), [L([0, 0, 2, 0]), L([1, 1, 2, 1])],
                      ["t", "t"], accumulate=True))
cases.append(put_case("index_put_noncontig", r(4, 3), r(2, 4), [L([2, 0])], ["t"], view=PERM,
                      fn_view=lambda x: x.permute(1, 0)))
cases.append(put_case("index_put_empty_index", r(3, 2), r(0, 2), [torch.zeros(0, dtype=torch.long)], ["t"]))
cases.append(put_case("index_put_int", L([[1, 2], [3, 4]]), L([9, 8]), [L([1, 0])], ["t"]))

# masked_scatter
MASK = L([[True, False, True], [False, True, True]])
cases.append(mk("masked_scatter_basic", "torch.Tensor.masked_scatter", lambda x, m, s: x.masked_scatter(m, s),
                  [r(2, 3), MASK, r(6)]))
cases.append(mk("masked_scatter_source_2d", "torch.Tensor.masked_scatter", lambda x, m, s: x.masked_scatter(m, s),
                  [r(2, 3), MASK, r(2, 3)]))
cases.append(mk("masked_scatter_broadcast_mask", "torch.Tensor.masked_scatter",
                  lambda x, m, s: x.masked_scatter(m, s), [r(2, 3), L([False, True, True]), r(5)]))
cases.append(mk("masked_scatter_broadcast_self", "torch.Tensor.masked_scatter",
                  lambda x, m, s: x.masked_scatter(m, s), [r(3), MASK, r(4)]))
cases.append(viewed(mk("masked_scatter_noncontig", "torch.Tensor.masked_scatter",
                         lambda x, m, s: x.permute(1, 0).masked_scatter(m, s), [r(3, 2), MASK, r(4)]), 0, PERM))
cases.append(mk("masked_scatter_none", "torch.Tensor.masked_scatter", lambda x, m, s: x.masked_scatter(m, s),
                  [r(2, 2), torch.zeros(2, 2, dtype=torch.bool), r(0)]))

# meshgrid: kwargs "indexing"
for ix in ["ij", "xy"]:
    cases.append(mk(f"meshgrid_2_{ix}", "torch.meshgrid", lambda a, b, ix=ix: torch.meshgrid(a, b, indexing=ix),
                      [r(3), r(2)], {"indexing": ix}))
    cases.append(mk(f"meshgrid_3_{ix}", "torch.meshgrid",
                      lambda a, b, c, ix=ix: torch.meshgrid(a, b, c, indexing=ix), [r(2), r(3), r(4)], {"indexing": ix}))
cases.append(mk("meshgrid_0d_xy", "torch.meshgrid", lambda a, b: torch.meshgrid(a, b, indexing="xy"),
                  [r(()), r(3)], {"indexing": "xy"}))
cases.append(mk("meshgrid_1", "torch.meshgrid", lambda a: torch.meshgrid(a, indexing="ij"), [r(4)], {"indexing": "ij"}))

# view_as (inputs: self, other; other's values unused) and new_full
cases.append(mk("view_as", "torch.Tensor.view_as", lambda x, o: x.view_as(o), [r(2, 6), r(3, 4)], grad=[0]))
cases.append(mk("new_full_int", "torch.Tensor.new_full", lambda x: x.new_full((2, 3), 7), [L([1, 2])],
                  {"size": [2, 3], "fill_value": 7}))
cases.append(mk("new_zeros", "torch.Tensor.new_zeros", lambda x: x.new_zeros((3,)), [r(2)], {"size": [3]}))
cases.append(mk("new_ones", "torch.Tensor.new_ones", lambda x: x.new_ones((2, 0)), [r(2)], {"size": [2, 0]}))

write("ops_b", cases, "tools/golden/ops_b.py")
