// The library entry ("attnlip", src/index.ts) runs in a browser: bundled for the browser by
// esbuild (a Node built-in anywhere in its imports, its dependencies' included, fails the
// bundle), loaded into headless Chromium (Debian's, through playwright-core, as the report's
// browser test), it computes sigma, a vit-micro analysis (every bound variant and the true
// values, tfjs cpu backend), PGD and a safetensors round trip from bytes, and gets the very
// numbers this Node process gets from the same code.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const CHROMIUM = "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
const skip =
  missing && !process.env.CI
    ? `${CHROMIUM} is missing (install it with .ci/install-chromium)`
    : false;
const root = fileURLToPath(new URL("../..", import.meta.url));

/** Every number in a JSON-like value, in key order. */
function numbers(value: unknown): number[] {
  if (typeof value === "number") return [value];
  if (Array.isArray(value)) return value.flatMap(numbers);
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(numbers);
  return [];
}

/** What both sides compute; `lib` is the library entry's module. */
async function check(lib: typeof import("../../src/index.ts")) {
  await lib.useBackend("cpu");
  const { tf } = lib;
  const model = lib.createModel(
    "vit-micro",
    0,
  ) as import("../../src/nn/model.ts").TransformerClassifier;
  const x = tf.randomUniform([2, 28, 28, 1], 0, 1, "float32", 1);
  const analysis = lib.analyze(model, x, { truth: { heads: false, blocks: true } });
  const adversarial = lib.pgd(model, x, [3, 7], { eps: 0.05, steps: 3, seed: 1 });
  const moved = Array.from(await adversarial.data());
  const bytes = lib.encodeSafetensors(
    new Map([["w", { data: new Float32Array([1, -2.5, 3e-8]), shape: [3] }]]),
  );
  const decoded = lib.decodeSafetensors(bytes).tensors.get("w")!;
  tf.dispose([x, adversarial]);
  model.dispose();
  return {
    sigma: lib.sigma([0.5, 0.3, 0.2]),
    top2: lib.sigmaTop2([0.5, 0.3, 0.2]),
    networkTrue: analysis.network.true,
    networkBounds: analysis.network.bounds,
    blockTrue: analysis.blocks.map((b) => b.true),
    adversarialSum: moved.reduce((a, v) => a + v, 0),
    decoded: Array.from(decoded.data),
  };
}

test(
  "the library entry bundles for the browser and computes in Chromium what it computes in Node",
  { skip, timeout: 120_000 },
  async () => {
    assert.ok(!missing, `${CHROMIUM} is missing; CI must install it (.ci/install-chromium)`);
    const bundled = await build({
      stdin: {
        contents: `import * as lib from "./src/index.ts";\nglobalThis.attnlipCheck = () => (${check.toString()})(lib);\n`,
        resolveDir: root,
        loader: "ts",
      },
      bundle: true,
      platform: "browser",
      format: "iife",
      write: false,
      logLevel: "silent",
    });
    const code = bundled.outputFiles[0].text;

    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu"],
    });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(m.text());
      });
      await page.setContent("<!doctype html><title>attnlip core</title>");
      await page.addScriptTag({ content: code });
      const inBrowser = await page.evaluate(() =>
        (globalThis as unknown as { attnlipCheck: () => Promise<unknown> }).attnlipCheck(),
      );
      assert.deepEqual(problems, []);
      const inNode = await check(await import("../../src/index.ts"));
      assert.ok(
        inNode.networkTrue.length === 2 && Object.keys(inNode.networkBounds).length >= 8,
        "the analysis ran",
      );
      // The same numbers up to the last bits: the browser's V8 may round a Math function
      // differently (seen: the blocks' Krylov estimates 1 ulp apart), so 1e-12 relative.
      assert.deepEqual(Object.keys(inBrowser as object), Object.keys(inNode));
      const a = numbers(inBrowser);
      const b = numbers(inNode);
      assert.equal(a.length, b.length);
      a.forEach((v, i) =>
        assert.ok(
          Math.abs(v - b[i]) <= 1e-12 * Math.max(1, Math.abs(b[i])),
          `value ${i}: ${v} in the browser, ${b[i]} in Node`,
        ),
      );
    } finally {
      await browser.close();
    }
  },
);
