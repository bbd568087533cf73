// End-to-end test of the demo in a real browser (Debian's Chromium through playwright-core, no
// browser download). Run 1 (?device=gpu): WebGPU (SwiftShader in headless Chromium) must be used,
// one epoch of training must reach >= 90% test accuracy, injected held-out digits must be classified
// correctly, the golden op cases must match PyTorch, and the console must stay free of errors.
// Run 2 (no switch): offered only SwiftShader, the page must pick its faster CPU path and say
// why. Run 3: WebGPU unavailable, the page must fall back to the CPU and still train,
// and the wasm CPU backend must match PyTorch's golden op cases and an f64 reference for its
// matrix product (the SIMD128 kernel). Every run
// ends with the page profiling 3 steps (wgtorch.profiler in wasm): its top kernels by GPU time
// come from the adapter's timestamps, or the page says why there are none; the profile's Chrome
// trace must open in speedscope (a trace viewer from npm, served by this script). Saves
// screenshots next to this file.
import { chromium } from "playwright-core";
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const webDir = path.resolve(here, "..");
const goldenDir = process.env.WGTORCH_GOLDEN_DIR || path.resolve(webDir, "../../shared/golden");
const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";
const speedscopeDir = path.resolve(webDir, "node_modules/speedscope/dist/release");
const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".png": "image/png", ".css": "text/css", ".woff2": "font/woff2" };
// Traces handed to the viewer: /traces/<name>.json.
const traces = new Map();

// `extra`: more [url prefix, folder] mounts (the benchmark's larger ONNX models).
export function serve(extra = []) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    let file = url.pathname === "/" ? "/index.html" : url.pathname;
    if (file.startsWith("/traces/") && traces.has(file)) {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(traces.get(file));
      return;
    }
    const mounts = [["/golden/", goldenDir], ["/speedscope/", speedscopeDir], ...extra];
    const mount = mounts.find(([prefix]) => file.startsWith(prefix));
    const base = mount ? mount[1] : webDir;
    if (mount) file = file.slice(mount[0].length - 1);
    const full = path.join(base, path.normalize(file));
    if (!full.startsWith(base) || !fs.existsSync(full) || fs.statSync(full).isDirectory()) {
      res.writeHead(404);
      res.end("not found");
      return;
    }
    res.writeHead(200, { "Content-Type": types[path.extname(full)] || "application/octet-stream" });
    fs.createReadStream(full).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

export async function launch(webgpu) {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "wgtorch-chromium-"));
  const args = [
    "--headless=new", "--no-sandbox", "--disable-gpu-sandbox", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    `--user-data-dir=${userDataDir}`, "--remote-debugging-pipe",
  ];
  if (webgpu) args.push("--enable-unsafe-webgpu");
  else args.push("--disable-webgpu");
  return chromium.launch({ executablePath: browserPath, ignoreDefaultArgs: true, args, timeout: 120000 });
}

