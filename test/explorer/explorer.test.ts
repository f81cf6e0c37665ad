// attnlip explore: what the page computes (src/explorer/compute.ts, checked here in Node), the
// command's static folder and its refusals, and the page itself in headless Chromium (Debian's,
// through playwright-core, as the report's browser test): the playground's sigma, a held-out
// digit's prediction, every bound at or above the true value, the attention maps, an attack,
// no error and no request outside the page's server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useBackend, tf } from "../../src/backend.ts";
import { attackCurve, inspect, modelFromBytes } from "../../src/explorer/compute.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { createModel } from "../../src/nn/create.ts";
import { modelPreset } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { sigma } from "../../src/softmax/sigma.ts";
import { formatNumber } from "../../src/util/format.ts";
import { explorerFiles, serveExplorer } from "../../src/cli/exploreRun.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

const CHROMIUM = "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
const skip =
  missing && !process.env.CI
    ? `${CHROMIUM} is missing (install it with .ci/install-chromium)`
    : false;

/** A random vit-micro sent through the page's loading path: config object and safetensors bytes. */
function pageModel(): TransformerClassifier {
  const original = createModel("vit-micro", 3) as TransformerClassifier;
  const model = modelFromBytes(
    JSON.parse(JSON.stringify(original.config)),
    encodeSafetensors(original.getWeights()),
  );
  original.dispose();
  return model;
}

function digit(seed: number): number[] {
  let s = seed;
  return Array.from(
    { length: 784 },
    () => ((s = (s * 1103515245 + 12345) % 2147483648), s / 2147483648),
  );
}

test("the page's computations: every bound at or above the true value, attention rows with their sigma, an attack's margins", async () => {
  await useBackend("cpu");
  const model = pageModel();
  try {
    const r = inspect(model, digit(1));
    assert.equal(r.probabilities.length, 10);
    assert.ok(Math.abs(r.probabilities.reduce((a, b) => a + b, 0) - 1) < 1e-5);
    assert.deepEqual(
      r.layers.map((l) => l.name),
      ["block 0", "network"],
    );
    for (const l of r.layers) {
      assert.ok(l.true > 0, l.name);
      assert.ok(Object.keys(l.bounds).length >= 10, `${l.name}: every variant`);
      for (const [v, b] of Object.entries(l.bounds))
        assert.ok(b! >= l.true * (1 - 1e-9), `${l.name} ${v}: ${b} below the true ${l.true}`);
    }
    assert.equal(r.n, 17);
    assert.equal(r.maps[0].length, 2);
    const row = r.maps[0][1].slice(5 * 17, 6 * 17);
    assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-5);
    assert.equal(r.rowSigma[0][1][5], sigma(row));

    const clean = r.probabilities.indexOf(Math.max(...r.probabilities));
    const { points, adversarial } = attackCurve(model, digit(1), clean, "pgd", [0, 0.05, 0.2], 5);
    assert.deepEqual(
      points.map((p) => p.eps),
      [0, 0.05, 0.2],
    );
    assert.equal(points[0].predicted, clean);
    assert.ok(points[0].margin >= 0, "the clean margin against the clean prediction");
    assert.ok(points[2].margin < points[0].margin, "PGD lowers the margin");
    const x = digit(1);
    assert.ok(
      adversarial.every((v, i) => v >= 0 && v <= 1 && Math.abs(v - x[i]) <= 0.2 + 1e-6),
      "inside the ball and [0, 1]",
    );
    assert.throws(
      () => inspect(model, new Array(10).fill(0)),
      /explore: an image of 784 values was expected, got 10/,
    );
    assert.throws(
      () =>
        inspect(
          model,
          digit(1).map((v, i) => (i === 3 ? 2 : v)),
        ),
      /explore: pixel 3 is 2, outside \[0, 1\]/,
    );
    assert.throws(
      () => modelFromBytes(modelPreset("text-micro"), new Uint8Array(8)),
      /the explorer shows image models/,
    );
  } finally {
    model.dispose();
    tf.disposeVariables();
  }
});

