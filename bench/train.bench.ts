import { tf, useBackend } from "../src/backend.ts";
import { createModel } from "../src/nn/create.ts";
import { loadEmbeddedMnist, takeExamples } from "../src/data/mnist.ts";
import { trainStep } from "../src/train/trainer.ts";
import { AdamW } from "../src/train/optimizer.ts";
import type { JasminNorm } from "../src/train/jasmin.ts";
import { renderTable } from "../src/util/table.ts";
import { timeMs } from "./timing.ts";

/**
 * Issue 4's benchmark: one vit-tiny training step (batch 32 embedded digits, wasm) with the
 * JaSMin term in each norm mode, relative to the step without it, all in the same run.
 */
export async function benchTrain(): Promise<Record<string, unknown>> {
  await useBackend("wasm");
  const batch = 32;
  const split = takeExamples(loadEmbeddedMnist({ seed: 0 }).train, batch);
  const x = tf.tensor4d(split.images, [batch, 28, 28, 1]);
  const labels = tf.tensor1d(split.labels, "int32");
  const modes: { name: string; lambda: number; norm: JasminNorm }[] = [
    { name: "no JaSMin (reference)", lambda: 0, norm: "top2" },
    { name: "JaSMin top2", lambda: 0.1, norm: "top2" },
    { name: "JaSMin quad", lambda: 0.1, norm: "quad" },
    { name: "JaSMin exact", lambda: 0.1, norm: "exact" },
  ];
  const ms: Record<string, number> = {};
  for (const mode of modes) {
    const model = createModel("vit-tiny", 0);
    const optimizer = new AdamW(model.variables().map((v) => [v.name, v] as [string, tf.Variable]));
    const settings = { lr: 1e-4, clip: 1, jasmin: { lambda: mode.lambda, norm: mode.norm, reduce: "max-log" as const, layers: null } };
    ms[mode.name] = timeMs(() => void trainStep(model, optimizer, x, labels, settings), { warmup: 2, repeats: 5, minMs: 1 });
    optimizer.dispose?.();
    model.dispose();
  }
  tf.dispose([x, labels]);
  const reference = ms[modes[0].name];
  console.log(`vit-tiny training step, batch ${batch}, wasm: time relative to the step without JaSMin`);
  console.log(renderTable(["step", "ms", "ratio"], modes.map((m) => [m.name, ms[m.name], ms[m.name] / reference])));
  return {
    batch,
    stepMs: ms,
    ratioToNoJasmin: Object.fromEntries(modes.map((m) => [m.name, ms[m.name] / reference])),
  };
}
