// attnlip explore on text models: what the page computes for a text (src/explorer/compute.ts,
// checked in Node against analyze on the same ids), the command's files for a tiny text
// checkpoint trained here (text-micro on a few dozen spam texts, seconds), the tokenizers
// rebuilt on the page, and the page in headless Chromium (one load): a typed text's tokens,
// prediction and bounds as in Node, an attack on the token embeddings, no errors.
import { before, test } from "node:test";
import assert from "node:assert/strict";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { serveExplorer } from "../../src/pipelines/exploreRun.ts";
import { evaluatedModel } from "../../src/pipelines/evaluatedModel.ts";
import {
  inspectText,
  modelFromBytes,
  textAttackCurve,
  tokenize,
  tokenizerFromDocument,
  tokenizerDocument,
  type TokenizerDocument,
} from "../../src/explorer/compute.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { hfTextTokenizer } from "../../src/hf/textTokenizer.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/index.ts";
import { modelPreset, type TextConfig } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { TEXT_INPUTS } from "../../src/robustness/modelInputs/text.ts";
import { runAttnlipHere } from "../helpers/cli.ts";
import { HANG_MS, TEST_BACKSTOP_MS } from "../helpers/patience.ts";

const CHROMIUM = "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
const skip =
  missing && !process.env.CI
    ? `${CHROMIUM} is missing (install it with .ci/install-chromium)`
    : false;

const dir = mkdtempSync(join(tmpdir(), "attnlip-explore-text-"));
const checkpoint = join(dir, "spam-micro");
let files: Map<string, string | Uint8Array>;

