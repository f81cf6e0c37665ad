// GPT-2 pools where transformers pools (issue 38, case 1; transformers #35909, PR #35911):
// GPT2ForSequenceClassification reads the rightmost token whose id is not config.json's
// pad_token_id. With the fixture's pad id = <|endoftext|>, "free money<|endoftext|>" gives the
// logits of "free money" ([1.681, 3.277]); attnlip pooled the end-of-text token itself
// ([0.169, 1.983]). The tokenizer ends a text's real tokens there (src/hf/tokenizer.ts), and every
// path reads the mask built from them: the forward pass, attacks on token embeddings, the true
// values and the bounds, the explorer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { textBatchTensors } from "../../src/data/text/dataset.ts";
import {
  predictText,
  tokenize,
  tokenizerDocument,
  tokenizerFromDocument,
} from "../../src/explorer/compute.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { hfTextTokenizer } from "../../src/hf/textTokenizer.ts";
import { readLengths } from "../../src/hf/tokenizer.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import type { TextConfig } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { modelInputs } from "../../src/robustness/modelInputs/index.ts";

const GPT2 = new URL("../fixtures/hf/gpt2-tiny-random", import.meta.url).pathname;
const EOS = "<|endoftext|>";
const reference = JSON.parse(readFileSync(join(GPT2, "reference.json"), "utf8")) as {
  inputs: { texts: string[] };
  logits: number[][];
};

async function load(dir = GPT2) {
  const hf = await loadHfModel(dir, "analyze");
  const config = hf.config as TextConfig;
  const tokenizer = await hfTextTokenizer(dir, config, hf.hfConfig, "analyze");
  return { model: hf.model as TransformerClassifier, config, tokenizer };
}

/** Texts through the data pipeline: encodeBatch, then the padded batch and its mask from the lengths. */
function pipeline(tokenizer: Awaited<ReturnType<typeof load>>["tokenizer"], texts: string[]) {
  const { ids, lengths } = tokenizer.encodeBatch(texts);
  return {
    lengths,
    ...textBatchTensors({ ids, size: texts.length, length: tokenizer.maxLength, lengths }),
  };
}

const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol: number, what: string) =>
  Array.from(a).forEach((v, j) =>
    assert.ok(Math.abs(v - b[j]) <= tol, `${what} logit ${j}: ${v} vs ${b[j]}`),
  );

test("GPT-2: a text ending with the pad token <|endoftext|> gives transformers' logits, those of the text without it, in a padded batch", async () => {
  await useBackend("wasm");
  const { model, tokenizer } = await load();
  const texts = [
    "free money",
    `free money${EOS}`,
    `free money${EOS}${EOS}`,
    `${reference.inputs.texts[0]}${EOS}`,
    `free${EOS}money`,
    "free",
    EOS,
  ];
  const { ids, mask, lengths } = pipeline(tokenizer, texts);
  try {
    const logits = model.forward(ids, { mask }).logits;
    const rows = logits.arraySync() as number[][];
    logits.dispose();
    // Real tokens end at the last token that is not the pad id: "free money" is 6 tokens.
    assert.deepEqual(Array.from(lengths), [
      6,
      6,
      6,
      tokenizer.encode(reference.inputs.texts[0]).length,
      7,
      2,
      1,
    ]);
    close(rows[0], [1.681, 3.277], 5e-4, "free money (transformers)");
    close(rows[1], rows[0], 1e-5, "free money<|endoftext|>");
    close(rows[2], rows[0], 1e-5, "free money<|endoftext|><|endoftext|>");
    assert.ok(Math.abs(rows[1][0] - 0.169) > 1, "not the end-of-text token's logits any more");
    // transformers' own float64 logits of the reference text, which it also gives with <|endoftext|> after it.
    close(rows[3], reference.logits[0], 1e-4, "reference text + <|endoftext|>");
    // A pad id inside a text is a real, attended token: pooled at "money", after it, as transformers
    // >= the version with PR #35911 does (older versions pooled the token before the first pad id: "free").
    const alone = tf.tensor2d(
      Int32Array.from(tokenizer.encode(`free${EOS}money`)),
      [1, 7],
      "int32",
    );
    const single = model.forward(alone, { mask: tf.onesLike(alone) }).logits;
    close(rows[4], single.dataSync(), 1e-5, "free<|endoftext|>money");
    assert.ok(
      Math.abs(rows[4][0] - rows[5][0]) > 0.1,
      `free<|endoftext|>money pools at money, not at free: ${rows[4]} vs ${rows[5]}`,
    );
    tf.dispose([alone, single]);
  } finally {
    tf.dispose([ids, mask]);
    model.dispose();
  }
});

