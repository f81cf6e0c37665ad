import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { buildReport, writeReport } from "../../src/report/index.ts";
import { FIXTURES } from "./helpers.ts";
import { HANG_MS, TEST_BACKSTOP_MS } from "../helpers/patience.ts";

/**
 * Opens the report in headless Chromium (Debian's /usr/bin/chromium through playwright-core):
 * no console errors, no failed or outside requests, every chart drawn with a non-empty box,
 * and a full-page screenshot (in a temp folder; also at $ATTNLIP_SCREENSHOT when set).
 */

const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const missing = !existsSync(CHROMIUM);
const skip =
  missing && !process.env.CI
    ? `${CHROMIUM} is missing (install it with .ci/install-chromium)`
    : false;

let work = "";
let reportPath = "";
before(async () => {
  work = mkdtempSync(join(tmpdir(), "attnlip-report-browser-"));
  reportPath = join(work, "report.html");
  // A long folder path without spaces (shown whole in the configuration and file tables) and a
  // long data description: the tables must wrap them to fit the page, not run wider.
  const deep = join(
    work,
    "a-study-folder-with-a-long-name",
    "lambda-0.1-seed-0-epochs-30-pretrained-vit-tiny-with-shifts",
  );
  cpSync(FIXTURES.jasmin, deep, { recursive: true });
  const attack = JSON.parse(readFileSync(join(deep, "attack.json"), "utf8"));
  attack.data = `mnist: ${"the held-out test split of the checkpoint, content and digests checked; ".repeat(3)}`;
  writeFileSync(join(deep, "attack.json"), JSON.stringify(attack));
  const html = await buildReport([
    { dir: FIXTURES.baseline, name: "baseline" },
    // A long run name, as the demo gives it: legends must show it whole.
    { dir: deep, name: "JaSMin (lambda 0.1)" },
  ]);
  await writeReport(reportPath, html);
});

after(() => {
  if (work !== "" && !process.env.ATTNLIP_KEEP_SCREENSHOT)
    rmSync(join(work, "chromium-profile"), { recursive: true, force: true });
});

test(
  "the report renders in headless Chromium: no errors, no requests out, every chart drawn",
  { skip, timeout: TEST_BACKSTOP_MS },
  async (t) => {
    assert.ok(!missing, `${CHROMIUM} is missing; CI must install it (.ci/install-chromium)`);
    const { chromium } = await import("playwright-core");
    const profile = join(work, "chromium-profile");
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      // 800 px: every chart must fit without a horizontal scroll bar.
      viewport: { width: 800, height: 900 },
      offline: true,
    });
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(HANG_MS); // waits catch hangs, not slowness
      const errors: string[] = [];
      const failed: string[] = [];
      const outside: string[] = [];
      const url = pathToFileURL(reportPath).href;
      page.on("console", (m) => {
        if (m.type() === "error") errors.push(m.text());
      });
      page.on("pageerror", (e) => errors.push(String(e)));
      page.on("requestfailed", (r) => failed.push(`${r.url()} ${r.failure()?.errorText ?? ""}`));
      page.on("request", (r) => {
        if (r.url() !== url) outside.push(r.url());
      });
      const response = await page.goto(url, { waitUntil: "load" });
      assert.ok(response === null || response.ok());
      assert.deepEqual(errors, [], "console errors");
      assert.deepEqual(failed, [], "failed requests");
      assert.deepEqual(outside, [], "requests besides the report itself");

      const charts = await page.$$eval("figure.chart", (figures) =>
        figures.map((f) => {
          const svg = f.querySelector("svg");
          const box = svg?.getBoundingClientRect();
          const marks = svg
            ? [
                ...svg.querySelectorAll(
                  "g.role-mark > path, g.role-mark > rect, g.role-mark > circle, g.role-mark > line",
                ),
              ]
            : [];
          const drawn = marks.filter((m) => {
            const b = (m as SVGGraphicsElement).getBBox();
            return b.width > 0 || b.height > 0;
          });
          const texts = svg
            ? [...svg.querySelectorAll("text")].map((x) => x.textContent ?? "")
            : [];
          return {
            id: f.getAttribute("data-chart"),
            cut: texts.filter((x) => x.endsWith("…")),
            named: texts.includes("JaSMin (lambda 0.1)"),
            overflow: f.scrollWidth - f.clientWidth,
            namespace: svg?.namespaceURI ?? null,
            width: box?.width ?? 0,
            height: box?.height ?? 0,
            marks: marks.length,
            drawn: drawn.length,
          };
        }),
      );
      assert.equal(charts.length, 7);
      const wide = charts.filter((c) => c.overflow > 0).map((c) => `${c.id}: ${c.overflow} px`);
      assert.deepEqual(wide, [], "charts wider than the page at 800 px");
      // The charts with a run legend show the long name whole.
      for (const id of ["sigma-scatter", "distributions", "robustness", "training"])
        assert.ok(
          charts.find((c) => c.id === id)?.named,
          `${id}: no legend label "JaSMin (lambda 0.1)"`,
        );
      for (const c of charts) {
        assert.equal(c.namespace, "http://www.w3.org/2000/svg", `${c.id}: parsed as SVG`);
        assert.ok(c.width > 0 && c.height > 0, `${c.id}: empty box ${c.width} x ${c.height}`);
        assert.deepEqual(c.cut, [], `${c.id}: labels cut to an ellipsis`);
        assert.ok(c.overflow <= 0, `${c.id}: ${c.overflow} px wider than the page at 800 px`);
        assert.ok(
          c.marks > 0 && c.drawn > 0,
          `${c.id}: ${c.marks} marks, ${c.drawn} with a non-empty box`,
        );
      }

      // Every table fits the column (text cells wrap), so the last run's column is in view.
      const tables = await page.$$eval(".table-wrap", (wraps) =>
        wraps.map((w) => ({
          caption: w.querySelector("caption")?.textContent?.slice(0, 40) ?? "variant legend",
          overflow: w.scrollWidth - w.clientWidth,
          right: Math.max(
            ...[...w.querySelectorAll("thead th")].map((th) => th.getBoundingClientRect().right),
          ),
        })),
      );
      assert.ok(tables.length >= 6);
      const wideTables = tables
        .filter((x) => x.overflow > 0 || x.right > 800)
        .map((x) => `${x.caption}: ${x.overflow} px over, last column ends at ${x.right} px`);
      assert.deepEqual(wideTables, [], "tables wider than the page at 800 px");

      const shot = join(work, "report.png");
      await page.screenshot({ path: shot, fullPage: true });
      assert.ok(statSync(shot).size > 10_000);
      t.diagnostic(`screenshot: ${shot}`);
      const wanted = process.env.ATTNLIP_SCREENSHOT;
      if (wanted) {
        mkdirSync(dirname(resolve(wanted)), { recursive: true });
        copyFileSync(shot, resolve(wanted));
        t.diagnostic(`screenshot copied to ${resolve(wanted)}`);
      }
    } finally {
      await context.close();
    }
  },
);
