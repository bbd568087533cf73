"""Golden cases for the losses (forward and gradients): tests/golden/losses.json.

Tensor keywords (weight, pos_weight) are passed as extra inputs; `tensor_kwargs` in the case's kwargs maps each
name to its input index.
"""
import torch
import torch.nn.functional as F

from golden import case, write

g = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def rand(*shape, lo=0.0, hi=1.0):
    return lo + (hi - lo) * torch.rand(*shape, generator=g, dtype=torch.float64)


def tk(fn, names, first):
    """fn with inputs from index `first` on passed as the keywords `names`."""
    def run(*xs, tensor_kwargs=None, **kw):
        extra = {n: xs[first + i] for i, n in enumerate(names)}
        return fn(*xs[:first], **extra, **kw)
    return run


cases = []
reds = ["mean", "sum", "none"]

# binary_cross_entropy: probabilities away from 0 and 1 (the clamp is tested in Rust).
for r in reds:
    cases.append(case(f"bce_{r}", "torch.nn.functional.binary_cross_entropy", F.binary_cross_entropy,
                      [rand(4, 3, lo=0.05, hi=0.95), rand(4, 3)], {"reduction": r}))
cases.append(case("bce_weight", "torch.nn.functional.binary_cross_entropy",
                  tk(F.binary_cross_entropy, ["weight"], 2),
                  [rand(4, 3, lo=0.05, hi=0.95), rand(4, 3), rand(3, lo=0.5, hi=2.0)],
                  {"tensor_kwargs": {"weight": 2}}, grad=[0, 1]))
cases.append(case("bce_hard_targets", "torch.nn.functional.binary_cross_entropy", F.binary_cross_entropy,
                  [rand(6, lo=0.05, hi=0.95), torch.tensor([0., 1., 1., 0., 1., 0.], dtype=torch.float64)]))
cases.append(case("bce_with_logits_weight_pos_weight", "torch.nn.functional.binary_cross_entropy_with_logits",
                  tk(F.binary_cross_entropy_with_logits, ["weight", "pos_weight"], 2),
                  [randn(4, 3), rand(4, 3), rand(4, 1, lo=0.5, hi=2.0), rand(3, lo=0.5, hi=3.0)],
                  {"tensor_kwargs": {"weight": 2, "pos_weight": 3}, "reduction": "sum"}, grad=[0, 1]))

# kl_div
for r in reds + ["batchmean"]:
    for lt in [False, True]:
        p = torch.softmax(randn(3, 4), 1)
        cases.append(case(f"kl_div_{r}{'_log_target' if lt else ''}", "torch.nn.functional.kl_div", F.kl_div,
                          [torch.log_softmax(randn(3, 4), 1), p.log() if lt else p],
                          {"reduction": r, "log_target": lt}))

# huber_loss
for r in reds:
    cases.append(case(f"huber_{r}", "torch.nn.functional.huber_loss", F.huber_loss,
                      [randn(4, 5) * 2, randn(4, 5)], {"reduction": r}))
cases.append(case("huber_delta", "torch.nn.functional.huber_loss", F.huber_loss,
                  [randn(4, 5) * 2, randn(4, 5)], {"delta": 0.5}))
cases.append(case("huber_weight", "torch.nn.functional.huber_loss", tk(F.huber_loss, ["weight"], 2),
                  [randn(4, 5) * 2, randn(4, 5), rand(4, 5)], {"delta": 1.5, "tensor_kwargs": {"weight": 2}},
                  grad=[0, 1]))
cases.append(case("smooth_l1_beta", "torch.nn.functional.smooth_l1_loss", F.smooth_l1_loss,
                  [randn(4, 5) * 2, randn(4, 5)], {"beta": 0.5, "reduction": "sum"}))
for name, fn in [("mse", F.mse_loss), ("l1", F.l1_loss)]:
    cases.append(case(f"{name}_weight", f"torch.nn.functional.{name}_loss", tk(fn, ["weight"], 2),
                      [randn(3, 4), randn(3, 4), rand(3, 4)], {"tensor_kwargs": {"weight": 2}}, grad=[0, 1]))

# cosine_similarity
cases.append(case("cosine_similarity", "torch.nn.functional.cosine_similarity", F.cosine_similarity,
                  [randn(4, 5), randn(4, 5)]))
cases.append(case("cosine_similarity_dim_eps_broadcast", "torch.nn.functional.cosine_similarity",
                  F.cosine_similarity, [randn(2, 3, 4), randn(3, 1)], {"dim": -2, "eps": 1e-6}))

# margin_ranking_loss (no ties: the hinge's kink is not compared)
for r in reds:
    cases.append(case(f"margin_ranking_{r}", "torch.nn.functional.margin_ranking_loss", F.margin_ranking_loss,
                      [randn(6), randn(6), torch.tensor([1., -1., 1., 1., -1., -1.], dtype=torch.float64)],
                      {"margin": 0.3, "reduction": r}, grad=[0, 1]))

# cross_entropy / nll_loss class weights (with ignore_index and label smoothing)
tgt = torch.tensor([0, 2, 1, 4, 2, 3])
cases.append(case("cross_entropy_weight", "torch.nn.functional.cross_entropy",
                  tk(F.cross_entropy, ["weight"], 2), [randn(6, 5), tgt, rand(5, lo=0.2, hi=2.0)],
                  {"tensor_kwargs": {"weight": 2}}, grad=[0]))
cases.append(case("cross_entropy_weight_smooth_ignore", "torch.nn.functional.cross_entropy",
                  tk(F.cross_entropy, ["weight"], 2),
                  [randn(6, 5), torch.tensor([0, 2, -100, 4, 2, 3]), rand(5, lo=0.2, hi=2.0)],
                  {"tensor_kwargs": {"weight": 2}, "label_smoothing": 0.2}, grad=[0]))
cases.append(case("cross_entropy_weight_none_4d", "torch.nn.functional.cross_entropy",
                  tk(F.cross_entropy, ["weight"], 2),
                  [randn(2, 3, 2, 2), torch.randint(0, 3, (2, 2, 2), generator=g), rand(3, lo=0.2, hi=2.0)],
                  {"tensor_kwargs": {"weight": 2}, "reduction": "none", "label_smoothing": 0.1}, grad=[0]))
cases.append(case("nll_loss_weight_ignore", "torch.nn.functional.nll_loss", tk(F.nll_loss, ["weight"], 2),
                  [torch.log_softmax(randn(6, 5), 1), torch.tensor([0, 2, 1, 7, 2, 3]), rand(5, lo=0.2, hi=2.0)],
                  {"tensor_kwargs": {"weight": 2}, "ignore_index": 7}, grad=[0]))

write("losses", cases, "tools/golden/losses.py")
