#!/usr/bin/env python3
"""The same work as `cargo run --release --example bench`, in PyTorch on the CPU (2 threads) and
numpy: prints one JSON object. Run by the bench example when `import torch` works; PyTorch is a
benchmark-time install (`pip install torch numpy`), never a test dependency."""
import json
import statistics
import time

import numpy as np
import torch

torch.set_num_threads(2)


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


def main():
    out = {"torch": torch.__version__, "numpy": np.__version__, "matmul_gflops": {}, "numpy_matmul_gflops": {}}
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = median_time(lambda: a @ b, 7 if n < 2048 else 3)
        out["matmul_gflops"][str(n)] = 2 * n**3 / t / 1e9
        an, bn = a.numpy(), b.numpy()
        t = median_time(lambda: an @ bn, 7 if n < 2048 else 3)
        out["numpy_matmul_gflops"][str(n)] = 2 * n**3 / t / 1e9
    x = torch.randn(1 << 22)
    y = torch.randn(1 << 22)
    out["add_gbs"] = 3 * 4 * (1 << 22) / median_time(lambda: x + y, 7) / 1e9
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
