/* global document, window */ // inside page.evaluate / waitForFunction: they run in the browser
// Refreshes README's picture of the explorer, docs/explorer-screenshot.png: `attnlip explore`'s
// page with the bundled model, its first held-out digit analysed and attacked, in headless
// Chromium, the whole page at 1300 px wide.
//
//   npm run screenshot:explorer [-- OUT.png]
//
// Chromium is Debian's /usr/bin/chromium (bash .ci/install-chromium installs it), driven by
// playwright-core; nothing is downloaded.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CHROMIUM = "/usr/bin/chromium";
const [output = "docs/explorer-screenshot.png"] = process.argv.slice(2);
if (!existsSync(CHROMIUM)) {
  console.error(`screenshot: ${CHROMIUM} is missing: install it with bash .ci/install-chromium`);
  process.exit(2);
}

// The page as a static folder, written by the command itself, served from this process.
const site = join(mkdtempSync(join(tmpdir(), "attnlip-explorer-shot-")), "site");
const built = spawnSync(process.execPath, ["bin/attnlip.js", "explore", "--out", site], { stdio: "inherit" });
if (built.status !== 0) process.exit(built.status ?? 1);
const types = { html: "text/html", js: "text/javascript", json: "application/json" };
const server = createServer((request, response) => {
  const path = join(site, (request.url ?? "/").split("?")[0].replace(/^\/+/, "") || "index.html");
  if (!path.startsWith(site) || !existsSync(path)) return void response.writeHead(404).end();
  response.writeHead(200, { "content-type": types[path.split(".").pop()] ?? "application/octet-stream" }).end(readFileSync(path));
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}/`;

const { chromium } = await import("playwright-core");
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const page = await browser.newPage({ viewport: { width: 1300, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(url);
  await page.waitForFunction(() => Number(document.body.dataset.analyses ?? 0) >= 1, undefined, { timeout: 120_000 });
  await page.click("#run-attack");
  await page.waitForSelector("#adv-margin", { timeout: 120_000 });
  await page.evaluate(() => document.getElementById("status")?.remove()); // a transient line
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: output, fullPage: true });
  console.log(`wrote ${output} (the whole explorer page at ${url}, 1300 px wide)`);
} finally {
  await browser.close();
  server.close();
  rmSync(site, { recursive: true, force: true });
}
