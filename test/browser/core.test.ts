// The library entry ("attnlip", src/index.ts) bundles for the browser: esbuild, with the browser
// as platform, fails on a Node built-in anywhere in its imports, its dependencies' included
// (test/architecture/imports.test.ts checks attnlip's own files; this checks the packages they
// use too). That the bundled code computes in a browser what it computes in Node is checked by
// the explorer's browser test (test/explorer/explorer.test.ts), whose web worker runs it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { HANG_MS, TEST_BACKSTOP_MS } from "../helpers/patience.ts";

test("the library entry bundles for the browser: no Node built-in in it or in the packages it uses", async () => {
  const result = await build({
    entryPoints: [fileURLToPath(new URL("../../src/index.ts", import.meta.url))],
    bundle: true,
    platform: "browser",
    format: "esm",
    write: false,
    logLevel: "silent",
  });
  assert.deepEqual(result.errors, []);
  const code = result.outputFiles[0].text;
  assert.match(code, /function sigma\(/, "the bundle holds the maths");
  assert.doesNotMatch(code, /from\s*"node:|require\("node:/);
});

const CHROMIUM = "/usr/bin/chromium";

test(
  "in Chromium, the library computes on tfjs's WebGL backend what it computes on cpu: a ViT's logits, its input gradient, attention rows' sigma",
  {
    skip: !existsSync(CHROMIUM) && !process.env.CI ? `${CHROMIUM} is missing` : false,
    timeout: TEST_BACKSTOP_MS,
  },
  async () => {
    const entry = `
      import { createModel, tf, useBackend, sigmaTensor, crossEntropySum } from ${JSON.stringify(fileURLToPath(new URL("../../src/index.ts", import.meta.url)))};
      import "@tensorflow/tfjs-backend-webgl";
      window.compare = async () => {
        const out = {};
        for (const backend of ["cpu", "webgl"]) {
          await useBackend(backend);
          const model = createModel("vit-micro", 1);
          const x = tf.randomUniform([2, 28, 28, 1], 0, 1, "float32", 3);
          const labels = tf.tensor1d([3, 8], "int32");
          const { logits, trace } = model.forward(x, { trace: true });
          const dx = tf.grad((z) => crossEntropySum(model.forward(z).logits, labels))(x);
          out[backend] = {
            logits: Array.from(logits.dataSync()),
            dx: Array.from(dx.dataSync()),
            sigma: Array.from(sigmaTensor(trace.blocks[0].attn.p).dataSync()),
          };
          model.dispose();
        }
        return { ...out, backend: tf.getBackend() };
      };`;
    const bundled = await build({
      stdin: { contents: entry, resolveDir: fileURLToPath(new URL(".", import.meta.url)) },
      bundle: true,
      platform: "browser",
      format: "iife",
      write: false,
      logLevel: "silent",
    });
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    });
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(HANG_MS); // waits catch hangs, not slowness
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      await page.setContent(`<script>${bundled.outputFiles[0].text}</script>`);
      type Values = { logits: number[]; dx: number[]; sigma: number[] };
      const r = (await page.evaluate("window.compare()")) as {
        cpu: Values;
        webgl: Values;
        backend: string;
      };
      assert.equal(r.backend, "webgl");
      assert.deepEqual(errors, []);
      for (const key of ["logits", "dx", "sigma"] as const) {
        const scale = Math.max(...r.cpu[key].map(Math.abs));
        const worst = Math.max(...r.cpu[key].map((v, i) => Math.abs(v - r.webgl[key][i])));
        assert.ok(
          r.cpu[key].length > 0 && worst <= 1e-4 * scale,
          `${key}: differs by ${worst} (scale ${scale})`,
        );
      }
    } finally {
      await browser.close();
    }
  },
);
