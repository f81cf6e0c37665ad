// What the explorer page shows after a user changes something, in headless Chromium (Debian's,
// through playwright-core, as the other explorer tests): a picked digit is drawn on the drawing
// canvas; an attack's result goes when another model or another input comes; a model with 4
// heads has every map, every row-sigma panel and the colour legend inside their panels; a
// probability row that does not sum to 1 is refused as `attnlip sigma` refuses it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { explorerFiles, serveExplorer } from "../../src/pipelines/exploreRun.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { createModel } from "../../src/nn/create.ts";
import { modelPreset } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { useBackend } from "../../src/backend.ts";
import { runAttnlipHere } from "../helpers/cli.ts";
import { HANG_MS, TEST_BACKSTOP_MS } from "../helpers/patience.ts";

const CHROMIUM = "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
const skip =
  missing && !process.env.CI
    ? `${CHROMIUM} is missing (install it with .ci/install-chromium)`
    : false;

test(
  "the explorer page after a change: a picked digit on the canvas, no stale attack after another model or input, 4 heads inside their panels, an unnormalised row refused as the CLI refuses it",
  { skip, timeout: TEST_BACKSTOP_MS },
  async () => {
    assert.ok(!missing, `${CHROMIUM} is missing; CI must install it (.ci/install-chromium)`);
    const files = await explorerFiles(undefined, 4);
    const digits = JSON.parse(files.get("digits.json") as string) as { pixels: number[] }[];
    const { url, close } = await serveExplorer(files, "127.0.0.1", 0);
    // A folder to pick: a random vit-micro with 4 heads.
    const work = mkdtempSync(join(tmpdir(), "attnlip-explore-state-"));
    const folder = join(work, "four-heads");
    mkdirSync(folder);
    await useBackend("cpu");
    const four = createModel(
      { ...modelPreset("vit-micro"), heads: 4 } as never,
      3,
    ) as TransformerClassifier;
    writeFileSync(join(folder, "config.json"), JSON.stringify(four.config));
    writeFileSync(join(folder, "model.safetensors"), encodeSafetensors(four.getWeights()));
    four.dispose();
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu"],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
      page.setDefaultTimeout(HANG_MS); // waits catch hangs, not slowness
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(m.text());
      });
      const analysed = (k: number) =>
        page.waitForFunction((want) => Number(document.body.dataset.analyses ?? 0) >= want, k, {
          timeout: HANG_MS,
        });
      /** The drawing canvas averaged to 28 x 28, as the page reads a drawing. */
      const canvasDigit = () =>
        page.evaluate(() => {
          const c = document.getElementById("draw") as HTMLCanvasElement;
          const data = c.getContext("2d")!.getImageData(0, 0, 280, 280).data;
          const out = new Array<number>(784).fill(0);
          for (let y = 0; y < 280; y++)
            for (let x = 0; x < 280; x++)
              out[Math.floor(y / 10) * 28 + Math.floor(x / 10)] += data[(y * 280 + x) * 4] / 25500;
          return out;
        });
      const near = (a: number[], b: number[]) => a.every((v, i) => Math.abs(v - b[i]) <= 1 / 255);
      const attacked = async () => {
        await page.fill("#steps", "2");
        await page.click("#run-attack");
        await page.waitForSelector("#adv-margin", { timeout: HANG_MS });
      };
      const attackShown = async () =>
        ((await page.textContent("#attack-out")) ?? "") !== "" ||
        (await page.$$("#margins svg")).length > 0;

      await page.goto(url);
      await analysed(1);
      assert.ok(near(await canvasDigit(), digits[0].pixels), "the first digit, on the canvas");

      // A picked digit replaces the drawing, and the attack of the old input goes.
      await attacked();
      await page.click("canvas.digit[data-index='2']");
      await analysed(2);
      assert.ok(near(await canvasDigit(), digits[2].pixels), "the picked digit, on the canvas");
      assert.equal(await attackShown(), false, "the attack of the previous digit is gone");

      // Another model: its attack panel starts empty; its 4 heads fit their panels.
      await attacked();
      await page.setInputFiles("#folder", folder);
      await analysed(3);
      assert.equal(await page.textContent("#model-name"), "four-heads");
      assert.equal(await attackShown(), false, "the attack of the previous model is gone");
      for (const id of ["maps", "row-sigma"]) {
        const fit = await page.$eval(`#${id}`, (div) => {
          const svg = div.querySelector("svg")!;
          const panel = div.closest("section")!;
          return {
            svg: svg.getBoundingClientRect().right,
            panel: panel.getBoundingClientRect().right,
            overflow: panel.scrollWidth - panel.clientWidth,
            texts: [...svg.querySelectorAll("text")].map((t) => t.textContent),
          };
        });
        assert.ok(
          fit.svg <= fit.panel && fit.overflow <= 0,
          `${id}: ${JSON.stringify(fit).slice(0, 120)}`,
        );
        for (const h of [0, 1, 2, 3])
          assert.ok(fit.texts.includes(`head ${h}`), `${id}: head ${h}`);
        if (id === "maps") assert.ok(fit.texts.includes("probability"), "the colour legend");
      }

      // A probability row must sum to 1 within the CLI's tolerance, with the CLI's words.
      const cli = await runAttnlipHere(["sigma", "0.5,0.3,0.3"]);
      assert.equal(cli.code, 2);
      const refusal = /row: entries sum to [\d.]+, expected 1 within [\d.e-]+/.exec(
        cli.stderr,
      )?.[0];
      assert.ok(refusal !== undefined, cli.stderr);
      await page.selectOption("#row-mode", "probabilities");
      await page.fill("#row", "0.5, 0.3, 0.3");
      assert.equal(
        await page.textContent("#row-out"),
        `${refusal} (tick "rescale probabilities to sum 1" to rescale)`,
      );
      await page.fill("#row", "0.5, 0.3, 0.2000001"); // within 1e-6, as the CLI accepts it
      assert.match((await page.textContent("#row-out"))!, /^p0\.5, 0\.3, 0\.2/);
      await page.fill("#row", "0.5, 0.3, 0.3");
      await page.check("#normalize"); // the page's --normalize
      assert.match((await page.textContent("#row-out"))!, /^p0\.4545, 0\.2727, 0\.2727/);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await close();
      rmSync(work, { recursive: true, force: true });
    }
  },
);