// One look into a page that may be busy: evaluates `fn` there with no timeout of its own, and
// fails only once `deadline` (ms since the epoch) has passed. Playwright's element queries give up
// after 30 s, but a page's main thread can stay busy longer than that without being stuck: a
// peer's shader compiles on SwiftShader, or a machine loaded by a parallel build.
export async function look(page, fn, deadline, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer from the page by the deadline`)), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([page.evaluate(fn), late]);
  } finally {
    clearTimeout(timer);
  }
}

// `mode`: "webgpu" (forced with ?device=gpu: SwiftShader must be used), "auto" (WebGPU offered,
// the page must pick its CPU path over the software adapter and say why) or "cpu-fallback"
// (WebGPU disabled in the browser).
async function run(server, mode) {
  const webgpu = mode === "webgpu";
  const browser = await launch(mode !== "cpu-fallback");
  const page = await browser.newPage({ viewport: { width: 1000, height: 520 } });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  const port = server.address().port;
  // One epoch for the WebGPU run (SwiftShader takes seconds per step on a 2-core machine) and for
  // the auto run; the CPU fallback trains the page's two test epochs.
  const query = { webgpu: "&device=gpu&epochs=1", auto: "&epochs=1", "cpu-fallback": "" }[mode];
  await page.goto(`http://127.0.0.1:${port}/index.html?test=1${query}`);
  const deadline = Date.now() + 20 * 60 * 1000;
  const state = () => ({ s: window.wgtorchStatus, line: document.querySelector("#status")?.textContent ?? "" });
  let last = "";
  for (;;) {
    const { s, line } = await look(page, state, deadline, `[${mode}] training did not finish in 20 minutes`);
    if (s && (s.done || s.error)) break;
    if (line !== last) { console.log(`  [${mode}] ${line}`); last = line; }
    await new Promise((r) => setTimeout(r, 2000));
  }
  const { s: status, line: final } = await page.evaluate(state);
  console.log(`  backend: ${status.backend}`);
  console.log(`  from navigation: trainer ready at ${status.readyMs.toFixed(0)} ms, first step trained at ${status.firstStepMs.toFixed(0)} ms`);
  console.log(`  final: ${final}`);
  if (status.error) throw new Error(`page error: ${status.error}`);
  if (webgpu && !status.gpu) throw new Error(`expected the WebGPU backend, got: ${status.backend}`);
  if (!webgpu && (status.gpu || !status.backend.startsWith("CPU"))) throw new Error(`expected the CPU fallback, got: ${status.backend}`);
  if (mode === "auto" && !/chosen over the software WebGPU adapter/.test(status.backend)) throw new Error(`on SwiftShader the page must pick the CPU and say why, got: ${status.backend}`);
  if (!(status.acc >= 0.9)) throw new Error(`test accuracy ${status.acc} < 0.90`);
  // Injected held-out digits, drawn on the canvas and classified through it.
  let correct = 0;
  for (let k = 0; k < 5; k++) {
    const r = await page.evaluate((k) => window.injectDigit(k), k);
    console.log(`  injected digit ${r.label} -> predicted ${r.predicted}`);
    if (r.predicted === r.label) correct++;
  }
  if (correct < 4) throw new Error(`only ${correct}/5 injected digits classified correctly`);
  // The profile the page took after training.
  const p = status.profile;
  if (!p || !(p.step_ms > 0) || !p.ops.length) throw new Error(`no profile from the page: ${JSON.stringify(p)}`);
  if (!p.ops.some((o) => o.name === "conv2d")) throw new Error(`conv2d missing from the profiled ops: ${p.ops.map((o) => o.name)}`);
  // The page's clock is coarse (performance.now()); times must still add up within the wall time.
  const selfCpu = p.ops.reduce((a, o) => a + o.self_cpu_ms, 0);
  if (!(selfCpu <= p.wall_ms && 3 * p.step_ms <= p.wall_ms)) throw new Error(`profiled CPU time ${selfCpu} ms (step ${p.step_ms} ms) exceeds the ${p.wall_ms} ms the profile took`);
  if (webgpu) {
    // The page names the GEMM tile: on a software adapter (SwiftShader; wgpu reports type Cpu)
    // Tile::BROWSER_CPU_DEFAULT, measured fastest there.
    const tile = status.gemmTile;
    if (!tile || !status.backend.includes(`GEMM tile ${tile}`)) throw new Error(`the page does not name its GEMM tile: ${status.backend}`);
    if (/\(Cpu, BrowserWebGpu/.test(status.wgpuBackend) && tile !== "4x8/8x8") throw new Error(`a software adapter runs GEMM tile ${tile}, not 4x8/8x8 (${status.wgpuBackend})`);
    if (p.gpu_timed) {
      if (!p.kernels.length || !p.kernels.every((k) => k.total_ms >= 0 && k.calls > 0)) throw new Error(`bad kernel rows: ${JSON.stringify(p.kernels)}`);
      if (!(p.kernels.reduce((a, k) => a + k.total_ms, 0) > 0)) throw new Error("the adapter's kernel times sum to zero");
      console.log(`  top kernels by GPU time: ${p.kernels.slice(0, 3).map((k) => `${k.name} ${k.total_ms.toFixed(2)} ms`).join(", ")}`);
      // The GEMMs among the top kernels (the convolutions' and the linear layers') run the tile
      // the page names.
      const gemms = p.kernels.filter((k) => /^(conv2d|matmul)_/.test(k.name));
      const key = `_${status.gemmTile.replace("/", "_")}`;
      if (!gemms.length || !gemms.every((k) => k.name.endsWith(key))) throw new Error(`GEMM kernels not in tile ${status.gemmTile}: ${gemms.map((k) => k.name)}`);
      if (!(p.dispatches_per_step > 0 && p.submits_per_step > 0 && p.gpu_busy_ms_per_step > 0 && p.gpu_busy_ms_per_step <= p.step_ms)) throw new Error(`bad per-step GPU figures: ${JSON.stringify(p)}`);
      console.log(`  per step: ${p.step_ms.toFixed(0)} ms, kernels ${p.gpu_busy_ms_per_step.toFixed(0)} ms, ${p.dispatches_per_step} dispatches, ${p.submits_per_step} submits`);
    } else {
      if (!p.unavailable.length || p.kernels.length) throw new Error(`untimed adapter without a reason: ${JSON.stringify(p)}`);
      if (!(await page.textContent("#profile")).includes("GPU time unavailable")) throw new Error("the page does not say GPU time is unavailable");
      console.log(`  GPU time unavailable: ${p.unavailable.join("; ")}`);
    }
  } else if (p.kernels.length || p.gpu_timed) throw new Error("GPU kernels on the CPU fallback");
  const shot = path.join(here, { webgpu: "screenshot.png", auto: "screenshot-auto.png", "cpu-fallback": "screenshot-cpu.png" }[mode]);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`  screenshot: ${shot}`);
  await openTrace(browser, port, p.trace, `browser-${mode}`);
  if (mode === "cpu-fallback") {
    const g = await page.evaluate(() => window.checkCpuGemm());
    console.log(`  CPU matmul (${g.kernel}) against an f64 reference: ${g.cases - g.failed.length}/${g.cases} shapes ok`);
    if (g.failed.length || g.cases < 30) throw new Error(`CPU matmul in wasm: ${g.failed.join("; ")}`);
  }
  if (mode !== "auto") {
    // On WebGPU, and on the CPU backend where WebGPU is unavailable (the wasm SIMD128 kernels).
    const g = await page.evaluate(() => window.runGolden());
    console.log(`  golden ops on ${g.device}: ${g.passed.length} passed, ${g.failed.length} failed`);
    if (g.failed.length) throw new Error(`golden cases failed in the browser: ${g.failed.join(", ")}`);
    if (g.passed.length < 15) throw new Error(`too few golden cases ran (${g.passed.length})`);
  }
  // PyTorch-exported ONNX models, loaded from bytes and run with run_async on this page's device.
  for (const name of ["simple_cnn", "mlp_gelu_layernorm", "resblock_bn", "lstm_tagger", "transformer_encoder"]) {
    const r = await page.evaluate(([n, gpu]) => window.runOnnx(n, gpu), [name, webgpu]);
    const bad = r.outputs.filter((o) => !o.ok);
    if (!r.outputs.length || bad.length) throw new Error(`ONNX ${name} on ${r.device}: ${JSON.stringify(r.outputs)}`);
    console.log(`  onnx ${name} on ${r.device}: max abs diff ${Math.max(...r.outputs.map((o) => o.max_abs_diff)).toExponential(2)}`);
  }
  if (errors.length) throw new Error(`console errors:\n${errors.join("\n")}`);
  await browser.close();
}

