// The browser benchmark: in one page, on one adapter, wgtorch next to the libraries a web
// developer would pick instead: TensorFlow.js 4.22 for training (WebGPU, wasm and cpu backends)
// and onnxruntime-web 1.30 for inference (WebGPU and wasm execution providers). Every engine
// runs the same work; times are medians of the timed repetitions after a first, untimed one
// (whose time is reported on its own). Results are shown in tables and left in
// window.benchResults for the driver (web/test/bench.mjs).
//
// Query: steps=N timed training steps per engine (default 10), budget=S seconds of timed steps
// per engine at most (default 60; at least 2 steps run), runs=N inference runs (default 30),
// models=a,b the ONNX models (default: all of golden/onnx), skip=train,infer,gemm (sections),
// tfjs,ort (peers) or wgtorch-gpu,wgtorch-cpu, extra=a,b more models served under
// ../onnx-extra/ (the driver's --onnx-dir).
import init, { Trainer, OnnxSession, CpuMatmul, cpu_gemm_kernel } from "../pkg/wgtorch_web.js";

const params = new URLSearchParams(location.search);
const steps = Number(params.get("steps") || 10);
const budgetMs = 1000 * Number(params.get("budget") || 60);
const runs = Number(params.get("runs") || 30);
const skip = new Set((params.get("skip") || "").split(",").filter(Boolean));
const results = { done: false, error: null, env: {}, train: [], infer: [], gemm: [], failures: [] };
window.benchResults = results;
const $ = (id) => document.getElementById(id);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const say = (s) => { $("status").textContent = s; };

// A first call, then timed calls until `count` ran or the budget is spent (at least 2).
// Each timed sample repeats `fn` until it takes ≥ 20 ms, so that fast calls are not
// swallowed by the page's coarse clock; a sample's time is per call.
async function timeIt(fn, count) {
  let t = performance.now();
  await fn();
  const first = performance.now() - t;
  const samples = [];
  const start = performance.now();
  let reps = 1;
  while (samples.length < Math.max(2, count) && (samples.length < 2 || performance.now() - start < budgetMs)) {
    t = performance.now();
    for (let i = 0; i < reps; i++) await fn();
    const dt = performance.now() - t;
    if (dt < 20 && reps < 1 << 16) { reps *= 2; continue; }
    samples.push(dt / reps);
  }
  return { first_ms: first, median_ms: median(samples), min_ms: Math.min(...samples), samples: samples.length };
}

// ---- training -------------------------------------------------------------------------------

async function wgtorchTrain(gpu) {
  const row = { engine: "wgtorch", backend: gpu ? "WebGPU" : "wasm CPU" };
  try {
    const trainer = await Trainer.create(gpu, 64, 0);
    if (gpu && !trainer.on_gpu()) throw new Error(`no WebGPU: ${trainer.backend()}`);
    row.device = trainer.backend();
    if (gpu) row.gemm_tile = trainer.gemm_tile();
    Object.assign(row, await timeIt(() => trainer.step(), steps));
    if (gpu) {
      const p = JSON.parse(await trainer.profile_steps(2));
      Object.assign(row, { dispatches_per_step: p.dispatches_per_step, submits_per_step: p.submits_per_step, gpu_busy_ms_per_step: p.gpu_timed ? p.gpu_busy_ms_per_step : null, top_kernels: p.kernels.slice(0, 6) });
    }
    trainer.free();
  } catch (e) {
    row.error = String(e);
    results.failures.push(`wgtorch training on ${row.backend}: ${e}`);
  }
  return row;
}

