// Refreshes README's picture, docs/report-screenshot.png: the top of the demo's report
// (title, how to read it, the sigma chart and the distributions of p_(1) and sigma) in headless
// Chromium at 1000 px wide.
//
//   npm run screenshot                 # from runs/demo/report.html (run `npm start` first)
//   npm run screenshot -- DIR/report.html [OUT.png]
//
// Chromium is Debian's /usr/bin/chromium (bash .ci/install-chromium installs it), driven by
// playwright-core; nothing is downloaded.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const CHROMIUM = "/usr/bin/chromium";
const [input = "runs/demo/report.html", output = "docs/report-screenshot.png"] = process.argv.slice(2);

function fail(message) {
  console.error(`screenshot: ${message}`);
  process.exit(2);
}

if (!existsSync(input)) fail(`${input} does not exist: run the demo first (npm start), or name a report.html`);
if (!existsSync(CHROMIUM)) fail(`${CHROMIUM} is missing: install it with bash .ci/install-chromium`);

const { chromium } = await import("playwright-core");
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"], offline: true });
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(pathToFileURL(resolve(input)).href, { waitUntil: "load" });
  // Down to the end of the distributions chart: the report's first two charts and their captions.
  const end = await page.$eval("#chart-distributions", (e) => e.getBoundingClientRect().bottom + e.ownerDocument.documentElement.scrollTop);
  await page.screenshot({ path: output, fullPage: true, clip: { x: 0, y: 0, width: 1000, height: Math.ceil(end) + 16 } });
  console.log(`wrote ${output} (the top of ${input}, ${Math.ceil(end) + 16} px high)`);
} finally {
  await browser.close();
}
