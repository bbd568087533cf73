// End-to-end test of the demo in a real browser (Debian's Chromium through playwright-core, no
// browser download). Run 1: WebGPU (SwiftShader in headless Chromium) must be used, training must
// reach >= 90% test accuracy, injected held-out digits must be classified correctly, the golden op
// cases must match PyTorch, and the console must stay free of errors. Run 2: WebGPU unavailable, the
// page must fall back to the CPU and still train. Saves screenshots next to this file.
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
const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".png": "image/png" };

function serve() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    let file = url.pathname === "/" ? "/index.html" : url.pathname;
    const base = file.startsWith("/golden/") ? goldenDir : webDir;
    if (file.startsWith("/golden/")) file = file.slice("/golden".length);
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

async function launch(webgpu) {
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

async function run(server, webgpu) {
  const browser = await launch(webgpu);
  const page = await browser.newPage({ viewport: { width: 1000, height: 520 } });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  const port = server.address().port;
  await page.goto(`http://127.0.0.1:${port}/index.html?test=1${webgpu ? "" : "&cpu-fallback"}`);
  const t0 = Date.now();
  let last = "";
  for (;;) {
    const s = await page.evaluate(() => window.wgtorchStatus);
    if (s && (s.done || s.error)) break;
    const line = await page.textContent("#status");
    if (line !== last) { console.log(`  [${webgpu ? "webgpu" : "cpu"}] ${line}`); last = line; }
    if (Date.now() - t0 > 20 * 60 * 1000) throw new Error("training did not finish in 20 minutes");
    await new Promise((r) => setTimeout(r, 2000));
  }
  const status = await page.evaluate(() => window.wgtorchStatus);
  console.log(`  backend: ${status.backend}`);
  console.log(`  final: ${await page.textContent("#status")}`);
  if (status.error) throw new Error(`page error: ${status.error}`);
  if (webgpu && !status.gpu) throw new Error(`expected the WebGPU backend, got: ${status.backend}`);
  if (!webgpu && (status.gpu || !status.backend.startsWith("CPU"))) throw new Error(`expected the CPU fallback, got: ${status.backend}`);
  if (!(status.acc >= 0.9)) throw new Error(`test accuracy ${status.acc} < 0.90`);
  // Injected held-out digits, drawn on the canvas and classified through it.
  let correct = 0;
  for (let k = 0; k < 5; k++) {
    const r = await page.evaluate((k) => window.injectDigit(k), k);
    console.log(`  injected digit ${r.label} -> predicted ${r.predicted}`);
    if (r.predicted === r.label) correct++;
  }
  if (correct < 4) throw new Error(`only ${correct}/5 injected digits classified correctly`);
  const shot = path.join(here, webgpu ? "screenshot.png" : "screenshot-cpu.png");
  await page.screenshot({ path: shot });
  console.log(`  screenshot: ${shot}`);
  if (webgpu) {
    const g = await page.evaluate(() => window.runGolden());
    console.log(`  golden ops on ${g.device}: ${g.passed.length} passed, ${g.failed.length} failed`);
    if (g.failed.length) throw new Error(`golden cases failed in the browser: ${g.failed.join(", ")}`);
    if (g.passed.length < 15) throw new Error(`too few golden cases ran (${g.passed.length})`);
  }
  if (errors.length) throw new Error(`console errors:\n${errors.join("\n")}`);
  await browser.close();
}

const server = await serve();
let failed = 0;
for (const webgpu of [true, false]) {
  console.log(`browser run: ${webgpu ? "WebGPU" : "WebGPU unavailable (CPU fallback)"}`);
  try {
    await run(server, webgpu);
    console.log("  ok");
  } catch (e) {
    failed++;
    console.log(`  FAILED: ${e.message}`);
  }
}
server.close();
console.log(`browser: ${2 - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