test("GPT-2: attacks on token embeddings, the true value and every bound read the same pooled token for a text ending with <|endoftext|>", async () => {
  await useBackend("wasm");
  const { model, tokenizer } = await load();
  const root = mkdtempSync(join(tmpdir(), "attnlip-gpt2-pool-"));
  try {
    const csv = join(root, "texts.csv");
    writeFileSync(
      csv,
      `text,label\n"free money",spam\n"free money${EOS}",spam\n"free money${EOS}${EOS}",ham\n`,
    );
    const inputs = await modelInputs("text", "attack").load(
      model,
      { who: "attack", data: `csv:${csv}`, trained: null, imported: true, seed: 0, n: 3 },
      { tokenizer, labels: ["spam", "ham"] },
    );
    try {
      const batch = inputs.space.batch(0, 3);
      const clean = batch.cleanLogits();
      const start = batch.logits(batch.x);
      const rows = clean.arraySync() as number[][];
      close(rows[0], [1.681, 3.277], 5e-4, "free money");
      for (const e of [1, 2]) close(rows[e], rows[0], 1e-5, `text ${e}`);
      close(start.dataSync(), clean.dataSync(), 1e-5, "the attack's start (token embeddings)");
      tf.dispose([clean, start]);
      batch.dispose();
      // The true network value and the bounds are those of "free money".
      const truth = networkLipschitz(model, inputs.x, { mask: inputs.mask });
      const { logits, trace } = model.forward(inputs.x, { trace: true, mask: inputs.mask });
      logits.dispose();
      const bounds = networkBounds(model, trace!);
      disposeTrace(trace!);
      for (const e of [1, 2]) {
        assert.ok(
          Math.abs(truth[e] - truth[0]) <= 1e-4 * truth[0],
          `true value of text ${e}: ${truth[e]} vs ${truth[0]}`,
        );
        for (const [name, v] of Object.entries(bounds.examples[0].network))
          assert.ok(
            Math.abs((bounds.examples[e].network as Record<string, number>)[name] - v) <= 1e-4 * v,
            `bound ${name} of text ${e}`,
          );
      }
    } finally {
      inputs.dispose();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
    model.dispose();
  }
});

test("GPT-2 in the explorer: the page's tokenizer ends the text where the model pools, and predicts transformers' probabilities", async () => {
  await useBackend("wasm");
  const { model, config, tokenizer } = await load();
  try {
    const page = tokenizerFromDocument(
      JSON.parse(JSON.stringify(tokenizerDocument(tokenizer))),
      config,
    );
    const plain = predictText(model, tokenize(page, "free money").ids).probabilities;
    for (const t of [tokenizer, page]) {
      const read = tokenize(t, `free money${EOS}`);
      assert.equal(read.ids.length, 6);
      close(predictText(model, read.ids).probabilities, plain, 1e-6, "explorer");
    }
    const softmax = [Math.exp(1.681), Math.exp(3.277)].map((v, _, a) => v / (a[0] + a[1]));
    close(plain, softmax, 2e-4, "free money's probabilities");
  } finally {
    model.dispose();
  }
});

test("without pad_token_id in config.json nothing is trimmed: transformers then pools the last token, <|endoftext|> included", async () => {
  await useBackend("wasm");
  const root = mkdtempSync(join(tmpdir(), "attnlip-gpt2-nopad-"));
  try {
    const dir = join(root, "gpt2");
    cpSync(GPT2, dir, { recursive: true });
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<
      string,
      unknown
    >;
    delete cfg.pad_token_id;
    writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
    const { model, config, tokenizer } = await load(dir);
    try {
      assert.equal(tokenizer.modelPadId, null);
      assert.equal(tokenizer.padId, 0); // tokenizer.json still pads with <|endoftext|>
      assert.deepEqual(
        Array.from(tokenizer.encodeBatch([`free money${EOS}`, "free money"]).lengths),
        [7, 6],
      );
      const page = tokenizerFromDocument(
        JSON.parse(JSON.stringify(tokenizerDocument(tokenizer))),
        config,
      );
      assert.equal(tokenize(page, `free money${EOS}`).ids.length, 7);
    } finally {
      model.dispose();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("readLengths drops trailing pad ids, keeps at least the first token and leaves empty rows and inner pad ids alone", () => {
  const ids = Int32Array.from([5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 7, 0]);
  assert.deepEqual(Array.from(readLengths(ids, Int32Array.from([3, 2, 0, 4]), 4, 0)), [1, 1, 0, 3]);
  assert.deepEqual(Array.from(readLengths(ids, Int32Array.from([3, 2, 0, 4]), 4, 9)), [3, 2, 0, 4]);
});
