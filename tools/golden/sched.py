"""Learning-rate trajectories of ReduceLROnPlateau and CosineAnnealingWarmRestarts:
tests/golden/sched/sched.json (a subfolder, so the op harness in tests/golden.rs does not read it).

Each case: `scheduler` (PyTorch class name), `kwargs`, `base_lrs` (one per param group), `metrics` (for
ReduceLROnPlateau: the value passed to each `step`), and `lrs[i]` (every group's lr used at epoch i), with
`scheduler.step()` called after each epoch's `optimizer.step()`, as ../shared/golden/sched.json.

    python tools/golden/sched.py
"""
import json
import os

import torch
from torch.optim import lr_scheduler as S

from golden import ROOT

EPOCHS = 20
# A loss that falls, stalls, wobbles and falls again.
LOSS = [1.0, 0.8, 0.7, 0.7, 0.7, 0.69995, 0.7, 0.71, 0.6, 0.6, 0.6, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
ACC = [0.1, 0.2, 0.2, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.35, 0.35, 0.35, 0.35, 0.35, 0.35, 0.4, 0.4, 0.4, 0.4, 0.4]

CASES = [
    ("plateau_default", "ReduceLROnPlateau", {"patience": 2}, LOSS),
    ("plateau_abs_cooldown_min_lr", "ReduceLROnPlateau",
     {"patience": 1, "factor": 0.5, "threshold": 0.05, "threshold_mode": "abs", "cooldown": 2, "min_lr": [0.02, 0.0]},
     LOSS),
    ("plateau_max_rel", "ReduceLROnPlateau", {"mode": "max", "patience": 1, "factor": 0.3, "threshold": 0.1}, ACC),
    ("plateau_eps", "ReduceLROnPlateau", {"patience": 0, "factor": 0.5, "eps": 0.02}, LOSS),
    ("warm_restarts", "CosineAnnealingWarmRestarts", {"T_0": 5}, None),
    ("warm_restarts_mult", "CosineAnnealingWarmRestarts", {"T_0": 2, "T_mult": 2, "eta_min": 0.001}, None),
]


def main():
    cases = []
    for name, cls, kw, metrics in CASES:
        base = [0.1, 0.05]
        w = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
        opt = torch.optim.SGD([{"params": [w[0]], "lr": base[0]}, {"params": [w[1]], "lr": base[1]}])
        sched = getattr(S, cls)(opt, **kw)
        lrs = []
        for e in range(EPOCHS):
            lrs.append([gr["lr"] for gr in opt.param_groups])
            opt.step()
            if metrics is None:
                sched.step()
            else:
                sched.step(metrics[e])
        c = {"name": name, "scheduler": cls, "kwargs": kw, "base_lrs": base, "lrs": lrs}
        if metrics is not None:
            c["metrics"] = metrics
        cases.append(c)
    out = os.path.join(ROOT, "tests", "golden", "sched", "sched.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    doc = {"format": "wgtorch-golden/1", "generator": "tools/golden/sched.py", "torch": torch.__version__,
           "cases": cases}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.relpath(out, ROOT)}")


main()
