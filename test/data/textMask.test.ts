// The padding mask of text batches comes from each row's length, not from the ids: a tokenizer
// may pad with an id that is also a real token's, or use id 0 for a real token (GPT-2 pads with
// its end-of-text id, and its id 0 is "!").
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../src/backend.ts";
import { textBatches, textBatchTensors, textSplitTensors } from "../../src/data/text/dataset.ts";
import { padRows } from "../../src/data/text/tokenizer.ts";

test("the padding mask follows each row's length: real id-0 tokens stay, padding with a real token's id is masked", async () => {
  await useBackend("cpu");
  const PAD = 9; // the padding id, also used by a real token in row 2
  const { ids, lengths } = padRows([[5, 0, 3], [0], [9, 9, 0, 4]], 5, PAD);
  const split = {
    ids,
    lengths,
    labels: Int32Array.from([0, 1, 0]),
    count: 3,
    length: 5,
    indices: Int32Array.from([0, 1, 2]),
  };
  const { ids: t, mask } = textSplitTensors(split);
  assert.deepEqual(t.shape, [3, 4], "trimmed to the longest real row");
  assert.deepEqual(Array.from(mask.dataSync()), [1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1]);
  const [batch] = [...textBatches(split, Int32Array.from([1, 0]), 2)];
  assert.deepEqual(Array.from(batch.lengths), [1, 3]);
  const m = textBatchTensors(batch).mask;
  assert.deepEqual(Array.from(m.dataSync()), [1, 0, 0, 1, 1, 1]);
  // Without lengths (a batch made elsewhere), id 0 is [PAD], as before.
  const legacy = textBatchTensors({ ids: Int32Array.from([2, 7, 0]), size: 1, length: 3 }).mask;
  assert.deepEqual(Array.from(legacy.dataSync()), [1, 1, 0]);
  for (const x of [t, mask, m, legacy]) x.dispose();
});
