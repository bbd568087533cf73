"""Fit the polynomial coefficients of wgtorch's vectorisable f32 `erf` (src/backend/cpu/vmath.rs).

    erf(x)  = x * P(x^2)                   for |x| < 1
    erfc(x) = exp(-x^2) * Q(x - 2.25)      for 0.5 <= x < 4 (erf = 1 - erfc from 1; 1 past 4, in f32)
    erfc(x) = exp(-x^2) * R(1 / x^2) / x   for 4 <= x < 10.5 (the normal CDF's far left tail)

Least-squares fits in f64 on dense grids, weighted for relative error. The Rust test
`vmath_accuracy` (tests/cpu_kernels.rs) checks the f32 results against f64 references in ulps.
Run: python tools/vmath/fit_erf.py (numpy, and torch for f64 erf and erfcx).
"""
import numpy as np
import torch


def erf(x):
    return torch.special.erf(torch.from_numpy(x)).numpy()


def erfcx(x):
    return torch.special.erfcx(torch.from_numpy(x)).numpy()


def fit(x, y, deg, w):
    v = np.vander(x, deg + 1)
    c, *_ = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)
    return c  # highest power first


def show(name, c):
    print(f"const {name}: [f32; {len(c)}] = [")
    for v in c:
        print(f"    {v:.9e},")
    print("];")


x = np.linspace(1e-6, 1.0, 200001)
p = fit(x * x, erf(x) / x, 6, np.ones_like(x))
print("// |x| < 1: max rel err", np.max(np.abs(np.polyval(p, x * x) * x - erf(x)) / erf(x)))
show("ERF_P", p)

x = np.linspace(0.5, 4.0, 300001)
q = fit(x - 2.25, erfcx(x), 14, 1 / erfcx(x))
print("// 0.5 <= x < 4: max rel err of erfc", np.max(np.abs(np.polyval(q, x - 2.25) - erfcx(x)) / erfcx(x)))
show("ERFC_Q", q)

x = np.linspace(4.0, 10.5, 300001)
r = fit(1 / (x * x), x * erfcx(x), 6, 1 / (x * erfcx(x)))
print("// 4 <= x < 10.5: max rel err of erfc", np.max(np.abs(np.polyval(r, 1 / (x * x)) / x - erfcx(x)) / erfcx(x)))
show("ERFC_R", r)