before(async () => {
  const trained = await runAttnlipHere([
    "train",
    "--data",
    "spam",
    "--model",
    "text-micro",
    "--epochs",
    "1",
    "--limit",
    "40",
    "--test-limit",
    "12",
    "--backend",
    "cpu",
    "--out",
    checkpoint,
  ]);
  assert.equal(trained.code, 0, trained.stderr);
  // The command writes the page as a static folder; the tests serve what it wrote.
  const site = join(dir, "site");
  const r = await runAttnlipHere(["explore", checkpoint, "--out", site, "--digits", "3"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^wrote .*site\/ \(13 files/);
  files = new Map();
  const read = (folder: string, prefix: string) => {
    for (const name of readdirSync(folder)) {
      const path = join(folder, name);
      if (statSync(path).isDirectory()) read(path, `${prefix}${name}/`);
      else
        files.set(
          prefix + name,
          /\.(safetensors|wasm)$/.test(name) ? readFileSync(path) : readFileSync(path, "utf8"),
        );
    }
  };
  read(site, "");
  assert.deepEqual([...files.keys()].sort(), [
    "charts.js",
    "index.html",
    "model/config.json",
    "model/info.json",
    "model/model.safetensors",
    "model/tokenizer.json",
    "page.js",
    "texts.json",
    "tfjs-backend-wasm-simd.wasm",
    "tfjs-backend-wasm-threaded-simd.wasm",
    "tfjs-backend-wasm.wasm",
    "webgl.js",
    "worker.js",
  ]);
});

process.on("exit", () => rmSync(dir, { recursive: true, force: true }));

/** The page's model and tokenizer, from the command's files as the worker builds them. */
function pageModel(): {
  model: TransformerClassifier;
  tok: ReturnType<typeof tokenizerFromDocument>;
} {
  const config = JSON.parse(files.get("model/config.json") as string) as TextConfig;
  const model = modelFromBytes(
    config,
    files.get("model/model.safetensors") as Uint8Array,
    "spam-micro",
    "text",
  );
  const doc = JSON.parse(files.get("model/tokenizer.json") as string) as TokenizerDocument;
  return { model, tok: tokenizerFromDocument(doc, config) };
}

const near = (a: number, b: number, rel = 1e-9) =>
  Math.abs(a - b) <= rel * Math.max(1, Math.abs(b));

test("the command's held-out texts are analyze's; inspectText agrees with analyze on the same ids; the attack on token embeddings lowers the margin", async () => {
  await useBackend("cpu");
  const info = JSON.parse(files.get("model/info.json") as string) as {
    kind: string;
    classNames: string[];
    split: { origin: string };
  };
  assert.equal(info.kind, "text");
  assert.deepEqual(info.classNames, ["ham", "spam"]);
  assert.equal(info.split.origin, "checkpoint", "the checkpoint's own held-out split");
  assert.match(files.get("index.html") as string, /<body data-kind="text">/);
  const examples = JSON.parse(files.get("texts.json") as string) as {
    text: string;
    label: number;
    ids: number[];
  }[];
  assert.equal(examples.length, 3);

  // analyze's inputs for this checkpoint (robustness/modelInputs/text.ts, as runAnalyze loads them).
  const loaded = await evaluatedModel("analyze", checkpoint, "text-micro", 0);
  const inputs = await TEXT_INPUTS.load(
    loaded.model,
    { who: "analyze", data: undefined, trained: loaded.trained, imported: false, seed: 0, n: 3 },
    { tokenizer: loaded.tokenizer, labels: null },
  );
  const { model, tok } = pageModel();
  try {
    const [count, width] = inputs.x.shape as number[];
    const rows = inputs.x.arraySync() as number[][];
    assert.equal(count, 3);
    assert.deepEqual(
      Array.from(inputs.labels),
      examples.map((e) => e.label),
    );
    examples.forEach((e, i) => {
      assert.deepEqual(rows[i].slice(0, e.ids.length), e.ids, `held-out text ${i}: ids`);
      assert.ok(
        rows[i].slice(e.ids.length).every((id) => id === 0),
        "then padding",
      );
      assert.deepEqual(tokenize(tok, e.text).ids, e.ids, `text ${i} tokenized on the page`);
    });
    assert.ok(width <= 48);

    // A typed text, as the page reads it, against analyze on the same ids with their mask.
    const text = "Free money!!! Click here to claim your prize: reply now.";
    const t = tokenize(tok, text);
    assert.equal(t.tokens[0], "[CLS]");
    assert.deepEqual(t.tokens, loaded.tokenizer!.decode(t.ids));
    const r = inspectText(model, t.ids);
    const ids = tf.tensor2d(Int32Array.from(t.ids), [1, t.ids.length], "int32");
    const mask = tf.ones([1, t.ids.length]);
    const a = analyze(loaded.model, ids, {
      mask,
      truth: { heads: false, blocks: true, network: true },
      maxIterations: 300,
    });
    const logits = tf.tidy(() => tf.softmax(loaded.model.forward(ids, { mask }).logits)).dataSync();
    tf.dispose([ids, mask]);
    assert.equal(r.n, t.ids.length);
    assert.ok(Math.abs(r.probabilities[1] - logits[1]) < 1e-6);
    const network = r.layers.at(-1)!;
    assert.ok(near(network.true, a.network.true[0]), `${network.true} vs ${a.network.true[0]}`);
    for (const v of HEAD_VARIANTS)
      if (v in a.network.bounds) {
        assert.ok(near(network.bounds[v]!, a.network.bounds[v][0]), v);
        assert.ok(near(r.layers[0].bounds[v]!, a.blocks[0].bounds[v][0]), `block 0 ${v}`);
        assert.ok(network.bounds[v]! >= network.true * (1 - 1e-9), `${v} below the true value`);
      }
    assert.equal(r.maps[0].length, 2);
    assert.ok(Math.abs(r.maps[0][1].slice(0, r.n).reduce((x, y) => x + y, 0) - 1) < 1e-5);

    // Held-out text 0 read alone (no padding) or in analyze's padded batch: the same values.
    const row = tf.tidy(() => tf.slice(inputs.x, [0, 0], [1, width]));
    const rowMask = tf.tidy(() => tf.slice(inputs.mask!, [0, 0], [1, width]));
    const padded = analyze(loaded.model, row, {
      mask: rowMask,
      truth: { heads: false, blocks: false, network: true },
    });
    tf.dispose([row, rowMask]);
    const alone = inspectText(model, examples[0].ids).layers.at(-1)!;
    assert.ok(
      near(alone.true, padded.network.true[0], 1e-5),
      `${alone.true} vs ${padded.network.true[0]} padded`,
    );

    const clean = r.predicted;
    const curve = textAttackCurve(model, t.ids, clean, "pgd", "l2", [0, 0.05, 0.5], 5);
    assert.deepEqual(
      curve.points.map((p) => p.eps),
      [0, 0.05, 0.5],
    );
    assert.equal(curve.points[0].predicted, clean);
    assert.ok(curve.points[0].margin >= 0);
    assert.ok(curve.points[2].margin < curve.points[0].margin, "PGD lowers the margin");
    assert.ok(curve.tokenNorm > 0);
    const fgsm = textAttackCurve(model, t.ids, clean, "fgsm", "linf", [0, 0.01], 1);
    assert.ok(fgsm.points[1].margin < fgsm.points[0].margin, "FGSM lowers the margin");

    assert.throws(() => inspectText(model, []), /explore: 1 to 48 token ids were expected, got 0/);
    assert.throws(
      () => inspectText(model, [2, 5000]),
      /explore: token 1 is id 5000, outside \[0, 2000\)/,
    );
    assert.throws(
      () => modelFromBytes(modelPreset("vit-micro"), new Uint8Array(8), "a-vit", "text"),
      /explore: a-vit is a vit model; this page shows a text model/,
    );
  } finally {
    inputs.dispose();
    loaded.model.dispose();
    model.dispose();
  }
});

test("attnlip explore refuses a text model it cannot read texts for with one line, exit 2", async () => {
  // A BERT folder holding GPT-2's tokenizer.json: more tokens than the model has embeddings.
  const mixed = join(dir, "bert-with-gpt2-tokenizer");
  cpSync("test/fixtures/hf/bert-tiny-random", mixed, { recursive: true });
  cpSync("test/fixtures/hf/gpt2-tiny-random/tokenizer.json", join(mixed, "tokenizer.json"));
  const r = await runAttnlipHere(["explore", mixed, "--out", join(dir, "refused")]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(
    r.stderr,
    /^attnlip: explore: .*tokenizer.json has 300 tokens, the model's word embeddings only 160/,
  );
  assert.ok(!existsSync(join(dir, "refused", "index.html")));
});

test("Hugging Face BERT and GPT-2 tokenizers rebuilt on the page give the folder's ids", async () => {
  await useBackend("cpu");
  for (const name of ["bert-tiny-random", "gpt2-tiny-random"]) {
    const folder = `test/fixtures/hf/${name}`;
    const hf = await loadHfModel(folder, "explore");
    try {
      const config = hf.config as TextConfig;
      const inNode = await hfTextTokenizer(folder, config, hf.hfConfig, "explore");
      const doc = JSON.parse(JSON.stringify(tokenizerDocument(inNode))) as TokenizerDocument;
      const onPage = tokenizerFromDocument(doc, config);
      for (const text of ["Free money now", "Re: the meeting, at 10:30? ok!", "x".repeat(500)])
        assert.deepEqual(
          tokenize(onPage, text).ids,
          Array.from(
            inNode.encodeBatch([text]).ids.subarray(0, inNode.encodeBatch([text]).lengths[0]),
          ),
          `${name}: ${text.slice(0, 20)}`,
        );
    } finally {
      hf.model.dispose();
    }
  }
});

test(
  "the explorer of a text model in headless Chromium: a typed text's tokens, prediction and bounds as in Node, an attack on its token embeddings; no errors",
  { skip, timeout: TEST_BACKSTOP_MS },
  async () => {
    assert.ok(!missing, `${CHROMIUM} is missing; CI must install it (.ci/install-chromium)`);
    const { url, close } = await serveExplorer(files, "127.0.0.1", 0);
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu"],
    });
    // The page computes on wasm (its default), as Node's wasm backend does (to 1e-9).
    await useBackend("wasm");
    const { model, tok } = pageModel();
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
      const analyses = (k: number) =>
        page.waitForFunction((want) => Number(document.body.dataset.analyses ?? 0) >= want, k, {
          timeout: HANG_MS,
        });
      await page.goto(url);
      await analyses(1); // the first held-out text, on load
      assert.equal(await page.locator("#examples button").count(), 3);
      assert.ok(await page.isHidden("#input-panel"), "no digit panel for a text model");

      const text = "WIN a FREE prize!!! Reply now to claim your money, or click here.";
      await page.fill("#text", text);
      await page.click("#read-text");
      await analyses(2);
      const t = tokenize(tok, text);
      assert.deepEqual(JSON.parse((await page.getAttribute("#tokens", "data-ids"))!), t.ids);
      assert.deepEqual(await page.locator("#tokens code").allTextContents(), t.tokens);
      const inNode = inspectText(model, t.ids);
      const predicted = inNode.predicted;
      assert.equal(
        Number(await page.getAttribute("#text-predicted", "data-class")),
        predicted,
        "prediction",
      );
      assert.match((await page.textContent("#text-predicted"))!, /^\d \((ham|spam)\)$/);
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
        inNode.layers.map((l) => l.name),
      );
      table.forEach((r, l) => {
        const node = inNode.layers[l];
        assert.ok(
          near(r.truth, node.true),
          `${r.layer} true: ${r.truth} in the browser, ${node.true} in Node`,
        );
        Object.values(node.bounds).forEach((b, k) =>
          assert.ok(near(r.bounds[k], b!), `${r.layer} bound ${k}: ${r.bounds[k]} vs ${b}`),
        );
      });
      assert.equal((await page.$$("#maps svg")).length, 1);
      assert.equal((await page.$$("#row-sigma svg")).length, 1);
      assert.match((await page.textContent("#maps"))!, /0:\[CLS\]/, "maps labelled with tokens");

      // FGSM, l_2 eps 0.5 on the token embeddings: the margin at eps 0.5 as Node computes it.
      await page.selectOption("#text-attack", "fgsm");
      await page.fill("#text-eps", "0.5");
      await page.click("#run-text-attack");
      await page.waitForSelector("#text-adv-margin");
      const grid = Array.from({ length: 9 }, (_, i) => (0.5 * i) / 8);
      const curve = textAttackCurve(model, t.ids, predicted, "fgsm", "l2", grid, 10);
      assert.equal(
        Number(await page.getAttribute("#text-adv-predicted", "data-class")),
        curve.points[8].predicted,
      );
      assert.ok(
        Math.abs(Number(await page.textContent("#text-adv-margin")) - curve.points[8].margin) <=
          1e-3 * Math.max(1, Math.abs(curve.points[8].margin)),
        "the margin as in Node (to the 4 digits shown)",
      );
      assert.equal((await page.$$("#text-margins svg")).length, 1);
      assert.deepEqual(problems, []);
    } finally {
      model.dispose();
      await browser.close();
      await close();
    }
  },
);
