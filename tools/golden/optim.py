"""Optimizer trajectories for the optimizers and options beyond ../shared/golden/optim.json:
tests/golden/optim/optim.json (a subfolder, so the op harness in tests/golden.rs does not read it).

Each case (as the shared file's): `optimizer` (PyTorch class name), `kwargs` (PyTorch names), initial `params`,
then for each step the `grads` set on the params and the `expected` params after `step()`. Computed in float32,
as a float32 model trains.

    python tools/golden/optim.py
"""
import json
import os

import torch

from golden import ROOT, enc

CASES = [
    ("adadelta", "Adadelta", {}),
    ("adadelta_wd_maximize", "Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1, "maximize": True}),
    ("adagrad", "Adagrad", {"lr": 0.1}),
    ("adagrad_decay_init", "Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1,
                                       "initial_accumulator_value": 0.5, "eps": 1e-6}),
    ("adamax", "Adamax", {}),
    ("adamax_wd", "Adamax", {"lr": 0.01, "betas": [0.8, 0.9], "weight_decay": 0.1}),
    ("nadam", "NAdam", {"lr": 0.01}),
    ("nadam_wd", "NAdam", {"lr": 0.01, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("nadam_decoupled", "NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("radam", "RAdam", {"lr": 0.01}),
    ("radam_wd", "RAdam", {"lr": 0.01, "weight_decay": 0.1, "betas": [0.9, 0.9]}),
    ("radam_decoupled_maximize", "RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
                                           "betas": [0.9, 0.9], "maximize": True}),
    ("sgd_nesterov", "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("sgd_dampening", "SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5}),
    ("sgd_maximize", "SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1, "maximize": True}),
    ("adam_maximize", "Adam", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
    ("adam_amsgrad_maximize", "Adam", {"lr": 0.01, "amsgrad": True, "maximize": True}),
    ("adamw_maximize", "AdamW", {"lr": 0.01, "maximize": True}),
    ("rmsprop_maximize", "RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.1,
                                     "maximize": True}),
]
STEPS = 7  # RAdam rectifies from step 6 on


def main():
    g = torch.Generator().manual_seed(0)
    cases = []
    for name, cls, kw in CASES:
        params = [torch.randn(2, 3, generator=g), torch.randn(3, generator=g)]
        leaves = [p.clone().requires_grad_(True) for p in params]
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
        opt = getattr(torch.optim, cls)(leaves, **kwargs)
        grads, expected = [], []
        for _ in range(STEPS):
            gs = [torch.randn(p.shape, generator=g) for p in params]
            for p, gr in zip(leaves, gs):
                p.grad = gr.clone()
            opt.step()
            grads.append([enc(x) for x in gs])
            expected.append([enc(p) for p in leaves])
        cases.append({"name": name, "optimizer": cls, "kwargs": kw, "params": [enc(p) for p in params],
                      "grads": grads, "expected": expected, "rtol": 1e-5, "atol": 1e-6})
    out = os.path.join(ROOT, "tests", "golden", "optim", "optim.json")
    doc = {"format": "wgtorch-golden/1", "generator": "tools/golden/optim.py", "torch": torch.__version__,
           "cases": cases}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.relpath(out, ROOT)}")


LBFGS_CASES = [
    ("lbfgs", {"max_iter": 5}),
    ("lbfgs_lr_history", {"lr": 0.5, "max_iter": 4, "history_size": 2}),
    ("lbfgs_strong_wolfe", {"max_iter": 5, "line_search_fn": "strong_wolfe"}),
    ("lbfgs_strong_wolfe_history_maximize", {"max_iter": 6, "history_size": 3, "line_search_fn": "strong_wolfe",
                                             "maximize": True}),
]


def lbfgs():
    """LBFGS on a fixed problem: loss = mean((x @ w + b - y)^2) + 0.1 sum(w^4) (negated under maximize), three
    `step(closure)` calls; `losses` are the closure's first loss per step, `expected` the params after it.
    Written to tests/golden/optim/lbfgs.json."""
    g = torch.Generator().manual_seed(1)
    cases = []
    for name, kw in LBFGS_CASES:
        x, y = torch.randn(8, 3, generator=g), torch.randn(8, generator=g)
        params = [torch.randn(3, generator=g), torch.randn(1, generator=g)]
        w, b = [p.clone().requires_grad_(True) for p in params]
        opt = torch.optim.LBFGS([w, b], **kw)
        sign = -1.0 if kw.get("maximize") else 1.0

        def closure():
            opt.zero_grad()
            loss = sign * (((x @ w + b - y) ** 2).mean() + 0.1 * (w ** 4).sum())
            loss.backward()
            return loss

        losses, expected = [], []
        for _ in range(3):
            losses.append(float(opt.step(closure).detach()))
            expected.append([enc(w), enc(b)])
        cases.append({"name": name, "optimizer": "LBFGS", "kwargs": kw, "x": enc(x), "y": enc(y),
                      "params": [enc(p) for p in params], "losses": losses, "expected": expected,
                      "rtol": 1e-4, "atol": 1e-5})
    out = os.path.join(ROOT, "tests", "golden", "optim", "lbfgs.json")
    doc = {"format": "wgtorch-golden/1", "generator": "tools/golden/optim.py", "torch": torch.__version__,
           "cases": cases}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.relpath(out, ROOT)}")


main()
lbfgs()
