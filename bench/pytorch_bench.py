#!/usr/bin/env python3
"""The same work as `cargo run --release --example bench`, in PyTorch on the CPU and numpy: prints
one JSON object. Run by the bench example (with `$WGTORCH_BENCH_PYTHON`, else `python3`) when
`import torch` works; PyTorch is a benchmark-time install (`pip install torch numpy`), never a test
dependency.

`--threads N` sets PyTorch's thread count (the bench passes rayon's); `--seq` runs only the
sequence-model cases (log_softmax [700, 18328] forward+backward, the word-LM step, the nanoGPT
step), which the bench runs once per round, interleaved with its own. `--ddp [--steps N]` times
the SimpleCNN step (batch 64 per rank, 1 thread per rank) on one process without DDP and on two
processes with DistributedDataParallel over Gloo on localhost (the bench's `--ddp` table).
`--compile-steps [--reps N]` times `bench --compile`'s training steps (the SimpleCNN, the word-LM LSTM,
minGPT's MLP block, a transformer encoder classifier) eager and through `torch.compile`. `--onnx DIR
[--reps N]` times onnxruntime's CPU inference (intra_op_num_threads = `--threads`, one inter-op thread, default
graph optimisations) on the bench's ONNX models in DIR (`NAME.onnx` with `NAME.io.safetensors`, written by
`tools/golden/onnx_models.py --bench-dir DIR`), median of N runs after 3 warm-up runs, and writes its outputs
to `DIR/NAME.ort.safetensors` for the bench to compare with wgtorch's; needs onnxruntime and safetensors."""
import argparse
import json
import math
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F


def median_time(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


class SimpleCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = torch.nn.Linear(4096, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.view(-1, 4096))))


def log_softmax_case(reps):
    torch.manual_seed(0)
    x = torch.randn(700, 18328, requires_grad=True)
    g = torch.randn(700, 18328)

    def run():
        torch.log_softmax(x, 1).backward(g)
        x.grad = None

    return median_time(run, reps) * 1e3


def word_lm_step(reps):
    """pytorch/examples word_language_model, scaled (see `word_lm_step` in examples/bench.rs)."""
    V, E, T, B = 10_000, 200, 35, 20
    torch.manual_seed(0)
    enc = torch.nn.Embedding(V, E)
    torch.nn.init.uniform_(enc.weight, -0.1, 0.1)
    lstm = torch.nn.LSTM(E, E, 2)
    dec_bias = torch.zeros(V, requires_grad=True)
    params = list(enc.parameters()) + list(lstm.parameters()) + [dec_bias]
    opt = torch.optim.SGD(params, lr=20.0)
    tokens = lambda seed: torch.tensor([(i * 7919 + seed) % V for i in range(T * B)])
    x, y = tokens(0).view(T, B), tokens(17)

    def step():
        out, _ = lstm(enc(x))
        logits = F.linear(out.reshape(-1, E), enc.weight, dec_bias)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()
        loss.item()

    return median_time(step, reps) * 1e3


class GptBlock(torch.nn.Module):
    def __init__(self, C):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(C)
        self.attn = torch.nn.Linear(C, 3 * C)
        self.proj = torch.nn.Linear(C, C)
        self.ln2 = torch.nn.LayerNorm(C)
        self.fc = torch.nn.Linear(C, 4 * C)
        self.fc2 = torch.nn.Linear(4 * C, C)


