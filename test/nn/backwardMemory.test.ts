import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { linear } from "../../src/nn/linear.ts";

await useBackend("wasm");

test("on wasm, a clone (what the gradient tape saves) shares its input's buffer and keeps its values once the input is freed", () => {
  const x = tf.tensor1d([1, -2, 3.5]);
  const y = tf.clone(x);
  const backend = tf.backend() as unknown as { refCount(dataId: object): number };
  assert.equal(backend.refCount(x.dataId), 2, "one buffer, two tensors");
  x.dispose();
  assert.deepEqual(Array.from(y.dataSync()), [1, -2, 3.5]);
  const v = tf.variable(y);
  v.assign(tf.tensor1d([0, 0, 0]));
  assert.deepEqual(
    Array.from(y.dataSync()),
    [1, -2, 3.5],
    "assigning a variable made from it leaves the clone alone",
  );
  tf.dispose([y, v]);
});

test("the backward pass through 4 linear layers holds one transposed weight at a time, not all 4 until it ends", async () => {
  const d = 256;
  const ws = Array.from({ length: 4 }, (_, i) => tf.randomNormal([d, d], 0, 0.1, "float32", i));
  const x = tf.randomNormal([2, d], 0, 1, "float32", 9);
  const before = tf.memory().numBytes;
  const info = await tf.profile(() => {
    const grads = tf.grads((...w: tf.Tensor[]) => tf.sum(w.reduce((h, wi) => linear(h, wi), x)))(
      ws,
    );
    tf.dispose(grads);
  });
  // In weight matrices: the tape's saved copies (4, as tf.memory counts them), the 4 weight
  // gradients and one W^T (9.1 with the activations); each W^T kept to the end made it 12.1.
  const peak = (info.peakBytes - before) / (d * d * 4);
  assert.ok(peak < 10.5, `peak ${peak.toFixed(2)} weight matrices`);
  tf.dispose([...ws, x]);
});
