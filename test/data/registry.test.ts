// Data sets register by name (src/data/registry.ts): a new source is one file plus one
// registration, and the spec parser, the help text and the loaders (training, evaluation)
// pick it up. The test registers a toy image source and a toy text source.
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../src/backend.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { imageEvaluationSplit } from "../../src/data/evaluationInputs.ts";
import { contentDigest } from "../../src/data/identity.ts";
import {
  parseSpec,
  registerDataSource,
  specForms,
  unregisterDataSource,
  type ImageSource,
  type TextSource,
} from "../../src/data/sources/index.ts";
import { isTextDataSpec, loadTextDataset } from "../../src/data/text/dataset.ts";
import { InputError } from "../../src/util/errors.ts";
import { train } from "../../src/train/trainer.ts";
import { QUIET } from "../train/helpers.ts";

await useBackend("wasm");

/** 14x14 images of 3 classes: class c lights the c-th third of the rows; pixels in [0, 1]. */
const toyImages: ImageSource = {
  name: "toy-images",
  arg: null,
  task: "image",
  summary: "three classes of striped 14x14 images",
  async load(_arg, { seed }) {
    const make = (count: number, offset: number) => {
      const images = new Float32Array(count * 196);
      const labels = new Int32Array(count);
      for (let k = 0; k < count; k++) {
        const c = (k + seed) % 3;
        labels[k] = c;
        for (let r = 0; r < 14; r++) for (let q = 0; q < 14; q++) images[k * 196 + r * 14 + q] = Math.floor(r / 5) === c ? 0.9 : 0.1;
        images[k * 196 + 195] = (offset + k) / 100; // every image its own (a copy of a training image is not held out)
      }
      return { images, labels, count, shape: [14, 14, 1] as [number, number, number], indices: Int32Array.from({ length: count }, (_, i) => offset + i) };
    };
    return { train: make(60, 0), test: make(30, 60), classes: 3, range: [0, 1], contentDigest: contentDigest(["toy-images", String(seed)]) };
  },
};

const toyTexts: TextSource = {
  name: "toy-texts",
  arg: "FILE",
  task: "text",
  summary: "generated texts",
  async load(file) {
    const texts = Array.from({ length: 20 }, (_, i) => (i % 2 ? `good ${file} ${i}` : `bad ${file} ${i}`));
    return { texts, labels: Int32Array.from(texts, (_, i) => i % 2), labelNames: ["bad", "good"], textColumn: null, labelColumn: null, encoding: null, contentDigest: contentDigest(texts) };
  },
};

test("a registered image source is parsed, listed, loaded with its classes and range, trained on and evaluated", async () => {
  registerDataSource(toyImages);
  try {
    assert.match(specForms(), /toy-images/);
    assert.match(specForms("image", true), /toy-images \(three classes of striped 14x14 images\)/);
    assert.equal(parseSpec("toy-images").source.task, "image");
    const data = await loadDataset("toy-images", { limit: 30 });
    assert.equal(data.classes, 3);
    assert.deepEqual(data.range, [0, 1]);
    assert.equal(data.train.count, 30);
    const r = await train({ data: "toy-images", model: "vit-micro", epochs: 1, batchSize: 10, ...QUIET });
    assert.equal(r.model.config.classes, 3);
    assert.equal(r.model.config.kind === "vit" && r.model.config.imageSize, 14);
    const chosen = await imageEvaluationSplit({ who: "analyze", data: undefined, trained: { ...r.trainState.data, seed: 0 }, seed: 0, n: 5 });
    assert.equal(chosen.info.origin, "checkpoint");
    assert.ok(chosen.split.indices.every((i) => i >= 60));
    r.model.dispose();
    assert.throws(() => parseSpec("toy-images:x"), InputError);
    assert.throws(() => parseSpec("toy-images", "text"), /is image data; expected text data/);
  } finally {
    unregisterDataSource("toy-images");
  }
  assert.throws(() => parseSpec("toy-images"), /expected mnist \| idx:DIR/);
});

test("a registered text source is text data for every command and loads through the split and tokenizer", async () => {
  registerDataSource(toyTexts);
  try {
    assert.equal(isTextDataSpec("toy-texts:a"), true);
    assert.equal(isTextDataSpec("toy-texts"), false);
    const d = await loadTextDataset("toy-texts:a", { seed: 1, vocabSize: 50, maxLength: 8 });
    assert.equal(d.spec, "toy-texts:a");
    assert.deepEqual(d.labelNames, ["bad", "good"]);
    assert.equal(d.train.count + d.test.count, 20);
  } finally {
    unregisterDataSource("toy-texts");
  }
});

test("registration refuses a taken name and a bad one", () => {
  assert.throws(() => registerDataSource({ ...toyImages, name: "mnist" }), /"mnist" is registered already/);
  assert.throws(() => registerDataSource({ ...toyImages, name: "Bad Name" }), /bad name/);
});
