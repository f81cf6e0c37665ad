import { tf, useBackend } from "../src/backend.ts";
import { createModel } from "../src/nn/create.ts";
import { loadEmbeddedMnist, takeExamples } from "../src/data/mnist.ts";
import { trainStep } from "../src/train/trainer.ts";
import { AdamW } from "../src/train/optimizer.ts";
import type { JasminNorm } from "../src/train/jasmin.ts";
import { renderTable } from "../src/util/table.ts";
import { timeMs } from "./timing.ts";
import { linear } from "../src/nn/linear.ts";
import { blockParams } from "../src/nn/block.ts";
import { modelPreset } from "../src/nn/config.ts";

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
  const parts = stepParts(x);
  const blocks = modelPreset("vit-tiny").blocks;
  tf.dispose([x, labels]);
  const reference = ms[modes[0].name];
  console.log(`vit-tiny training step, batch ${batch}, wasm: time relative to the step without JaSMin`);
  console.log(renderTable(["step", "ms", "ratio"], modes.map((m) => [m.name, ms[m.name], ms[m.name] / reference])));
  console.log(`\na part of that step against the way attnlip did it before (docs/performance.md, "Where a training step's time goes")`);
  console.log(renderTable(["part", "ms", "ratio to before"], parts.map((r) => [r.name, r.ms, r.ratio])));
  const saved = blocks * (parts[0].ms - parts[1].ms);
  console.log(`${blocks} blocks x the difference: ${saved.toFixed(1)} ms less per step, ${((100 * saved) / (reference + saved)).toFixed(0)}% of the step as it was`);
  return {
    batch,
    stepMs: ms,
    ratioToNoJasmin: Object.fromEntries(modes.map((m) => [m.name, ms[m.name] / reference])),
    parts,
  };
}

/**
 * A part of a vit-tiny step (batch 32, wasm) timed the way attnlip computes it now and the way it
 * did before, in the same run: block 0's q, k and v with their gradient, as three projections
 * against one projection with concatenated weights split into three (tfjs's wasm slice copies
 * its whole input for each part).
 */
function stepParts(x: tf.Tensor): { name: string; ms: number; ratio: number }[] {
  const model = createModel("vit-tiny", 0);
  const p = blockParams(model.params, 0).attn as Record<"wq" | "wk" | "wv", tf.Tensor> & Partial<Record<"bq" | "bk" | "bv", tf.Tensor>>;
  const [b, n, d, heads] = [x.shape[0] as number, 50, model.config.dModel, model.config.heads];
  const dk = d / heads;
  const h = tf.randomNormal([b, n, d], 0, 1, "float32", 1);
  const heads4 = (t: tf.Tensor) => tf.transpose(tf.reshape(t, [b, n, heads, dk]), [0, 2, 1, 3]);
  const fused = (z: tf.Tensor) => {
    const qkv = linear(tf.reshape(z, [b * n, d]), tf.concat([p.wq, p.wk, p.wv], 1), p.bq && p.bk && p.bv ? tf.concat([p.bq, p.bk, p.bv], 0) : undefined);
    return tf.split(tf.transpose(tf.reshape(qkv, [b, n, 3 * heads, dk]), [0, 2, 1, 3]), 3, 1);
  };
  const three = (z: tf.Tensor) => {
    const flat = tf.reshape(z, [b * n, d]);
    return [heads4(linear(flat, p.wq, p.bq)), heads4(linear(flat, p.wk, p.bk)), heads4(linear(flat, p.wv, p.bv))];
  };
  const qkvGrad = (f: (z: tf.Tensor) => tf.Tensor[]) => () =>
    tf.tidy(() => {
      const loss = (z: tf.Tensor) => {
        const [q, k, v] = f(z);
        return tf.sum(tf.mul(tf.add(q, k), v)) as tf.Scalar;
      };
      tf.grad(loss)(h).dataSync();
    });
  // Interleaved: 9 alternating samples of each (at least 100 ms each), medians.
  const before: number[] = [];
  const now: number[] = [];
  for (let i = 0; i < 9; i++) {
    before.push(timeMs(qkvGrad(fused), { warmup: 1, repeats: 1, minMs: 100 }));
    now.push(timeMs(qkvGrad(three), { warmup: 1, repeats: 1, minMs: 100 }));
  }
  const median = (xs: number[]) => xs.sort((u, v) => u - v)[Math.floor(xs.length / 2)];
  const [qkvBefore, qkvNow] = [median(before), median(now)];
  h.dispose();
  model.dispose();
  return [
    { name: "block 0's q, k, v and gradient: one projection + split (before)", ms: qkvBefore, ratio: 1 },
    { name: "block 0's q, k, v and gradient: three projections (now)", ms: qkvNow, ratio: qkvNow / qkvBefore },
  ];
}
