#!/usr/bin/env python3
"""onnxruntime's own per-node profile of one model, to set next to wgtorch's
(`cargo run --release --example bench -- --onnx-case NAME --profile`): each node's median kernel
time over the runs after the first three, slowest first, with the total.

    python3 bench/ort_profile.py target/onnx-bench/resnet18.onnx [--threads 2] [--runs 23]

The inputs are random with the graph's shapes (dynamic dimensions as 1). onnxruntime's default
graph optimisations apply, so fused nodes appear under the name of the node they end in (a Conv
followed by its Relu is one `Conv` named after the Relu's output). Needs onnxruntime and numpy;
a benchmark-time tool, never a test dependency."""
import argparse
import collections
import json
import os
import statistics

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=23)
    a = ap.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads
    opts.inter_op_num_threads = 1
    opts.enable_profiling = True
    sess = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
        for i in sess.get_inputs()
    }
    for _ in range(a.runs):
        sess.run(None, feeds)
    trace = sess.end_profiling()
    try:
        with open(trace) as f:
            events = json.load(f)
    finally:
        os.remove(trace)
    times = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[(e["name"][: -len("_kernel_time")], e["args"].get("op_name"))].append(e["dur"])
    rows = sorted(
        ((statistics.median(v[3:] or v) / 1000, name, op) for (name, op), v in times.items()),
        reverse=True,
    )
    print(f"onnxruntime {ort.__version__}, {a.threads} threads, median of {max(a.runs - 3, 1)} runs")
    for ms, name, op in rows:
        print(f"{ms:8.3f} ms  {op:<20} {name}")
    print(f"{sum(r[0] for r in rows):8.3f} ms  total of the nodes")


if __name__ == "__main__":
    main()
