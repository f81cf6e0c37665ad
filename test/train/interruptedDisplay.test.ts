// Ctrl-C in the middle of an epoch's display or of its end-of-epoch evaluation (a newcomer's
// findings): the evaluation lets a signal handler run between its batches, and a process that
// exits while a progress bar is shown turns the terminal's cursor and line wrapping back on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import { evaluateBatches, evaluateBatchesYielding } from "../../src/train/evaluate.ts";
import type { ModelBatch } from "../../src/train/kinds/registry.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

test("the end-of-epoch evaluation lets other work run between its batches, with the same figures", async () => {
  await useBackend("wasm");
  const model = createModel("vit-micro", 1);
  const pixels = (model.config as { imageSize: number }).imageSize ** 2;
  const total = 6;
  let evaluated = 0;
  const batches = (): Iterable<ModelBatch> =>
    (function* () {
      for (let b = 0; b < total; b++) {
        evaluated++;
        const values = Float32Array.from({ length: 4 * pixels }, (_, i) => ((i * 7 + b) % 11) / 11);
        yield {
          size: 4,
          labels: Int32Array.from([0, 1, 2, 3].map((l) => (l + b) % 10)),
          inputs: () => ({ x: tf.tensor2d(values, [4, pixels]) }),
        } as unknown as ModelBatch;
      }
    })();
  const plain = evaluateBatches(model, batches());
  evaluated = 0;
  let seenAt = -1;
  setImmediate(() => (seenAt = evaluated));
  const yielding = await evaluateBatchesYielding(model, batches());
  assert.deepEqual(yielding, plain);
  assert.ok(
    seenAt >= 0 && seenAt < total,
    `a callback queued before the evaluation ran after ${seenAt} of ${total} batches`,
  );
  model.dispose();
});

test("exiting while a training progress bar is shown turns the cursor and line wrapping back on; after the epoch's end nothing more is written", () => {
  const run = (endEpoch: boolean) =>
    spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `import { createProgress } from "./src/train/progress.ts";
const p = createProgress("bar", () => {});
p.startEpoch(1, 2, 10);
p.update(3, { loss: 1, accuracy: 0.5, imagesPerSecond: 10 });
${endEpoch ? "p.endEpoch(); process.stdout.write('|ended|');" : ""}
process.exit(130);`,
      ],
      { cwd: root, encoding: "utf8" },
    );
  const interrupted = run(false);
  assert.equal(interrupted.status, 130, interrupted.stderr);
  assert.ok(
    interrupted.stdout.endsWith("\u001b[?25h\u001b[?7h"),
    JSON.stringify(interrupted.stdout.slice(-40)),
  );
  const ended = run(true);
  assert.equal(ended.status, 130, ended.stderr);
  assert.ok(ended.stdout.endsWith("|ended|"), JSON.stringify(ended.stdout.slice(-40)));
});
