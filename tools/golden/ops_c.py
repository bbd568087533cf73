"""Goldens for the PyTorch idioms the migration guide found missing: select, unbind, movedim, the
scalar comparisons ne/le/ge, and linspace. Run: /work/venv/bin/python tools/golden/ops_c.py"""
import torch

from golden import case, write

torch.manual_seed(0)
cases = []
L = torch.tensor


def r(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def mk(name, op, fn, inputs, kwargs=None, **kw):
    """`case` with an fn that takes the inputs only (the kwargs are for the Rust side)."""
    return case(name, op, lambda *a, **_: fn(*a), inputs, kwargs, **kw)


# select: positive and negative index, a non-contiguous input, a 1-d input (0-d result)
cases.append(mk("select_dim0", "torch.select", lambda x: x.select(0, 1), [r(3, 4)], {"dim": 0, "index": 1}))
cases.append(mk("select_neg", "torch.select", lambda x: x.select(-1, -2), [r(2, 3, 4)], {"dim": -1, "index": -2}))
c = mk("select_noncontig", "torch.select", lambda x: x.permute(1, 0).select(1, 2), [r(4, 3)], {"dim": 1, "index": 2})
c["inputs"][0]["view"] = [{"permute": [1, 0]}]
cases.append(c)
cases.append(mk("select_1d", "torch.select", lambda x: x.select(0, 4), [r(5)], {"dim": 0, "index": 4}))
cases.append(mk("select_int", "torch.select", lambda x: x.select(1, 0), [L([[1, 2], [3, 4]])], {"dim": 1, "index": 0}))

# unbind: several outputs, each with its own upstream gradient
cases.append(mk("unbind_dim0", "torch.unbind", lambda x: torch.unbind(x, 0), [r(3, 2)], {"dim": 0}))
cases.append(mk("unbind_dim1", "torch.unbind", lambda x: torch.unbind(x, 1), [r(2, 3, 2)], {"dim": 1}))

# movedim: one dim, lists, negative dims
cases.append(mk("movedim_one", "torch.movedim", lambda x: torch.movedim(x, 0, -1), [r(2, 3, 4)],
                {"source": [0], "destination": [-1]}))
cases.append(mk("movedim_list", "torch.movedim", lambda x: torch.movedim(x, (0, 1), (2, 0)), [r(2, 3, 4)],
                {"source": [0, 1], "destination": [2, 0]}))
cases.append(mk("movedim_4d", "torch.movedim", lambda x: torch.movedim(x, (3, 0), (1, 2)), [r(2, 1, 3, 2)],
                {"source": [3, 0], "destination": [1, 2]}))

# comparisons with a scalar (bool outputs), float and int inputs, a non-integer scalar against ints
x = r(3, 4)
x[0, 0] = 0.5
for name, fn in [("ne", torch.ne), ("le", torch.le), ("ge", torch.ge)]:
    cases.append(mk(f"{name}_scalar", f"torch.{name}", lambda t, fn=fn: fn(t, 0.5), [x], {"other": 0.5}))
    cases.append(mk(f"{name}_scalar_int", f"torch.{name}", lambda t, fn=fn: fn(t, 1.5), [L([[0, 1], [2, 3]])],
                    {"other": 1.5}))

# linspace (the input only says which device to build on)
for name, (start, end, steps, dt) in {
    "linspace_f32": (-1.0, 1.0, 7, torch.float32),
    "linspace_even": (0.0, 1.0, 10, torch.float32),
    "linspace_desc": (5.0, -3.0, 6, torch.float32),
    "linspace_one": (3.0, 9.0, 1, torch.float32),
    "linspace_empty": (0.0, 1.0, 0, torch.float32),
    "linspace_int": (0.0, 10.0, 4, torch.int64),
    "linspace_int_neg": (-7.0, 2.0, 5, torch.int64),
}.items():
    dname = {torch.float32: "f32", torch.int64: "i64"}[dt]
    cases.append(mk(name, "torch.linspace", lambda _, a=start, b=end, n=steps, d=dt: torch.linspace(a, b, n, dtype=d),
                    [r(1)], {"start": start, "end": end, "steps": steps, "dtype": dname}, grad=[]))

write("ops_c", cases, "tools/golden/ops_c.py")
