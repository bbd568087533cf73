"""Golden cases for the layers' keyword arguments (issue #12 item 7): pooling with dilation,
count_include_pad=False and divisor_override, conv2d with per-dimension stride/padding/dilation and
groups, embedding with padding_idx (no gradient to that row).

    /work/venv/bin/python tools/golden/layers.py   # writes tests/golden/layers.json
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import case, write  # noqa: E402

torch.manual_seed(0)
cases = []


def r(*shape):
    return torch.randn(*shape, dtype=torch.float64)


x = r(1, 2, 6, 6)
cases.append(case("layers max_pool2d dilation", "torch.nn.functional.max_pool2d",
                  lambda t, **k: F.max_pool2d(t, **k), [x],
                  {"kernel_size": 2, "stride": 1, "padding": 1, "dilation": 2}))
x = r(2, 1, 7, 6)
cases.append(case("layers max_pool2d rect dilation", "torch.nn.functional.max_pool2d",
                  lambda t, **k: F.max_pool2d(t, **k), [x],
                  {"kernel_size": [3, 2], "stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]}))
x = r(2, 1, 5, 6)
cases.append(case("layers avg_pool2d exclude pad", "torch.nn.functional.avg_pool2d",
                  lambda t, **k: F.avg_pool2d(t, **k), [x],
                  {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}))
x = r(1, 3, 4, 4)
cases.append(case("layers avg_pool2d divisor_override", "torch.nn.functional.avg_pool2d",
                  lambda t, **k: F.avg_pool2d(t, **k), [x],
                  {"kernel_size": 2, "padding": 1, "divisor_override": 3}))
x, w, b = r(2, 4, 6, 7), r(6, 2, 3, 2), r(6)
cases.append(case("layers conv2d per-dim groups", "torch.nn.functional.conv2d",
                  lambda t, ww, bb, **k: F.conv2d(t, ww, bb, **k), [x, w, b],
                  {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2], "groups": 2}))
idx = torch.tensor([[1, 0, 3], [1, 1, 2]], dtype=torch.int64)
w = r(4, 3)
cases.append(case("layers embedding padding_idx", "torch.nn.functional.embedding",
                  lambda i, ww, **k: F.embedding(i, ww, **k), [idx, w], {"padding_idx": 1}))
cases.append(case("layers embedding negative padding_idx", "torch.nn.functional.embedding",
                  lambda i, ww, **k: F.embedding(i, ww, **k), [idx, w], {"padding_idx": -2}))

write("layers", cases, "tools/golden/layers.py")
