"""Golden runs for the ported PyTorch programs (examples/mnist.rs, vae.rs, word_language_model.rs,
nanogpt.rs): 10 training steps of each program in PyTorch from a recorded initial state, on the embedded data,
at test-sized configurations. Writes tests/golden/ports/NAME.safetensors (`init.<state_dict key>` and the
random draws the program made, which wgtorch cannot reproduce bit for bit: batch indices, VAE noise) and
NAME.json (config, per-step losses).

    python tools/ports/gen.py --examples PATH/TO/pytorch-examples --nanogpt PATH/TO/nanoGPT

The word-LM and GPT models are imported from those checkouts unchanged (pytorch/examples
word_language_model/model.py, karpathy/nanoGPT model.py); the training loops below are the programs' own loops
(main.py / train.py), with argparse/config values replaced by the test configuration. Dropout is 0 in every
run (the programs' `--dropout` / config option; the MNIST net's two fixed dropouts are set to p=0 in both
engines) because the two engines' random streams differ.
"""
import argparse
import gzip
import importlib.util
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "golden", "ports")
STEPS = 10


def digits():
    rows = gzip.open(os.path.join(ROOT, "data", "digits.csv.gz"), "rt").read().split()
    vals = torch.tensor([[int(v) for v in r.split(",")] for r in rows])
    return vals[:, :64].float() / 16.0, vals[:, 64]


def save(name, config, losses, tensors, extra=None):
    os.makedirs(OUT, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"))
    doc = {"format": "wgtorch-port-golden/1", "generator": "tools/ports/gen.py", "torch": torch.__version__,
           "program": name, "config": config, "losses": losses}
    doc.update(extra or {})
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}")


def init_state(model):
    return {"init." + k: v.clone() for k, v in model.state_dict().items()}


# pytorch/examples mnist/main.py's Net, on the 8x8 digits: 6x6 after conv1, 4x4 after conv2, 2x2 after the
# pool, so fc1 takes 64*2*2 inputs instead of 9216. Everything else as in main.py (Adadelta lr=1.0, StepLR 0.7).
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.0)
        self.dropout2 = nn.Dropout(0.0)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def mnist():
    torch.manual_seed(1)
    x, y = digits()
    x = ((x - 0.1307) / 0.3081).view(-1, 1, 8, 8)
    model = Net()
    init = init_state(model)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    losses, bs = [], 64
    for step in range(STEPS):
        data, target = x[step * bs:(step + 1) * bs], y[step * bs:(step + 1) * bs]
        opt.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 5 == 4:  # an "epoch" of 5 batches, so the StepLR decay is exercised
            sched.step()
    save("mnist", {"batch_size": bs, "lr": 1.0, "gamma": 0.7, "epoch_batches": 5}, losses, init)


# pytorch/examples vae/main.py's VAE, 784 -> 64 inputs (the 8x8 digits in [0, 1]).
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))


def vae():
    torch.manual_seed(1)
    x, _ = digits()
    model = VAE()
    init = init_state(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses, bs, draws = [], 128, {}
    for step in range(STEPS):
        data = x[step * bs:(step + 1) * bs]
        opt.zero_grad()
        mu, logvar = model.encode(data.view(-1, 64))
        eps = torch.randn_like(mu)
        draws[f"eps.{step}"] = eps
        recon = model.decode(model.reparameterize(mu, logvar, eps))
        bce = F.binary_cross_entropy(recon, data.view(-1, 64), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = bce + kld
        loss.backward()
        opt.step()
        losses.append(loss.item())
    init.update(draws)
    save("vae", {"batch_size": bs, "lr": 1e-3}, losses, init)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def corpus_words():
    """word_language_model/data.py's Corpus on one file: words split on whitespace, '<eos>' per line, ids in
    order of first appearance."""
    words, idx = [], {}
    for line in open(os.path.join(ROOT, "data", "tiny_corpus.txt")):
        for w in line.split() + ["<eos>"]:
            idx.setdefault(w, len(idx))
            words.append(idx[w])
    return torch.tensor(words, dtype=torch.int64), len(idx)


def word_lm(examples, rnn_type, tied, lr):
    wlm = load_module(os.path.join(examples, "word_language_model", "model.py"), "wlm_model")
    torch.manual_seed(1111)
    ids, ntokens = corpus_words()
    cfg = {"model": rnn_type, "emsize": 16, "nhid": 16, "nlayers": 2, "lr": lr, "clip": 0.25, "bptt": 8,
           "batch_size": 4, "dropout": 0.0, "tied": tied, "nhead": 2, "ntokens": ntokens}
    nb = ids.size(0) // cfg["batch_size"]
    train_data = ids[:nb * cfg["batch_size"]].view(cfg["batch_size"], -1).t().contiguous()  # batchify
    if rnn_type == "Transformer":
        model = wlm.TransformerModel(ntokens, cfg["emsize"], cfg["nhead"], 32, cfg["nlayers"], cfg["dropout"])
        cfg["nhid"] = 32
        # TransformerModel passes --dropout only to its PositionalEncoding; nn.Transformer's layers keep
        # their default 0.1. Zero those too (dropout modules and the attention's dropout_p).
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
            if isinstance(m, nn.MultiheadAttention):
                m.dropout = 0.0
    else:
        model = wlm.RNNModel(rnn_type, ntokens, cfg["emsize"], cfg["nhid"], cfg["nlayers"], cfg["dropout"], tied)
    init = init_state(model)
    criterion = nn.NLLLoss()
    model.train()
    if rnn_type != "Transformer":
        hidden = model.init_hidden(cfg["batch_size"])
    losses = []
    for step in range(STEPS):  # main.py's train()
        i = step * cfg["bptt"]
        seq_len = min(cfg["bptt"], len(train_data) - 1 - i)
        data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].view(-1)
        model.zero_grad()
        if rnn_type == "Transformer":
            output = model(data).view(-1, ntokens)
        else:
            hidden = tuple(h.detach() for h in hidden) if isinstance(hidden, tuple) else hidden.detach()
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-cfg["lr"])
        losses.append(loss.item())
    save("word_lm_" + rnn_type.lower(), cfg, losses, init)