def gpt_step(reps):
    """nanoGPT's CPU configuration (see `gpt_step` in examples/bench.rs): attention written with
    matmul + masked_fill + softmax, as wgtorch's."""
    L, H, C, T, B, V = 4, 4, 128, 64, 12, 65
    torch.manual_seed(0)
    wte, wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(T, C)
    blocks = torch.nn.ModuleList([GptBlock(C) for _ in range(L)])
    ln_f = torch.nn.LayerNorm(C)
    params = list(wte.parameters()) + list(wpe.parameters()) + list(blocks.parameters()) + list(ln_f.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    pos = torch.arange(T)
    tokens = lambda seed: torch.tensor([(i * 31 + seed) % V for i in range(B * T)])
    idx, tgt = tokens(0).view(B, T), tokens(1)
    heads = lambda t: t.reshape(B, T, H, C // H).transpose(1, 2)

    def step():
        x = wte(idx) + wpe(pos)
        for b in blocks:
            q, k, v = map(heads, b.attn(b.ln1(x)).split(C, 2))
            att = (q @ k.transpose(-2, -1) * (1.0 / math.sqrt(C // H))).masked_fill(mask, float("-inf")).softmax(-1)
            x = x + b.proj((att @ v).transpose(1, 2).reshape(B, T, C))
            x = x + b.fc2(F.gelu(b.fc(b.ln2(x))))
        logits = F.linear(ln_f(x), wte.weight)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        loss.item()

    return median_time(step, reps) * 1e3


def _ddp_rank(rank, world, steps, port, q):
    import os

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = SimpleCNN()
    if world > 1:
        model = DDP(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 3, 32, 32), torch.arange(64) % 10
    times = []
    for i in range(steps + 3):
        if i == 3 and world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        q.put(statistics.median(times) * 1e3)
    if world > 1:
        dist.destroy_process_group()


def ddp(steps):
    import torch.multiprocessing as mp

    out = {"torch": torch.__version__}
    for world, key in ((1, "one_rank_step_ms"), (2, "two_rank_step_ms")):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        port = 29500 + (int(time.time() * 1000) % 1000)
        procs = [ctx.Process(target=_ddp_rank, args=(r, world, steps, port, q)) for r in range(world)]
        for p in procs:
            p.start()
        out[key] = q.get(timeout=600)
        for p in procs:
            p.join()
    return out


def seq():
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "log_softmax_ms": log_softmax_case(5),
        "word_lm_step_ms": word_lm_step(5),
        "nanogpt_step_ms": gpt_step(5),
    }


class WordLM(torch.nn.Module):
    """`word_lm_step`'s model as one module: embedding, 2-layer LSTM, decoder tied to the embedding."""

    def __init__(self, V, E):
        super().__init__()
        self.enc = torch.nn.Embedding(V, E)
        torch.nn.init.uniform_(self.enc.weight, -0.1, 0.1)
        self.lstm = torch.nn.LSTM(E, E, 2)
        self.dec_bias = torch.nn.Parameter(torch.zeros(V))

    def forward(self, x):
        out, _ = self.lstm(self.enc(x))
        return F.linear(out.reshape(-1, out.shape[-1]), self.enc.weight, self.dec_bias)


class MinGptMlp(torch.nn.Module):
    """minGPT's MLP block with its residual, NewGELU written as minGPT writes it."""

    def __init__(self):
        super().__init__()
        self.c_fc = torch.nn.Linear(128, 512)
        self.c_proj = torch.nn.Linear(512, 128)

    def forward(self, x):
        h = self.c_fc(x)
        g = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.c_proj(g)


class EncoderClassifier(torch.nn.Module):
    """Two post-norm encoder layers (d 128, 4 heads, feed-forward 512, GELU, no dropout, batch first)
    and a linear head on the mean over the sequence."""

    def __init__(self):
        super().__init__()
        layer = lambda: torch.nn.TransformerEncoderLayer(128, 4, 512, 0.0, "gelu", batch_first=True)
        self.l1, self.l2 = layer(), layer()
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.l2(self.l1(x)).mean(1))


def compile_steps(reps):
    """The training steps of `bench --compile` (examples/bench/compile.rs): each model's forward
    eager and through `torch.compile(model)` (default mode, inductor), the loss, backward and the
    optimizer outside it, alternating step by step on one model; medians of `reps` steps after one
    untimed step each, and the first compiled call's time (tracing and inductor's compile)."""
    torch.manual_seed(0)
    V, E, T, B = 10_000, 200, 35, 20
    tokens = lambda seed: torch.tensor([(i * 7919 + seed) % V for i in range(T * B)])
    cases = {
        "simple_cnn": (SimpleCNN(), torch.randn(64, 3, 32, 32), torch.arange(64) % 10, F.cross_entropy,
                       lambda p: torch.optim.Adam(p, lr=1e-3), None),
        "word_lm": (WordLM(V, E), tokens(0).view(T, B), tokens(17), F.cross_entropy,
                    lambda p: torch.optim.SGD(p, lr=20.0), 0.25),
        "mingpt_mlp": (MinGptMlp(), torch.randn(512, 128), torch.randn(512, 128), F.mse_loss,
                       lambda p: torch.optim.SGD(p, lr=1e-3), None),
        "encoder_classifier": (EncoderClassifier(), torch.randn(32, 64, 128), torch.arange(32) % 10,
                               F.cross_entropy, lambda p: torch.optim.SGD(p, lr=1e-3), None),
    }
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "reps": reps, "models": {}}
    for name, (model, x, target, loss_fn, make_opt, clip) in cases.items():
        params = list(model.parameters())
        opt = make_opt(params)
        compiled = torch.compile(model)

        def step(m):
            loss = loss_fn(m(x), target)
            opt.zero_grad()
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            loss.item()

        t0 = time.perf_counter()
        step(compiled)
        first_s = time.perf_counter() - t0
        ts = {"eager": [], "compiled": []}
        for rep in range(reps + 1):
            for kind, m in (("eager", model), ("compiled", compiled)):
                t0 = time.perf_counter()
                step(m)
                if rep > 0:
                    ts[kind].append(time.perf_counter() - t0)
        out["models"][name] = {"eager_ms": statistics.median(ts["eager"]) * 1e3,
                               "compiled_ms": statistics.median(ts["compiled"]) * 1e3,
                               "compile_first_call_s": first_s}
    return out


ONNX_MODELS = ("resnet18", "transformer_encoder_4l")
ONNX_WARMUP = 3


def onnx_bench(bench_dir, threads, reps):
    """onnxruntime's CPU latency (feeds and results as host numpy arrays, as wgtorch's rows: host inputs to host
    outputs) and its max abs difference from PyTorch's reference outputs, per model."""
    import os

    import onnxruntime as ort
    from safetensors.numpy import load_file, save_file

    out = {"onnxruntime": ort.__version__, "threads": threads, "reps": reps, "warmup": ONNX_WARMUP, "models": {}}
    for name in ONNX_MODELS:
        io = load_file(os.path.join(bench_dir, name + ".io.safetensors"))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        t0 = time.perf_counter()
        sess = ort.InferenceSession(os.path.join(bench_dir, name + ".onnx"), opts,
                                    providers=["CPUExecutionProvider"])
        load_ms = (time.perf_counter() - t0) * 1e3
        feeds = {i.name: io[i.name] for i in sess.get_inputs()}
        names = [o.name for o in sess.get_outputs()]
        for _ in range(ONNX_WARMUP):
            sess.run(names, feeds)
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            results = sess.run(names, feeds)
            ts.append(time.perf_counter() - t0)
        diff = max(float(np.max(np.abs(r.astype(np.float64) - io[n].astype(np.float64))))
                   for n, r in zip(names, results) if n in io)
        save_file({n: np.array(r, order="C") for n, r in zip(names, results)},
                  os.path.join(bench_dir, name + ".ort.safetensors"))
        out["models"][name] = {"ms": statistics.median(ts) * 1e3, "load_ms": load_ms, "pytorch_max_abs_diff": diff}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", action="store_true")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--onnx", metavar="DIR")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--compile-steps", action="store_true")
    args = ap.parse_args()
    if args.onnx:
        print(json.dumps(onnx_bench(args.onnx, args.threads, args.reps)))
        return
    if args.ddp:
        print(json.dumps(ddp(args.steps)))
        return
    torch.set_num_threads(args.threads)
    if args.seq:
        print(json.dumps(seq()))
        return
    if args.compile_steps:
        print(json.dumps(compile_steps(args.reps)))
        return
    out = {"torch": torch.__version__, "numpy": np.__version__, "matmul_gflops": {}, "numpy_matmul_gflops": {}, "matmul_bf16_gflops": {}}
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = median_time(lambda: a @ b, 7 if n < 2048 else 3)
        out["matmul_gflops"][str(n)] = 2 * n**3 / t / 1e9
        an, bn = a.numpy(), b.numpy()
        t = median_time(lambda: an @ bn, 7 if n < 2048 else 3)
        out["numpy_matmul_gflops"][str(n)] = 2 * n**3 / t / 1e9
        ab, bb = a.bfloat16(), b.bfloat16()
        t = median_time(lambda: ab @ bb, 7 if n < 2048 else 3)
        out["matmul_bf16_gflops"][str(n)] = 2 * n**3 / t / 1e9
    x = torch.randn(1 << 22)
    y = torch.randn(1 << 22)
    out["add_gbs"] = 3 * 4 * (1 << 22) / median_time(lambda: x + y, 15) / 1e9
    out["mul_scalar_gbs"] = 2 * 4 * (1 << 22) / median_time(lambda: x * 1.5, 15) / 1e9
    out["relu_gbs"] = 2 * 4 * (1 << 22) / median_time(lambda: torch.relu(x), 15) / 1e9
    m = x.reshape(-1, 1024)
    out["sum_rows_gbs"] = 4 * (1 << 22) / median_time(lambda: m.sum(1), 15) / 1e9
    out["amax_rows_gbs"] = 4 * (1 << 22) / median_time(lambda: m.amax(1), 15) / 1e9
    img = torch.randn(64, 32, 16, 16, requires_grad=True)
    w = torch.randn(64, 32, 3, 3, requires_grad=True)

    def conv():
        torch.nn.functional.conv2d(img, w, padding=1).sum().backward()

    out["conv2d_fwd_bwd_ms"] = median_time(conv, 5) * 1e3
    torch.manual_seed(0)
    model = SimpleCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xb, yb = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()

    out["cnn_step_ms"] = median_time(step, 10) * 1e3
    print(json.dumps(out))


if __name__ == "__main__":
    main()
