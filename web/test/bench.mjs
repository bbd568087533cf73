// The browser benchmark's driver: opens web/bench/ in Debian's Chromium (the e2e test's setup,
// WebGPU on), waits for it, prints one table with the ratios the issue's targets are stated in,
// and writes web-bench-results.json. Fails (exit 1) on errors only: a wgtorch engine that did
// not run, wgtorch outputs that differ from PyTorch's, a page error. Speed never fails it.
//
//   node test/bench.mjs [--steps N] [--budget SECONDS] [--runs N] [--skip LIST] [--out FILE]
//                       [--onnx-dir DIR --models a,b]
//
// `--onnx-dir` adds the named models of DIR (NAME.onnx with NAME.io.safetensors: the native
// bench's target/onnx-bench/, ResNet-18 at 1×3×224×224 among them) to the golden ones.
import { serve, launch, look } from "./browser.mjs";
import fs from "node:fs";
import path from "node:path";

const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : dflt; };
const steps = arg("steps", "10"), budget = arg("budget", "60"), runs = arg("runs", "30");
const out = arg("out", "web-bench-results.json");
const skip = arg("skip", "");

const onnxDir = arg("onnx-dir", null), extra = arg("models", "");
const server = await serve(onnxDir ? [["/onnx-extra/", path.resolve(onnxDir)]] : []);
const browser = await launch(true);
const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
const errors = [];
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
page.on("pageerror", (e) => errors.push(String(e)));
const t0 = Date.now();
await page.goto(`http://127.0.0.1:${server.address().port}/bench/index.html?steps=${steps}&budget=${budget}&runs=${runs}&skip=${skip}${onnxDir ? `&extra=${extra}` : ""}`);
// The page answers late while a peer compiles its shaders on SwiftShader (over 30 s on a loaded
// 2-core machine): only the whole run has a deadline.
const deadline = t0 + 40 * 60 * 1000;
let last = "";
for (;;) {
  const { done, line } = await look(page, () => ({ done: !!window.benchResults?.done, line: document.querySelector("#status")?.textContent ?? "" }), deadline, "the benchmark did not finish in 40 minutes");
  if (done) break;
  if (line !== last) { console.log(`  ${line}`); last = line; }
  await new Promise((r) => setTimeout(r, 1000));
}
const r = await page.evaluate(() => window.benchResults);
r.wall_s = (Date.now() - t0) / 1000;
r.console_errors = errors;
await browser.close();
server.close();

const f = (v, d = 1) => (typeof v === "number" && Number.isFinite(v) ? v.toFixed(d) : "–");
const pad = (s, n) => String(s).padEnd(n);
console.log(`\nChromium ${r.env.userAgent.match(/Chrome\/([\d.]+)/)?.[1] || "?"}, WebGPU adapter: ${r.env.adapter || "none"}, wgtorch CPU GEMM: ${r.env.wgtorch_cpu_gemm}, cross-origin isolated: ${r.env.cross_origin_isolated}`);
console.log("\ntraining the SimpleCNN, batch 64, Adam, f32");
console.log(`${pad("engine", 22)}${pad("backend", 10)}${pad("first ms", 11)}${pad("median ms/step", 16)}steps`);
for (const x of r.train) console.log(`${pad(x.engine, 22)}${pad(x.backend, 10)}${x.error ? `cannot train: ${x.error.slice(0, 110)}` : `${pad(f(x.first_ms, 0), 11)}${pad(f(x.median_ms, 1), 16)}${x.samples}`}`);
const row = (list, pred) => list.find((x) => pred(x) && !x.error);
const ours = (b) => row(r.train, (x) => x.engine === "wgtorch" && x.backend === b);
const ratios = [];
const tfGpu = row(r.train, (x) => x.engine.startsWith("TF.js") && x.backend === "webgpu");
if (ours("WebGPU") && tfGpu) ratios.push(`training, WebGPU: wgtorch / TF.js = ${f(ours("WebGPU").median_ms / tfGpu.median_ms, 3)} (target ≤ 0.3)`);
const tfCpu = r.train.filter((x) => x.engine.startsWith("TF.js") && x.backend !== "webgpu" && !x.error).sort((a, b) => a.median_ms - b.median_ms)[0];
if (ours("wasm CPU") && tfCpu) ratios.push(`training, CPU: wgtorch wasm / TF.js ${tfCpu.backend} (its fastest CPU backend that trains) = ${f(ours("wasm CPU").median_ms / tfCpu.median_ms, 3)} (target ≤ 0.1)`);
console.log("\nONNX inference");
console.log(`${pad("model", 22)}${pad("engine", 22)}${pad("backend", 10)}${pad("load ms", 9)}${pad("first ms", 10)}${pad("median ms", 11)}${pad("|Δ| PyTorch", 13)}|Δ| ORT`);
for (const x of r.infer) console.log(`${pad(x.model, 22)}${pad(x.engine, 22)}${pad(x.backend, 10)}${x.error ? `error: ${x.error.slice(0, 100)}` : `${pad(f(x.load_ms, 0), 9)}${pad(f(x.first_ms, 1), 10)}${pad(f(x.median_ms, 3), 11)}${pad(x.max_abs_diff_vs_pytorch?.toExponential(1), 13)}${x.max_abs_diff_vs_peer?.toExponential(1) ?? ""}`}`);
for (const x of r.infer.filter((x) => x.engine === "wgtorch" && !x.error)) {
  const peer = row(r.infer, (y) => y.model === x.model && y.engine !== "wgtorch" && y.backend === (x.backend === "WebGPU" ? "webgpu" : "wasm"));
  if (peer) ratios.push(`inference, ${x.model} on ${x.backend}: wgtorch / onnxruntime-web = ${f(x.median_ms / peer.median_ms, 2)} (target ≤ 0.8)`);
}
console.log("\nCPU matrix product, one thread");
for (const x of r.gemm) console.log(`${pad(`${x.n}³`, 7)}${pad(x.engine, 14)}${pad(x.backend, 10)}${x.error ? `error: ${x.error}` : `${pad(f(x.median_ms, 2) + " ms", 12)}${f(x.gflops, 1)} GFLOP/s ${x.kernel || ""}`}`);
r.ratios = ratios;
console.log(`\nratios (same page, same adapter):\n  ${ratios.join("\n  ")}`);
fs.writeFileSync(out + ".tmp", JSON.stringify(r, null, 1));
fs.renameSync(out + ".tmp", out);
console.log(`\nwrote ${out} (${f(r.wall_s, 0)} s)`);
const problems = [...(r.error ? [`page: ${r.error}`] : []), ...r.failures, ...errors.map((e) => `console: ${e}`)];
if (problems.length) {
  console.log(`web bench FAILED:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log("web bench: ok");