// The SimpleCNN in TF.js's layers API (NHWC), trained with tf.train.adam on fixed random data.
async function tfjsTrain(backend) {
  const row = { engine: "TF.js 4.22", backend };
  try {
    if (!(await tf.setBackend(backend))) throw new Error(`backend '${backend}' failed to start`);
    await tf.ready();
    const model = tf.sequential({ layers: [
      tf.layers.conv2d({ inputShape: [32, 32, 3], filters: 32, kernelSize: 3, padding: "same", activation: "relu" }),
      tf.layers.maxPooling2d({ poolSize: 2 }),
      tf.layers.conv2d({ filters: 64, kernelSize: 3, padding: "same", activation: "relu" }),
      tf.layers.maxPooling2d({ poolSize: 2 }),
      tf.layers.flatten(),
      tf.layers.dense({ units: 256, activation: "relu" }),
      tf.layers.dense({ units: 10 }),
    ] });
    const opt = tf.train.adam(2e-3);
    const x = tf.randomNormal([64, 32, 32, 3]);
    const y = tf.oneHot(tf.randomUniform([64], 0, 10, "int32"), 10);
    const step = async () => {
      const loss = opt.minimize(() => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true })), true);
      const v = (await loss.data())[0];
      loss.dispose();
      if (!Number.isFinite(v)) throw new Error(`loss ${v}`);
    };
    Object.assign(row, await timeIt(step, steps));
    tf.dispose([x, y]);
    model.dispose();
    opt.dispose();
  } catch (e) {
    row.error = String(e.message || e);  // the peer's limitation, reported, not a failure of this bench
  }
  return row;
}

// ---- inference ------------------------------------------------------------------------------

// The tensors of a safetensors file: { name: { dtype, shape, data (typed array) } }.
function safetensors(buf) {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const n = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(buf.subarray(8, 8 + n)));
  const out = {};
  const kinds = { F32: Float32Array, I64: BigInt64Array, I32: Int32Array, F64: Float64Array, BOOL: Uint8Array, U8: Uint8Array };
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [a, b] = t.data_offsets;
    const bytes = buf.slice(8 + n + a, 8 + n + b);
    out[name] = { dtype: t.dtype, shape: t.shape, data: new kinds[t.dtype](bytes.buffer, bytes.byteOffset, (b - a) / kinds[t.dtype].BYTES_PER_ELEMENT) };
  }
  return out;
}
const ortType = { F32: "float32", I64: "int64", I32: "int32", F64: "float64", BOOL: "bool", U8: "uint8" };

// |a − b| at most, NaN matching NaN; `Infinity` when the lengths differ.
function maxDiff(a, b) {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const x = Number(a[i]), y = Number(b[i]);
    if (x === y || (Number.isNaN(x) && Number.isNaN(y))) continue;
    const d = Math.abs(x - y);
    m = Math.max(m, Number.isNaN(d) ? Infinity : d);
  }
  return m;
}
// onnx_run's rule: |ours − ref| ≤ 1e-4 + 1e-4·|ref| everywhere.
function close(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = Number(a[i]), y = Number(b[i]);
    if (x === y || (Number.isNaN(x) && Number.isNaN(y))) continue;
    if (!(Math.abs(x - y) <= 1e-4 + 1e-4 * Math.abs(y))) return false;
  }
  return true;
}