test("attnlip explore --out writes the page as a static folder, refuses to replace it without --force, and bad input exits 2 with one line", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-explore-"));
  try {
    const out = join(dir, "site");
    // One real process (a refusal, before any work); the rest in this one, which bundles the page once.
    const spawned = runAttnlip(["explore", "--port", "70000"]);
    assert.equal(spawned.code, 2, spawned.stderr);
    assert.equal(
      spawned.stderr,
      'attnlip: explore: --port: must be an integer from 0 to 65535, got "70000"\n',
    );
    const r = await runAttnlipHere(["explore", "--out", out, "--digits", "3"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^wrote .*site\/ \(7 files/);
    for (const f of [
      "index.html",
      "page.js",
      "worker.js",
      "model/config.json",
      "model/model.safetensors",
      "model/info.json",
      "digits.json",
    ])
      assert.ok(existsSync(join(out, f)), f);
    const digits = JSON.parse(readFileSync(join(out, "digits.json"), "utf8")) as {
      pixels: number[];
      label: number;
    }[];
    assert.equal(digits.length, 3);
    assert.equal(digits[0].pixels.length, 784);
    const info = JSON.parse(readFileSync(join(out, "model/info.json"), "utf8")) as {
      split: { origin: string };
    };
    assert.equal(
      info.split.origin,
      "checkpoint",
      "the digits are the bundled model's held-out test digits",
    );
    const cases: [string[], RegExp][] = [
      [
        ["explore", "--out", out],
        /^attnlip: explore: .*site\/index\.html exists \(an earlier result\); give --force to replace it/,
      ],
      [
        ["explore", "--port", "abc"],
        /^attnlip: explore: --port: must be an integer from 0 to 65535, got "abc"$/,
      ],
      [
        ["explore", "--digits", "0", "--out", join(dir, "x")],
        /^attnlip: explore: --digits: must be an integer from 1 to 100, got "0"$/,
      ],
      [["explore", "--force"], /^attnlip: explore: --force only applies with --out DIR$/],
      [["explore", join(dir, "nope")], /^attnlip: checkpoint .*nope: no such folder$/],
      [
        ["explore", "test/fixtures/hf/bert-tiny-random", "--out", join(dir, "y")],
        /^attnlip: explore: test\/fixtures\/hf\/bert-tiny-random is a text model; the explorer shows image models/,
      ],
    ];
    for (const [args, message] of cases) {
      const bad = await runAttnlipHere(args);
      assert.equal(bad.code, 2, `${args.join(" ")}: ${bad.stderr}`);
      assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
      assert.match(bad.stderr.trim(), message);
    }
    const forced = await runAttnlipHere([
      "explore",
      "test/fixtures/hf/vit-tiny-random",
      "--out",
      out,
      "--force",
      "--digits",
      "2",
    ]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(
      (JSON.parse(readFileSync(join(out, "digits.json"), "utf8")) as unknown[]).length,
      2,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  "the explorer page works in headless Chromium: playground, a held-out digit, bounds at or above the truth, maps, an attack",
  { skip, timeout: 120_000 },
  async () => {
    assert.ok(!missing, `${CHROMIUM} is missing; CI must install it (.ci/install-chromium)`);
    const files = await explorerFiles(undefined, 4);
    const { url, close } = await serveExplorer(files, "127.0.0.1", 0);
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu"],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(m.text());
      });
      page.on("request", (r) => {
        if (!r.url().startsWith(url) && !r.url().startsWith("data:"))
          problems.push(`request outside the page's server: ${r.url()}`);
      });
      await page.goto(url);
      // The playground: probabilities as given (normalised), sigma exact.
      await page.selectOption("#row-mode", "probabilities");
      await page.fill("#row", "0.5, 0.3, 0.2");
      await page.waitForFunction(
        (want) => document.querySelector("#sigma-exact")?.textContent === want,
        formatNumber(sigma([0.5, 0.3, 0.2])),
      );
      // The first digit is shown on load; then another is picked.
      await page.waitForSelector("table.bounds");
      await page.click("canvas.digit[data-index='2']");
      await page.waitForFunction(
        () =>
          /true label \d/.test(document.querySelector("#prediction")?.textContent ?? "") &&
          /analysed/.test(document.querySelector("#status")?.textContent ?? ""),
      );
      const table = await page.$$eval("table.bounds tr[data-layer]", (rows) =>
        rows.map((r) => ({
          layer: (r as HTMLElement).dataset.layer!,
          truth: Number((r as HTMLElement).dataset.true),
          bounds: [...r.querySelectorAll("td[data-bound]")].map((c) =>
            Number((c as HTMLElement).dataset.bound),
          ),
        })),
      );
      assert.deepEqual(
        table.map((r) => r.layer),
        ["block 0", "network"],
      );
      for (const r of table) {
        assert.ok(r.truth > 0 && r.bounds.length >= 10, r.layer);
        assert.ok(
          r.bounds.every((b) => b >= r.truth * (1 - 1e-9)),
          `${r.layer}: a bound below the true value`,
        );
      }
      // The page's web worker computed what Node computes from the same model and digit (the
      // library entry, bundled for the browser): to 1e-12, as the browser's V8 may round a
      // Math function differently in the last bit.
      await useBackend("cpu");
      const model = modelFromBytes(
        JSON.parse(files.get("model/config.json") as string),
        files.get("model/model.safetensors") as Uint8Array,
      );
      const inNode = inspect(
        model,
        (JSON.parse(files.get("digits.json") as string) as { pixels: number[] }[])[2].pixels,
      );
      model.dispose();
      const near = (a: number, b: number) => Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b));
      table.forEach((r, l) => {
        const node = inNode.layers[l];
        assert.ok(
          near(r.truth, node.true),
          `${r.layer} true: ${r.truth} in the browser, ${node.true} in Node`,
        );
        Object.values(node.bounds).forEach((b, k) =>
          assert.ok(
            near(r.bounds[k], b!),
            `${r.layer} bound ${k}: ${r.bounds[k]} in the browser, ${b} in Node`,
          ),
        );
      });
      assert.ok(
        (await page.$$("#maps svg")).length === 1 && (await page.$$("#row-sigma svg")).length === 1,
        "maps and row sigma drawn",
      );
      // The attack panel.
      await page.fill("#steps", "3");
      await page.click("#run-attack");
      await page.waitForSelector("#adv-margin");
      assert.ok(Number.isFinite(Number(await page.textContent("#adv-margin"))));
      assert.ok((await page.$$("#margins svg")).length === 1);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await close();
    }
  },
);
