// The explorer's attack panel starts where its prediction is: at eps 0 the attack's logits are
// the model's own forward pass on the same input, for every kind of model the page shows (an
// attnlip ViT and text model, Hugging Face ViT, BERT and GPT-2 fixtures). A BERT's token-type
// embedding once went missing from the embedding-space forward, so the page said "predicted
// ham" above "misclassified from eps 0".
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parse } from "csv-parse/sync";
import { tf, useBackend } from "../../src/backend.ts";
import {
  attackCurve,
  inspect,
  inspectText,
  modelFromBytes,
  predict,
  predictText,
  textAttackCurve,
  tokenize,
  tokenizerDocument,
  tokenizerFromDocument,
  type AttackPoint,
  type Prediction,
} from "../../src/explorer/compute.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { hfTextTokenizer } from "../../src/hf/textTokenizer.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { createModel } from "../../src/nn/create.ts";
import { modelPreset, type TextConfig } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import type { TextClassifier } from "../../src/nn/textClassifier.ts";
import { embeddingLogits } from "../../src/robustness/embedding.ts";

const fixture = (name: string) => new URL(`../fixtures/hf/${name}/`, import.meta.url).pathname;
const texts = (
  parse(readFileSync(new URL("../fixtures/hf/texts.csv", import.meta.url)), {
    columns: true,
  }) as { text: string }[]
).map((r) => r.text);

/** A model through the page's loading path (config object and safetensors bytes). */
function throughPage(model: TransformerClassifier, kind: "vit" | "text"): TransformerClassifier {
  const onPage = modelFromBytes(
    JSON.parse(JSON.stringify(model.config)),
    encodeSafetensors(model.getWeights()),
    "model",
    kind,
  );
  model.dispose();
  return onPage;
}

function fromFolder(name: string, kind: "vit" | "text"): TransformerClassifier {
  const dir = fixture(name);
  return modelFromBytes(
    JSON.parse(readFileSync(`${dir}config.json`, "utf8")),
    readFileSync(`${dir}model.safetensors`),
    name,
    kind,
  );
}

/**
 * The eps-0 point against every class agrees with the page's prediction: the same predicted
 * class, and margin = log p[label] - log max_other p (the logits up to a constant).
 */
function assertStartsAtPrediction(
  what: string,
  prediction: Prediction,
  curve: (label: number) => AttackPoint,
): void {
  const { predicted, probabilities: p } = prediction;
  for (let label = 0; label < p.length; label++) {
    const point = curve(label);
    assert.equal(point.eps, 0);
    assert.equal(point.predicted, predicted, `${what}, label ${label}: predicted class`);
    const others = p.filter((_, k) => k !== label);
    const expected = Math.log(p[label]) - Math.log(Math.max(...others));
    assert.ok(
      Math.abs(point.margin - expected) <= 1e-4 * Math.max(1, Math.abs(expected)),
      `${what}, label ${label}: margin ${point.margin} at eps 0, the prediction's ${expected}`,
    );
    assert.equal(point.margin < 0, label !== predicted, `${what}, label ${label}: sign`);
  }
}

function assertSameProbabilities(what: string, shown: Prediction, predicted: Prediction): void {
  assert.equal(predicted.predicted, shown.predicted, `${what}: predicted class`);
  assert.equal(predicted.probabilities.length, shown.probabilities.length);
  shown.probabilities.forEach((v, k) =>
    assert.ok(
      Math.abs(predicted.probabilities[k] - v) <= 1e-6,
      `${what}: p[${k}] ${predicted.probabilities[k]} vs ${v}`,
    ),
  );
}

