// attnlip explore: what the page computes (src/explorer/compute.ts, checked here in Node), the
// command's static folder and its refusals, and the page itself in headless Chromium (Debian's,
// through playwright-core, as the report's browser test): the playground's sigma, a held-out
// digit's prediction, every bound at or above the true value, the attention maps, an attack,
// no error and no request outside the page's server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
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
import { explorerFiles, serveExplorer } from "../../src/pipelines/exploreRun.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";
import { HANG_MS, TEST_BACKSTOP_MS } from "../helpers/patience.ts";

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

    const clean = r.predicted;
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

test("the page loads a Hugging Face ViT folder's bytes as loadHfModel loads the folder; other image sizes are refused", async () => {
  await useBackend("cpu");
  const dir = "test/fixtures/hf/vit-tiny-random";
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
  const model = modelFromBytes(
    config,
    readFileSync(join(dir, "model.safetensors")),
    "vit-tiny-random",
  );
  const { model: fromFolder } = await loadHfModel(dir, "explore");
  try {
    const x = tf.tensor4d(Float32Array.from(digit(5)), [1, 28, 28, 1]);
    const a = tf.tidy(() => model.forward(x).logits).dataSync();
    const b = tf.tidy(() => fromFolder.forward(x).logits).dataSync();
    x.dispose();
    assert.deepEqual(Array.from(a), Array.from(b));
    assert.equal(inspect(model, digit(5)).layers.length, model.config.blocks + 1);
    assert.throws(
      () => modelFromBytes({ ...config, image_size: 35 }, new Uint8Array(8), "big-vit"),
      /explore: big-vit reads 35x35x1 images; the explorer draws 28x28 grey digits/,
    );
    assert.throws(
      () => modelFromBytes({ ...config, architectures: ["ViTMAEModel"] }, new Uint8Array(8), "mae"),
      /explore: mae: architecture ViTMAEModel is not supported/,
    );
  } finally {
    model.dispose();
    fromFolder.dispose();
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
    assert.match(r.stdout, /^wrote .*site\/ \(12 files/);
    for (const f of [
      "index.html",
      "page.js",
      "charts.js",
      "worker.js",
      "webgl.js",
      "tfjs-backend-wasm.wasm",
      "tfjs-backend-wasm-simd.wasm",
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
    // A text model the page cannot read texts for: a Hugging Face BERT without its tokenizer.json.
    const noTokenizer = join(dir, "bert-no-tokenizer");
    mkdirSync(noTokenizer);
    for (const f of ["config.json", "model.safetensors"])
      writeFileSync(
        join(noTokenizer, f),
        readFileSync(join("test/fixtures/hf/bert-tiny-random", f)),
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
        ["explore", noTokenizer, "--out", join(dir, "y")],
        /^attnlip: explore: .*bert-no-tokenizer: no tokenizer.json; attnlip reads texts with the model's own tokenizer/,
      ],
    ];
    for (const [args, message] of cases) {
      const bad = await runAttnlipHere(args);
      assert.equal(bad.code, 2, `${args.join(" ")}: ${bad.stderr}`);
      assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
      assert.match(bad.stderr.trim(), message);
    }
    // A server closes at once though a client holds connections open: one that has sent half a
    // request and one that has sent none (as browsers preconnect); the command's Ctrl-C.
    const served = await serveExplorer(
      new Map([["index.html", "<!doctype html>"]]),
      "127.0.0.1",
      0,
    );
    const port = Number(new URL(served.url).port);
    const sockets = await Promise.all(
      ["GET /index.html HTTP/1.1\r\nHost: x\r\n", ""].map(
        (partial) =>
          new Promise<Socket>((resolve) => {
            const socket = connect(port, "127.0.0.1", () => {
              socket.write(partial);
              resolve(socket);
            });
            socket.on("error", () => {});
          }),
      ),
    );
    const closed = await Promise.race([
      served.close().then(() => "closed"),
      new Promise((resolve) => setTimeout(resolve, HANG_MS, "still open").unref()),
    ]);
    for (const s of sockets) s.destroy();
    assert.equal(closed, "closed", "close() waited for the clients' open connections");
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

/** The bounds table of the page: per layer, the true value and each bound (full precision). */
async function pageTable(page: import("playwright-core").Page) {
  return page.$$eval("table.bounds tr[data-layer]", (rows) =>
    rows.map((r) => ({
      layer: (r as HTMLElement).dataset.layer!,
      truth: Number((r as HTMLElement).dataset.true),
      bounds: [...r.querySelectorAll("td[data-bound]")].map((c) =>
        Number((c as HTMLElement).dataset.bound),
      ),
    })),
  );
}

/** Waits until the page has finished its k-th analysis (body[data-analyses]). */
async function analysed(page: import("playwright-core").Page, k: number): Promise<void> {
  await page.waitForFunction((want) => Number(document.body.dataset.analyses ?? 0) >= want, k, {
    timeout: HANG_MS,
  });
}

/**
 * Checks the page's table and prediction against Node's inspect() of the same model at the
 * pixels the page analysed: the web worker runs the library entry bundled for the browser, so
 * on the cpu backend the numbers agree to the last bits (1e-12: the browser's V8 may round a
 * Math function differently), and on wasm (the page's default; the same XNNPACK binary, whose
 * threads and SIMD paths may sum in another order) to 1e-9.
 */
async function sameAsNode(
  page: import("playwright-core").Page,
  config: unknown,
  weights: Uint8Array,
  what: string,
  { backend = "wasm", tolerance = 1e-9 }: { backend?: "cpu" | "wasm"; tolerance?: number } = {},
): Promise<number[]> {
  const pixels = JSON.parse((await page.getAttribute("#input", "data-pixels"))!) as number[];
  await useBackend(backend);
  const model = modelFromBytes(config, weights);
  const inNode = inspect(model, pixels);
  model.dispose();
  const table = await pageTable(page);
  assert.deepEqual(
    table.map((r) => r.layer),
    inNode.layers.map((l) => l.name),
    what,
  );
  const near = (a: number, b: number) => Math.abs(a - b) <= tolerance * Math.max(1, Math.abs(b));
  table.forEach((r, l) => {
    const node = inNode.layers[l];
    assert.ok(r.truth > 0 && r.bounds.length >= 10, `${what}: ${r.layer}`);
    assert.ok(
      r.bounds.every((b) => b >= r.truth * (1 - 1e-9)),
      `${what}: ${r.layer}: a bound below the true value`,
    );
    assert.ok(
      near(r.truth, node.true),
      `${what}: ${r.layer} true: ${r.truth} in the browser, ${node.true} in Node`,
    );
    Object.values(node.bounds).forEach((b, k) =>
      assert.ok(
        near(r.bounds[k], b!),
        `${what}: ${r.layer} bound ${k}: ${r.bounds[k]} in the browser, ${b} in Node`,
      ),
    );
  });
  const predicted = inNode.predicted;
  assert.equal(Number(await page.textContent("#predicted")), predicted, `${what}: prediction`);
  return pixels;
}

test(
  "the explorer in headless Chromium: a row's sigma, a drawn digit, a picked digit and a picked checkpoint analysed as in Node, an attack; no errors",
  { skip, timeout: TEST_BACKSTOP_MS },
  async () => {
    assert.ok(!missing, `${CHROMIUM} is missing; CI must install it (.ci/install-chromium)`);
    const files = await explorerFiles(undefined, 4);
    const bundledConfig = JSON.parse(files.get("model/config.json") as string);
    const bundledWeights = files.get("model/model.safetensors") as Uint8Array;
    const { url, close } = await serveExplorer(files, "127.0.0.1", 0);
    // A checkpoint to pick on the page: another vit-micro (random, seed 7), as attnlip writes it.
    const picked = join(mkdtempSync(join(tmpdir(), "attnlip-explore-pick-")), "my-vit");
    mkdirSync(picked);
    const other = createModel("vit-micro", 7) as TransformerClassifier;
    const otherConfig = JSON.parse(JSON.stringify(other.config));
    const otherWeights = encodeSafetensors(other.getWeights());
    other.dispose();
    writeFileSync(join(picked, "config.json"), JSON.stringify(otherConfig));
    writeFileSync(join(picked, "model.safetensors"), otherWeights);
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      // WebGL from SwiftShader (software), for the WebGL backend's check.
      args: ["--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
      page.setDefaultTimeout(HANG_MS); // waits catch hangs, not slowness
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
      await analysed(page, 1); // the first held-out digit, on load

      // The playground: probabilities as given (normalised), sigma exact.
      await page.selectOption("#row-mode", "probabilities");
      await page.fill("#row", "0.5, 0.3, 0.2");
      await page.waitForFunction(
        (want) => document.querySelector("#sigma-exact")?.textContent === want,
        formatNumber(sigma([0.5, 0.3, 0.2])),
      );

      // A digit drawn with mouse strokes (a "7").
      const box = (await page.locator("#draw").boundingBox())!;
      const stroke = async (points: [number, number][]) => {
        await page.mouse.move(box.x + points[0][0] * box.width, box.y + points[0][1] * box.height);
        await page.mouse.down();
        for (const [x, y] of points.slice(1))
          await page.mouse.move(box.x + x * box.width, box.y + y * box.height, { steps: 8 });
        await page.mouse.up();
      };
      await stroke([
        [0.25, 0.2],
        [0.75, 0.2],
        [0.45, 0.85],
      ]);
      await analysed(page, 2);
      const drawn = await sameAsNode(page, bundledConfig, bundledWeights, "drawn digit");
      assert.ok(drawn.filter((v) => v > 0.5).length > 20, "the strokes reached the model's input");

      // A held-out test digit, picked.
      await page.click("canvas.digit[data-index='2']");
      await analysed(page, 3);
      assert.match((await page.textContent("#prediction"))!, /true label \d/);
      const digit2 = await sameAsNode(page, bundledConfig, bundledWeights, "held-out digit 2");

      // A checkpoint folder picked with the file picker replaces the model and reanalyses.
      await page.setInputFiles("#folder", picked);
      await analysed(page, 4);
      assert.equal(await page.textContent("#model-name"), "my-vit");
      assert.deepEqual(
        await sameAsNode(page, otherConfig, otherWeights, "picked checkpoint"),
        digit2,
      );

      // The attack panel: PGD at eps 0.1, 3 steps; the margin at eps 0.1 as Node computes it.
      await page.fill("#steps", "3");
      await page.click("#run-attack");
      await page.waitForSelector("#adv-margin");
      await useBackend("cpu");
      const model = modelFromBytes(otherConfig, otherWeights);
      const label2 = (JSON.parse(files.get("digits.json") as string) as { label: number }[])[2]
        .label;
      const inNode = attackCurve(
        model,
        digit2,
        label2,
        "pgd",
        Array.from({ length: 9 }, (_, i) => (0.1 * i) / 8),
        3,
      );
      model.dispose();
      assert.equal(Number(await page.textContent("#adv-predicted")), inNode.points[8].predicted);
      assert.ok(
        Math.abs(Number(await page.textContent("#adv-margin")) - inNode.points[8].margin) <=
          1e-3 * Math.max(1, Math.abs(inNode.points[8].margin)),
        "the margin as in Node (to the 4 digits shown)",
      );
      assert.ok(
        (await page.$$("#maps svg")).length === 1 &&
          (await page.$$("#row-sigma svg")).length === 1 &&
          (await page.$$("#margins svg")).length === 1,
        "charts drawn",
      );
      // A Hugging Face ViT folder, picked the same way.
      const hfDir = "test/fixtures/hf/vit-tiny-random";
      const hfPicked = join(picked, "..", "vit-tiny-random");
      mkdirSync(hfPicked);
      for (const f of ["config.json", "model.safetensors"])
        writeFileSync(join(hfPicked, f), readFileSync(join(hfDir, f)));
      await page.setInputFiles("#folder", hfPicked);
      await analysed(page, 5);
      assert.equal(await page.textContent("#model-name"), "vit-tiny-random");
      await sameAsNode(
        page,
        JSON.parse(readFileSync(join(hfDir, "config.json"), "utf8")),
        readFileSync(join(hfDir, "model.safetensors")),
        "picked Hugging Face folder",
      );

      // The digits stay the bundled model's held-out digits, and the page says so.
      assert.match(
        (await page.textContent("#digits-note"))!,
        /not necessarily from vit-tiny-random's/,
      );
      // Bad picks and bad entries: the status line or the playground says what is wrong, and
      // the loaded model stays.
      const statusIs = (re: RegExp) =>
        page.waitForFunction(
          (source) => new RegExp(source).test(document.getElementById("status")?.textContent ?? ""),
          re.source,
          { timeout: HANG_MS },
        );
      const onlyConfig = join(picked, "..", "only-config");
      mkdirSync(onlyConfig);
      writeFileSync(join(onlyConfig, "config.json"), readFileSync(join(hfDir, "config.json")));
      await page.setInputFiles("#folder", onlyConfig);
      await statusIs(/^error: only-config: no model\.safetensors; the folder needs/);
      const notJson = join(picked, "..", "not-json");
      mkdirSync(notJson);
      writeFileSync(join(notJson, "config.json"), "{ not json");
      writeFileSync(
        join(notJson, "model.safetensors"),
        readFileSync(join(hfDir, "model.safetensors")),
      );
      await page.setInputFiles("#folder", notJson);
      await statusIs(/^error: not-json: config\.json is not valid JSON \(.+\)$/);
      // A folder that did not load is not left shown as chosen.
      await page.waitForFunction(
        () => (document.getElementById("folder") as HTMLInputElement).files?.length === 0,
      );
      assert.equal(await page.textContent("#model-name"), "vit-tiny-random");
      await page.fill("#steps", "");
      await page.click("#run-attack");
      await statusIs(/^error: PGD steps must be a whole number from 1 to 100, got ""$/);
      await page.fill("#steps", "101");
      await page.click("#run-attack");
      await statusIs(/^error: PGD steps must be a whole number from 1 to 100, got "101"$/);
      await page.fill("#steps", "10");
      await page.fill("#row", "1,,2");
      assert.match((await page.textContent("#row-out"))!, /an entry is empty/);
      await page.fill("#row", "1e309, 0");
      assert.match((await page.textContent("#row-out"))!, /"1e309" is not a finite number/);
      await page.fill("#row", "0.5, 0.3, 0.2");

      // Other tfjs backends: cpu computes exactly what Node's cpu backend computes. WebGL: the worker loads webgl.js and starts the backend; its
      // numbers are checked in test/browser/core.test.ts (a whole analysis on Chromium's
      // software WebGL compiles many shaders: ~20 s of CPU).
      const hfConfig = JSON.parse(readFileSync(join(hfDir, "config.json"), "utf8"));
      const hfWeights = readFileSync(join(hfDir, "model.safetensors"));
      await page.selectOption("#backend", "cpu");
      await analysed(page, 6);
      await sameAsNode(page, hfConfig, hfWeights, "cpu backend", {
        backend: "cpu",
        tolerance: 1e-12,
      });
      await page.selectOption("#backend", "webgl");
      await page.waitForFunction(() => document.body.dataset.backend === "webgl", undefined, {
        timeout: HANG_MS,
      });
      await useBackend("cpu");
      assert.deepEqual(problems, []);

      // Without charts.js (a static folder copied in part): the status line says why the
      // charts are missing, and the analysis itself is still shown.
      const partial = new Map(files);
      partial.delete("charts.js");
      const broken = await serveExplorer(partial, "127.0.0.1", 0);
      try {
        const page2 = await browser.newPage();
        page2.setDefaultTimeout(HANG_MS); // waits catch hangs, not slowness
        await page2.goto(broken.url);
        await page2.waitForFunction(
          () =>
            /^error: charts\.js did not load/.test(
              document.getElementById("status")?.textContent ?? "",
            ),
          undefined,
          { timeout: HANG_MS },
        );
        await page2.waitForFunction(
          () => document.getElementById("predicted") !== null,
          undefined,
          { timeout: HANG_MS },
        );
      } finally {
        await broken.close();
      }
    } finally {
      await browser.close();
      await close();
    }
  },
);
