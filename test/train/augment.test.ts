import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { SeededRng } from "../../src/data/dataset.ts";
import { parseTrainFlags } from "../../src/cli/trainCommand.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { drawShifts, shiftImages } from "../../src/train/kinds/shift.ts";
import { train } from "../../src/train/trainer.ts";
import { InputError } from "../../src/util/errors.ts";
import { digits, QUIET, tempDir, TINY } from "./helpers.ts";

await useBackend("wasm");

/** The shift written out pixel by pixel: out(y, x, c) = in(y - dy, x - dx, c), else fill. */
function shiftByHand(image: Float32Array, [h, w, c]: [number, number, number], dx: number, dy: number, fill: number): Float32Array {
  const out = new Float32Array(h * w * c).fill(fill);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++)
      for (let k = 0; k < c; k++) {
        const sy = y - dy;
        const sx = x - dx;
        if (sy >= 0 && sy < h && sx >= 0 && sx < w) out[(y * w + x) * c + k] = image[(sy * w + sx) * c + k];
      }
  return out;
}

test("random shifts: every offset in range is drawn, and each image moves exactly by its own offset", () => {
  const shifts = drawShifts(500, 2, new SeededRng(1));
  assert.deepEqual([...new Set(shifts)].sort((x, y) => x - y), [-2, -1, 0, 1, 2]);
  assert.deepEqual(drawShifts(500, 2, new SeededRng(1)), shifts, "the same stream gives the same shifts");
  const shape: [number, number, number] = [5, 6, 2];
  const size = 5 * 6 * 2;
  const images = Float32Array.from({ length: 4 * size }, (_, i) => (i * 37) % 101);
  const offsets = Int32Array.of(1, 0, -2, 1, 0, 0, 3, -4);
  const moved = tf.tidy(() => shiftImages(tf.tensor2d(images, [4, size]), shape, offsets, -1).dataSync() as Float32Array);
  for (let i = 0; i < 4; i++)
    assert.deepEqual(
      moved.slice(i * size, (i + 1) * size),
      shiftByHand(images.slice(i * size, (i + 1) * size), shape, offsets[2 * i], offsets[2 * i + 1], -1),
      `image ${i}`,
    );
});

test("train --augment-shift: recorded, repeatable through a resume, changes the run; refused for text data and bad values", async () => {
  const dataset = await digits(128, 32);
  const base = { ...QUIET, dataset, model: TINY, epochs: 2, batchSize: 32, seed: 2, augmentShift: 2 };
  const straight = await train(base);
  const dir = tempDir();
  (await train({ ...base, out: dir, stopAfterEpoch: 1 })).model.dispose();
  const resumed = await train({ ...QUIET, dataset, resume: dir });
  const plain = await train({ ...base, augmentShift: 0 });
  const a = straight.model.getWeights();
  const b = resumed.model.getWeights();
  const c = plain.model.getWeights();
  for (const m of [straight, resumed, plain]) m.model.dispose();
  for (const [name, w] of a) assert.deepEqual(w.data, b.get(name)!.data, `${name}: a resumed augmented run differs from the uninterrupted one`);
  assert.ok([...a].some(([name, w]) => w.data.some((v, i) => v !== c.get(name)!.data[i])), "the shifts changed nothing");
  const ckpt = await loadCheckpoint(dir);
  ckpt.model.dispose();
  assert.deepEqual(ckpt.trainState.augment, { shift: 2 });

  await assert.rejects(
    train({ ...QUIET, data: "spam", limit: 64, testLimit: 16, epochs: 1, augmentShift: 1 }),
    (e: Error) => e instanceof InputError && e.message === "augment-shift: shifts images; spam is text data",
  );
  await assert.rejects(
    train({ ...base, augmentShift: 28 }),
    (e: Error) => e instanceof InputError && /^augment-shift: 28 pixels moves every 28x28 image of mnist out of its frame; give less than 28$/.test(e.message),
  );
  assert.throws(() => parseTrainFlags({ out: "o", augmentShift: "1.5" }), /^InputError: train: --augment-shift: must be an integer/);
  assert.throws(() => parseTrainFlags({ resume: "r", augmentShift: "2" }), /--augment-shift cannot be given with --resume/);
});