async function infer(name, model, io, gpu) {
  const tensors = safetensors(io);
  const rows = [];
  // wgtorch
  const ours = { model: name, engine: "wgtorch", backend: gpu ? "WebGPU" : "wasm CPU" };
  let ourOut = null, names = null;
  try {
    let t = performance.now();
    const s = await OnnxSession.create(model, io, gpu);
    ours.load_ms = performance.now() - t;
    if (gpu && s.device() === "cpu") throw new Error("no WebGPU");
    names = s.output_names();
    Object.assign(ours, await timeIt(async () => { ourOut = await s.run(); }, runs));
    ours.ok = names.every((n, i) => tensors[n] === undefined || close(ourOut[i], tensors[n].data));
    ours.max_abs_diff_vs_pytorch = Math.max(...names.map((n, i) => (tensors[n] ? maxDiff(ourOut[i], tensors[n].data) : 0)));
    if (!ours.ok) results.failures.push(`wgtorch ${name} on ${ours.backend}: outputs differ from PyTorch's by ${ours.max_abs_diff_vs_pytorch}`);
    s.free();
  } catch (e) {
    ours.error = String(e);
    results.failures.push(`wgtorch ${name} on ${ours.backend}: ${e}`);
  }
  rows.push(ours);
  if (skip.has("ort")) return rows;
  // onnxruntime-web
  const ep = gpu ? "webgpu" : "wasm";
  const peer = { model: name, engine: "onnxruntime-web 1.30", backend: ep };
  try {
    let t = performance.now();
    const session = await ort.InferenceSession.create(model, { executionProviders: [ep], logSeverityLevel: 3 });
    peer.load_ms = performance.now() - t;
    const feeds = {};
    for (const n of session.inputNames) {
      const x = tensors[n];
      if (!x) throw new Error(`no input ${n} in the io file`);
      feeds[n] = new ort.Tensor(ortType[x.dtype], x.data, x.shape);
    }
    let out = null;
    Object.assign(peer, await timeIt(async () => { out = await session.run(feeds); }, runs));
    const outNames = session.outputNames;
    peer.ok = outNames.every((n) => tensors[n] === undefined || close(out[n].data, tensors[n].data));
    peer.max_abs_diff_vs_pytorch = Math.max(...outNames.map((n) => (tensors[n] ? maxDiff(out[n].data, tensors[n].data) : 0)));
    if (ourOut && names) ours.max_abs_diff_vs_peer = Math.max(...names.map((n, i) => (out[n] ? maxDiff(ourOut[i], out[n].data) : 0)));
    await session.release();
  } catch (e) {
    peer.error = String(e.message || e);
  }
  rows.push(peer);
  return rows;
}

// ---- the CPU matrix product -------------------------------------------------------------------

async function gemm(n) {
  const flop = 2 * n ** 3;
  const rows = [];
  const ours = { n, engine: "wgtorch", backend: "wasm CPU", kernel: cpu_gemm_kernel() };
  try {
    const m = new CpuMatmul(n);
    Object.assign(ours, await timeIt(() => m.run(), 10));
    ours.gflops = flop / ours.median_ms / 1e6;
    m.free();
  } catch (e) {
    ours.error = String(e);
    results.failures.push(`wgtorch sgemm ${n}: ${e}`);
  }
  rows.push(ours);
  if (skip.has("tfjs")) return rows;
  const peer = { n, engine: "TF.js 4.22", backend: "wasm" };
  try {
    if (!(await tf.setBackend("wasm"))) throw new Error("the wasm backend failed to start");
    const a = tf.randomNormal([n, n]), b = tf.randomNormal([n, n]);
    Object.assign(peer, await timeIt(async () => { const c = tf.matMul(a, b); await c.data(); c.dispose(); }, 10));
    peer.gflops = flop / peer.median_ms / 1e6;
    tf.dispose([a, b]);
  } catch (e) {
    peer.error = String(e.message || e);
  }
  rows.push(peer);
  return rows;
}

// ---- tables ---------------------------------------------------------------------------------

function table(id, cols, rows) {
  const esc = (s) => String(s).replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
  const cell = (r, [key, , fmt]) => {
    if (r.error && key === "median_ms") return `<td class="err" colspan="2">${esc(r.error.slice(0, 160))}</td>`;
    if (r.error && key === "first_ms") return "";
    const v = r[key];
    return v === undefined || v === null ? "<td></td>" : typeof v === "number" ? `<td class="num">${fmt ? fmt(v) : v.toFixed(1)}</td>` : `<td>${esc(v)}</td>`;
  };
  $(id).innerHTML = `<tr>${cols.map(([, h]) => `<th>${h}</th>`).join("")}</tr>` + rows.map((r) => `<tr>${cols.map((c) => cell(r, c)).join("")}</tr>`).join("");
}