// Opens a Chrome trace in speedscope in `browser` at track `track` (0: the first CPU thread),
// checks that it imported (a flame chart of its events, no import error) and saves a screenshot
// as trace-<name>.png next to this file.
export async function openTrace(browser, port, json, name, track = 0) {
  traces.set(`/traces/${name}.json`, json);
  const page = await browser.newPage({ viewport: { width: 1200, height: 560 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const url = `http://127.0.0.1:${port}/traces/${name}.json`;
  await page.goto(`http://127.0.0.1:${port}/speedscope/index.html#profileURL=${encodeURIComponent(url)}&title=wgtorch-${name}`);
  await page.waitForFunction(() => document.title.includes("wgtorch-"), null, { timeout: 60000 });
  await page.waitForTimeout(1500);
  // speedscope shows one track (thread) at a time; `n` moves to the next.
  for (let i = 0; i < track; i++) {
    await page.keyboard.press("n");
    await page.waitForTimeout(500);
  }
  const text = await page.textContent("body");
  if (/something went wrong|unrecognized format|failed to import/i.test(text)) throw new Error(`speedscope could not open the trace: ${text.slice(0, 300)}`);
  if (errors.length) throw new Error(`speedscope errors:\n${errors.join("\n")}`);
  const shot = path.join(here, `trace-${name}.png`);
  await page.screenshot({ path: shot });
  console.log(`  trace opened in speedscope: ${shot}`);
  await page.close();
}

if (process.argv[1] !== fileURLToPath(import.meta.url)) {
  // Imported (by trace-screenshot.mjs): the helpers only.
} else {
const server = await serve();
let failed = 0;
const modes = ["webgpu", "auto", "cpu-fallback"];
for (const mode of modes) {
  console.log(`browser run: ${{ webgpu: "WebGPU forced", auto: "WebGPU offered, the page chooses", "cpu-fallback": "WebGPU unavailable (CPU fallback)" }[mode]}`);
  try {
    await run(server, mode);
    console.log("  ok");
  } catch (e) {
    failed++;
    console.log(`  FAILED: ${e.message}`);
  }
}
server.close();
console.log(`browser: ${modes.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
}