def nanogpt(path):
    gpt = load_module(os.path.join(path, "model.py"), "nanogpt_model")
    text = open(os.path.join(ROOT, "data", "tiny_corpus.txt")).read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.int64)
    n = int(0.9 * len(data))
    train_data = data[:n]
    cfg = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16, "batch_size": 4, "vocab_size": len(chars),
           "dropout": 0.0, "bias": False, "learning_rate": 1e-3, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99,
           "grad_clip": 1.0, "gradient_accumulation_steps": 2, "warmup_iters": 2, "lr_decay_iters": 8,
           "min_lr": 1e-4}
    torch.manual_seed(1337)
    model = gpt.GPT(gpt.GPTConfig(**{k: cfg[k] for k in
                                     ["n_layer", "n_head", "n_embd", "block_size", "vocab_size", "dropout", "bias"]}))
    init = init_state(model)
    opt = model.configure_optimizers(cfg["weight_decay"], cfg["learning_rate"], (cfg["beta1"], cfg["beta2"]), "cpu")

    def get_lr(it):  # train.py's get_lr
        if it < cfg["warmup_iters"]:
            return cfg["learning_rate"] * (it + 1) / (cfg["warmup_iters"] + 1)
        if it > cfg["lr_decay_iters"]:
            return cfg["min_lr"]
        ratio = (cfg["lr_decay_iters"] - cfg["warmup_iters"])
        coeff = 0.5 * (1.0 + math.cos(math.pi * (it - cfg["warmup_iters"]) / ratio))
        return cfg["min_lr"] + coeff * (cfg["learning_rate"] - cfg["min_lr"])

    draws = {}
    draw = [0]

    def get_batch():
        ix = torch.randint(len(train_data) - cfg["block_size"], (cfg["batch_size"],))
        draws[f"ix.{draw[0]}"] = ix
        draw[0] += 1
        x = torch.stack([train_data[i:i + cfg["block_size"]] for i in ix])
        y = torch.stack([train_data[i + 1:i + 1 + cfg["block_size"]] for i in ix])
        return x, y

    losses, lrs = [], []
    X, Y = get_batch()
    for it in range(STEPS):  # train.py's loop
        lr = get_lr(it)
        lrs.append(lr)
        for g in opt.param_groups:
            g["lr"] = lr
        for _ in range(cfg["gradient_accumulation_steps"]):
            _, loss = model(X, Y)
            loss = loss / cfg["gradient_accumulation_steps"]
            X, Y = get_batch()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item() * cfg["gradient_accumulation_steps"])
    init.update(draws)
    save("nanogpt", cfg, losses, init, {"lrs": lrs, "chars": "".join(chars)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", required=True, help="a checkout of pytorch/examples")
    ap.add_argument("--nanogpt", required=True, help="a checkout of karpathy/nanoGPT")
    a = ap.parse_args()
    torch.set_num_threads(1)
    mnist()
    vae()
    # main.py's default lr 20 for the LSTM; lower for the GRU and the Transformer, which diverge at 20 on
    # this tiny corpus (a diverging run amplifies rounding differences between engines).
    word_lm(a.examples, "LSTM", True, 20.0)
    word_lm(a.examples, "GRU", False, 5.0)
    word_lm(a.examples, "Transformer", False, 2.0)
    nanogpt(a.nanogpt)


if __name__ == "__main__":
    main()