async function main() {
  await init();
  const adapter = navigator.gpu ? await navigator.gpu.requestAdapter().catch(() => null) : null;
  const info = adapter?.info || {};
  results.env = {
    userAgent: navigator.userAgent,
    adapter: adapter ? [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" / ") || "unnamed" : null,
    shader_f16: adapter ? adapter.features.has("shader-f16") : false,
    cross_origin_isolated: self.crossOriginIsolated,
    hardware_concurrency: navigator.hardwareConcurrency,
    wgtorch_cpu_gemm: cpu_gemm_kernel(),
  };
  $("env").textContent = `WebGPU adapter: ${results.env.adapter || "none"}; wgtorch CPU GEMM: ${results.env.wgtorch_cpu_gemm}; cross-origin isolated: ${self.crossOriginIsolated} (without it no engine here gets threads)`;
  tf.wasm.setWasmPaths(new URL("../node_modules/@tensorflow/tfjs-backend-wasm/dist/", location.href).href);
  ort.env.logLevel = "error";  // its warnings (ops placed on the CPU) go to console.error
  ort.env.wasm.wasmPaths = new URL("../node_modules/onnxruntime-web/dist/", location.href).href;
  const trainCols = [["engine", "engine"], ["backend", "backend"], ["first_ms", "first step ms"], ["median_ms", "median ms/step"], ["samples", "steps timed", (v) => v]];
  if (!skip.has("train")) {
    for (const [label, gpu, run] of [
      ["wgtorch WebGPU", true, () => wgtorchTrain(true)], ["wgtorch wasm CPU", false, () => wgtorchTrain(false)],
      ["TF.js webgpu", true, () => tfjsTrain("webgpu")], ["TF.js wasm", false, () => tfjsTrain("wasm")], ["TF.js cpu", false, () => tfjsTrain("cpu")],
    ]) {
      if ((gpu && !adapter) || skip.has(label.startsWith("TF.js") ? "tfjs" : `wgtorch-${gpu ? "gpu" : "cpu"}`)) continue;
      say(`training: ${label}…`);
      results.train.push(await run());
      table("train", trainCols, results.train);
    }
  }
  const inferCols = [["model", "model"], ["engine", "engine"], ["backend", "backend"], ["load_ms", "load ms"], ["first_ms", "first run ms"], ["median_ms", "median ms"], ["max_abs_diff_vs_pytorch", "max |Δ| vs PyTorch", (v) => v.toExponential(1)], ["max_abs_diff_vs_peer", "max |Δ| vs ORT", (v) => v.toExponential(1)]];
  if (!skip.has("infer")) {
    const index = await (await fetch("../golden/onnx/index.json")).json().catch(() => null);
    const all = index ? (Array.isArray(index) ? index.map((m) => m.name || m) : Object.keys(index)) : [];
    const models = params.get("models") ? params.get("models").split(",") : all;
    const extra = (params.get("extra") || "").split(",").filter(Boolean);
    for (const name of [...models, ...extra]) {
      const base = extra.includes(name) ? "../onnx-extra" : "../golden/onnx";
      const bytes = async (f) => {
        const r = await fetch(`${base}/${f}`);
        if (!r.ok) throw new Error(`${base}/${f}: HTTP ${r.status}`);
        return new Uint8Array(await r.arrayBuffer());
      };
      const model = await bytes(`${name}.onnx`), io = await bytes(`${name}.io.safetensors`);
      for (const gpu of adapter ? [true, false] : [false]) {
        say(`inference: ${name} on ${gpu ? "WebGPU" : "the CPU"}…`);
        results.infer.push(...(await infer(name, model, io, gpu)));
        table("infer", inferCols, results.infer);
      }
    }
  }
  if (!skip.has("gemm")) {
    for (const n of [128, 256, 512]) {
      say(`CPU matrix product ${n}³…`);
      results.gemm.push(...(await gemm(n)));
      table("gemm", [["n", "n", (v) => v], ["engine", "engine"], ["backend", "backend"], ["kernel", "kernel"], ["median_ms", "median ms"], ["gflops", "GFLOP/s"]], results.gemm);
    }
  }
  say(results.failures.length ? `done, ${results.failures.length} failures` : "done");
  results.done = true;
}

main().catch((e) => { results.error = String(e); results.done = true; say(`error: ${e}`); console.error(e); });
