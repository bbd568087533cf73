// The demo page: trains the SimpleCNN (WebGPU, or the CPU when the browser has none), plots loss
// and accuracy, and classifies digits drawn on the canvas. Nothing blocks: every step awaits the
// GPU, which hands the event loop back to the page between steps.
import init, { Trainer, run_golden, run_onnx, check_cpu_gemm } from "./pkg/wgtorch_web.js";

const params = new URLSearchParams(location.search);
const testMode = params.has("test");          // shorter run for the automated browser test
const epochs = Number(params.get("epochs") || (testMode ? 2 : 6));
// ?device=gpu or ?device=cpu forces a backend; by default the page picks (see chooseDevice).
const forced = params.get("device") || (params.has("cpu") ? "cpu" : null);
const status = { backend: null, gpu: false, epoch: 0, acc: 0, loss: NaN, done: false, error: null, history: [] };
window.wgtorchStatus = status;

const $ = (id) => document.getElementById(id);
const plot = $("plot").getContext("2d");
const draw = $("draw").getContext("2d");

// Live plot: the loss of every step (red, smoothed) and the test accuracy after each epoch (blue).
const stepLosses = [];
function drawPlot() {
  const w = plot.canvas.width, h = plot.canvas.height;
  plot.clearRect(0, 0, w, h);
  plot.strokeStyle = "#999";
  plot.lineWidth = 1;
  plot.strokeRect(0.5, 0.5, w - 1, h - 1);
  const total = Math.max(stepLosses.length, stepsPerEpoch * epochs, 1);
  const xAt = (i) => 10 + (i * (w - 20)) / total;
  const maxLoss = Math.max(...stepLosses, 1e-6);
  plot.strokeStyle = "#c33";
  plot.lineWidth = 2;
  plot.beginPath();
  let ema = stepLosses[0];
  stepLosses.forEach((l, i) => {
    ema = 0.8 * ema + 0.2 * l;
    const y = h - 10 - (ema / maxLoss) * (h - 20);
    i ? plot.lineTo(xAt(i), y) : plot.moveTo(xAt(i), y);
  });
  plot.stroke();
  plot.fillStyle = plot.strokeStyle = "#36c";
  plot.beginPath();
  status.history.forEach((p, e) => {
    const x = xAt((e + 1) * stepsPerEpoch), y = h - 10 - p.acc * (h - 20);
    e ? plot.lineTo(x, y) : plot.moveTo(x, y);
  });
  plot.stroke();
  status.history.forEach((p, e) => plot.fillRect(xAt((e + 1) * stepsPerEpoch) - 3, h - 13 - p.acc * (h - 20), 6, 6));
}
let stepsPerEpoch = 1;

// Drawing: a thick pen on a 160×160 canvas, read back as a 32×32 on/off bitmap.
let pen = false;
draw.lineWidth = 14;
draw.lineCap = "round";
const pos = (e) => { const r = draw.canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
draw.canvas.addEventListener("pointerdown", (e) => { pen = true; draw.beginPath(); draw.moveTo(...pos(e)); });
draw.canvas.addEventListener("pointermove", (e) => { if (pen) { draw.lineTo(...pos(e)); draw.stroke(); } });
window.addEventListener("pointerup", () => { if (pen) { pen = false; classify(); } });
$("clear").onclick = () => draw.clearRect(0, 0, 160, 160);

function bitmap() {
  const img = draw.getImageData(0, 0, 160, 160).data;
  const out = new Uint8Array(1024);
  for (let y = 0; y < 32; y++) for (let x = 0; x < 32; x++) {
    let ink = 0;
    for (let dy = 0; dy < 5; dy++) for (let dx = 0; dx < 5; dx++) ink += img[((y * 5 + dy) * 160 + x * 5 + dx) * 4 + 3];
    out[y * 32 + x] = ink > 25 * 80 ? 1 : 0;
  }
  return out;
}

function paint(bits) {
  draw.clearRect(0, 0, 160, 160);
  draw.fillStyle = "#000";
  for (let i = 0; i < 1024; i++) if (bits[i]) draw.fillRect((i % 32) * 5, Math.floor(i / 32) * 5, 5, 5);
}

let trainer = null;
async function classify() {
  if (!trainer) return null;
  const probs = await trainer.predict(bitmap());
  let best = 0;
  probs.forEach((p, i) => { if (p > probs[best]) best = i; });
  $("pred").textContent = `${best} (${(probs[best] * 100).toFixed(1)}%)`;
  $("probs").innerHTML = Array.from(probs, (p, i) =>
    `<tr><td>${i}</td><td><div class="bar" style="width:${Math.round(p * 150)}px"></div></td><td>${(p * 100).toFixed(1)}%</td></tr>`).join("");
  return best;
}
$("classify").onclick = classify;

// For the automated test: draw held-out digit k on the canvas and classify it.
window.injectDigit = async (k) => {
  paint(trainer.test_digit(k));
  return { predicted: await classify(), label: trainer.test_label(k) };
};

// For the automated test: PyTorch's golden op cases on this page's device.
window.runGolden = async () => JSON.parse(await run_golden(await (await fetch("golden/ops.json")).text()));

// For the automated test: the CPU backend's matrix product (SIMD128 kernel) against an f64 reference.
window.checkCpuGemm = () => JSON.parse(check_cpu_gemm());

// For the automated test: a PyTorch-exported ONNX model run in this page, against PyTorch's outputs.
window.runOnnx = async (name, tryGpu) => {
  const bytes = async (f) => new Uint8Array(await (await fetch(`golden/onnx/${f}`)).arrayBuffer());
  return JSON.parse(await run_onnx(await bytes(`${name}.onnx`), await bytes(`${name}.io.safetensors`), tryGpu));
};

// WebGPU unless the browser's adapter is a software one (SwiftShader, a fallback adapter): that
// runs on the CPU too, and trains about 20x slower than wgtorch's own wasm CPU backend (batch
// 64: 2.6 s against 114 ms a step, Dec 5), so the page takes the CPU as Device::best() does natively for lavapipe, and says why.
async function chooseDevice() {
  const adapter = navigator.gpu ? await navigator.gpu.requestAdapter().catch(() => null) : null;
  const info = adapter?.info || {};
  const desc = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" / ");
  if (forced === "cpu") return { gpu: false, desc, why: "CPU — forced by ?device=cpu" };
  if (forced === "gpu" || !adapter) return { gpu: true, desc, why: null };
  const software = info.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(desc);
  if (software) {
    return { gpu: false, desc, why: `CPU — chosen over the software WebGPU adapter (${desc}), which trains slower here; ?device=gpu uses it` };
  }
  return { gpu: true, desc, why: null };
}

