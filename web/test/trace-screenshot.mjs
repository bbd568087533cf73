// Opens a Chrome trace written by wgtorch's profiler (`train_cnn --profile trace.json`) in
// speedscope in headless Chromium and saves a screenshot:
//   node test/trace-screenshot.mjs trace.json out.png [track]
// (track: which of speedscope's tracks to show, 0 for the first CPU thread; the GPU kernels'
// track comes after the CPU threads)
// (the README's picture of a trace; the browser test does the same for the page's own trace).
import fs from "node:fs";
import { serve, launch, openTrace } from "./browser.mjs";

const [input, output, track] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node test/trace-screenshot.mjs TRACE.json OUT.png");
  process.exit(2);
}
const server = await serve();
const browser = await launch(false);
try {
  await openTrace(browser, server.address().port, fs.readFileSync(input, "utf8"), "file", Number(track || 0));
  fs.copyFileSync(new URL("./trace-file.png", import.meta.url), output);
  console.log(`wrote ${output}`);
} finally {
  await browser.close();
  server.close();
}
