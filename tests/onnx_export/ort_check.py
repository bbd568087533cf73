"""Runs an ONNX model with onnxruntime (an independent runtime) and compares with wgtorch.

    python3 ort_check.py MODEL.onnx IO.safetensors

IO.safetensors holds the inputs (named like the graph's inputs) and wgtorch's outputs (named like
its outputs). Prints one line per output, `NAME max_abs_diff D`, and exits 1 when any difference
exceeds 1e-5 (absolute, plus 1e-5 relative). Exit 3: onnxruntime is not installed.
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from safetensors.numpy import load_file
except ImportError as e:  # the Rust test decides whether that is a skip or a failure
    print(f"missing: {e}")
    sys.exit(3)

model, io = sys.argv[1], sys.argv[2]
tensors = load_file(io)
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
feeds = {i.name: tensors[i.name] for i in sess.get_inputs()}
names = [o.name for o in sess.get_outputs()]
bad = False
for name, got in zip(names, sess.run(names, feeds)):
    want = tensors[name]
    if got.shape != want.shape:
        print(f"{name} shape {got.shape} vs {want.shape}")
        bad = True
        continue
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
    tol = 1e-5 + 1e-5 * float(np.max(np.abs(want))) if want.size else 1e-5
    print(f"{name} max_abs_diff {diff:.3e}")
    bad |= not (diff <= tol)
sys.exit(1 if bad else 0)
