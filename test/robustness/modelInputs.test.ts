// Issue 11: the commands that evaluate a model (analyze, attack, the demo) branched on image vs
// text in their own code. Each model kind's inputs are now one record registered by the
// config's kind (robustness/modelInputs/); these tests hold the registry and its refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import { modelPreset } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import {
  checkDataTask,
  IMAGE_INPUTS,
  modelInputs,
  registerModelInputs,
  unregisterModelInputs,
} from "../../src/robustness/modelInputs/index.ts";
import { InputError } from "../../src/util/errors.ts";

await useBackend("wasm");

test("model inputs are found by the config's kind; an unknown kind, a taken kind and data of the other task are refused", () => {
  assert.equal(modelInputs("vit", "me").defaultData, "mnist");
  assert.equal(modelInputs("text", "me").defaultData, "spam");
  assert.deepEqual(modelInputs("text", "me").defaultEps("l2"), [0, 0.05, 0.1, 0.25]);
  assert.throws(() => modelInputs("audio", "analyze"), (e: unknown) => e instanceof InputError && /^analyze: no inputs are registered for a "audio" model \(known: vit, text/.test((e as Error).message));
  assert.throws(() => registerModelInputs(IMAGE_INPUTS), /model kind "vit" already has inputs/);
  assert.throws(
    () => checkDataTask(modelInputs("vit", "me"), "spam", "analyze"),
    /analyze: --data: "spam" is text data; a vit model reads image data \(mnist \| idx:DIR \| cifar10:DIR/,
  );
  checkDataTask(modelInputs("vit", "me"), "idx:somewhere", "analyze"); // the right task: no error
  // A toy kind registered from outside is found like the built-in ones.
  registerModelInputs({ ...IMAGE_INPUTS, modelKind: "toy-vit", defaultData: "toy" });
  try {
    assert.equal(modelInputs("toy-vit", "me").defaultData, "toy");
  } finally {
    assert.equal(unregisterModelInputs("toy-vit"), true);
  }
});

test("image inputs: the held-out digits as [N, 28, 28, 1], radii checked against the pixel range, tensors freed by dispose", async () => {
  const model = createModel(modelPreset("vit-micro"), 0) as TransformerClassifier;
  try {
    const inputs = await IMAGE_INPUTS.load(model, { who: "attack", data: "mnist", trained: null, seed: 0, n: 3 }, {});
    assert.deepEqual(inputs.x.shape, [3, 28, 28, 1]);
    assert.equal(inputs.mask, null);
    assert.equal(inputs.count, 3);
    assert.equal(inputs.space.kind, "image");
    assert.equal(inputs.info.origin, "random-init");
    inputs.checkEps([0, 1], "linf", "attack");
    assert.throws(() => inputs.checkEps([1.5], "linf", "attack"), /attack: --eps: 1\.5 is out of range for --norm linf \(at most 1, the width of the pixel range \[0, 1\] of mnist/);
    inputs.dispose();
    assert.equal(inputs.x.isDisposed, true);
  } finally {
    model.dispose();
  }
});