test("the explorer's attack at eps 0 is its prediction for every model kind (attnlip ViT and text, Hugging Face ViT, BERT, GPT-2)", async () => {
  await useBackend("cpu");
  const images = [1, 2, 3].map((seed) => {
    let s = seed;
    return Array.from(
      { length: 784 },
      () => ((s = (s * 1103515245 + 12345) % 2147483648), s / 2147483648),
    );
  });
  const vits = [
    { what: "attnlip vit-micro", model: throughPage(createModel("vit-micro", 3), "vit") },
    { what: "Hugging Face ViT", model: fromFolder("vit-tiny-random", "vit") },
  ];
  for (const { what, model } of vits)
    try {
      // The page's prediction is inspect's (the analysis takes seconds: once per model).
      assertSameProbabilities(what, inspect(model, images[0]), predict(model, images[0]));
      for (const [i, pixels] of images.entries())
        for (const attack of ["fgsm", "pgd"] as const)
          assertStartsAtPrediction(
            `${what} image ${i} ${attack}`,
            predict(model, pixels),
            (label) => attackCurve(model, pixels, label, attack, [0], 2).points[0],
          );
    } finally {
      model.dispose();
    }

  // attnlip's text models: the preset, and one with segment embeddings and a pooler (the
  // BERT layout) whose type row is large enough to change every prediction if left out.
  const preset = createModel("text-micro", 1) as TransformerClassifier;
  const segmented = createModel(
    { ...(modelPreset("text-micro") as TextConfig), tokenTypes: 2, pooler: "tanh" as const },
    2,
  ) as TransformerClassifier;
  const type = segmented.getWeights().get("type")!;
  segmented.setWeights(
    { type: { data: type.data.map((v) => 200 * v), shape: type.shape } },
    { partial: true },
  );
  const ids = [
    [1, 5, 9, 200, 33],
    [2, 7, 1500, 4],
    [3, 3, 3, 3, 3, 3, 3, 3],
  ];
  const textModels: { what: string; model: TransformerClassifier; ids: number[][] }[] = [
    { what: "attnlip text-micro", model: throughPage(preset, "text"), ids },
    { what: "attnlip text with token types", model: throughPage(segmented, "text"), ids },
  ];
  for (const name of ["bert-tiny-random", "gpt2-tiny-random"]) {
    const dir = fixture(name);
    const hf = await loadHfModel(dir, "explore");
    const tok = await hfTextTokenizer(dir, hf.config as TextConfig, hf.hfConfig, "explore");
    hf.model.dispose();
    const model = fromFolder(name, "text");
    // The ids as the page reads them: the tokenizer rebuilt from the document the command sends.
    const onPage = tokenizerFromDocument(
      JSON.parse(JSON.stringify(tokenizerDocument(tok))),
      model.config as TextConfig,
    );
    textModels.push({
      what: name,
      model,
      ids: [...texts, "free money", "hello"].map((t) => tokenize(onPage, t).ids),
    });
  }
  for (const { what, model, ids } of textModels)
    try {
      assertSameProbabilities(what, inspectText(model, ids[0]), predictText(model, ids[0]));
      for (const [i, row] of ids.entries()) {
        const p = predictText(model, row);
        for (const attack of ["fgsm", "pgd"] as const)
          for (const norm of ["l2", "linf"] as const)
            assertStartsAtPrediction(
              `${what} text ${i} ${attack} ${norm}`,
              p,
              (label) => textAttackCurve(model, row, label, attack, norm, [0], 2).points[0],
            );
        // The cause, checked where the CLI's text attacks use it too: the embedding-space
        // logits at the clean token embeddings are the forward pass's.
        const [clean, fromEmbeddings] = tf.tidy(() => {
          const x = tf.tensor2d(Int32Array.from(row), [1, row.length], "int32");
          const mask = tf.ones([1, row.length]);
          const text = model as unknown as TextClassifier;
          return [
            Array.from(model.forward(x, { mask }).logits.dataSync()),
            Array.from(embeddingLogits(text, mask)(text.tokenEmbeddings(x)).dataSync()),
          ];
        });
        clean.forEach((v, k) =>
          assert.ok(
            Math.abs(fromEmbeddings[k] - v) <= 1e-5 * Math.max(1, Math.abs(v)),
            `${what} text ${i}: logit ${k} is ${fromEmbeddings[k]} from the embeddings, ${v} from the ids`,
          ),
        );
      }
    } finally {
      model.dispose();
    }
});