async function main() {
  await init();
  const choice = await chooseDevice();
  status.choice = choice.gpu ? "gpu" : "cpu";
  trainer = await Trainer.create(choice.gpu, 32, 0);
  status.readyMs = performance.now();
  status.backend = trainer.backend();
  status.wgpuBackend = status.backend; // wgpu's own description: adapter type and API
  status.gpu = trainer.on_gpu();
  // The browser's own description of the adapter (wgpu's AdapterInfo is sparse on the web).
  if (status.gpu && choice.desc) status.backend = `WebGPU — ${choice.desc}`;
  status.gemmTile = trainer.gemm_tile() ?? null;
  if (status.gemmTile) status.backend += `, GEMM tile ${status.gemmTile}`;
  if (!status.gpu && choice.why) status.backend = choice.why;
  $("backend").textContent = status.backend;
  const perEpoch = Math.ceil(trainer.train_len() / 32);
  stepsPerEpoch = perEpoch;
  while (status.epoch < epochs) {
    const t0 = performance.now();
    let sum = 0;
    for (let i = 0; i < perEpoch; i++) {
      const l = await trainer.step();
      // From the navigation's start: loading, compiling the wasm, the data, the first step.
      if (status.firstStepMs === undefined) status.firstStepMs = performance.now();
      sum += l;
      stepLosses.push(l);
      if (i % 5 === 4) drawPlot();
      $("status").textContent = `epoch ${status.epoch + 1}/${epochs}: step ${i + 1}/${perEpoch}`;
    }
    const secs = (performance.now() - t0) / 1000;
    status.loss = sum / perEpoch;
    status.acc = await trainer.evaluate();
    status.epoch = trainer.epoch();
    status.history.push({ loss: status.loss, acc: status.acc });
    drawPlot();
    $("status").textContent = `epoch ${status.epoch}/${epochs}: train loss ${status.loss.toFixed(4)}, test accuracy ${(status.acc * 100).toFixed(2)}%, ${(trainer.train_len() / secs).toFixed(0)} img/s`;
  }
  // Where a training step's time goes on this page's adapter: wgtorch's profiler over 3 steps.
  const line = $("status").textContent;
  $("status").textContent = line + " — profiling 3 steps…";
  const p0 = performance.now();
  status.profile = JSON.parse(await trainer.profile_steps(3));
  status.profile.wall_ms = performance.now() - p0;
  showProfile(status.profile);
  $("status").textContent = line;
  status.done = true;
}

function showProfile(p) {
  const esc = (s) => String(s).replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
  const row = (cells) => `<tr>${cells.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`;
  let html = `<div><b>wgtorch.profiler</b>, ${p.steps} training steps: ${p.step_ms.toFixed(1)} ms per step`;
  if (p.gpu_timed) {
    html += ` (kernels ${p.gpu_busy_ms_per_step.toFixed(1)} ms; ${p.dispatches_per_step} dispatches, ${p.submits_per_step} submits)`;
  }
  html += `</div><div class="row">`;
  if (p.gpu_timed) {
    html += "<div><div>top kernels by GPU time (this adapter's timestamps)</div><table><tr><th>kernel</th><th>calls</th><th>GPU ms</th></tr>";
    html += p.kernels.map((k) => row([k.name, k.calls, k.total_ms.toFixed(3)])).join("") + "</table></div>";
  } else if (status.gpu) {
    html += `<div>GPU time unavailable: ${esc(p.unavailable.join("; ") || "no kernels were timed")}</div>`;
  }
  html += "<div><div>top ops by self CPU time</div><table><tr><th>op</th><th>calls</th><th>self CPU ms</th></tr>";
  html += p.ops.map((o) => row([o.name, o.calls, o.self_cpu_ms.toFixed(3)])).join("") + "</table></div></div>";
  $("profile").innerHTML = html;
}

main().catch((e) => { status.error = String(e); $("status").textContent = "error: " + e; console.error(e); });
