// `fused` on whole blocks (docs/math.md section 3, "A row-wise run fused into the layer before
// it"): the MLP half after the attention residual enters the attention's output-row weights,
// ||G (I + B)|| <= ||G|| + ||G B||. Checked against the dense Jacobian of the float64 reference
// block (central finite differences) on 1,000 random pre-LN and post-LN blocks.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel, disposeTrace } from "../../src/nn/index.ts";
import type { VitConfig } from "../../src/nn/config.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { block64 } from "../helpers/reference64.ts";
import { fdJacobian, median, mulberry32, pick, tinyVitWeights, sigmaMax } from "./rulesHelpers.ts";

before(async () => {
  await useBackend("cpu");
});

test("whole blocks, 1,000 random pre-LN and post-LN cases: fused >= the dense truth of the block, <= the product of its parts' fused values", () => {
  const rand = mulberry32(1603);
  const models = new Map<string, ReturnType<typeof createModel>>();
  const gains: number[] = [];
  let tightest = Infinity;
  for (let t = 0; t < 1000; t++) {
    const heads = pick(rand, [1, 2]);
    const dk = pick(rand, [2, 3]);
    const norm = pick(rand, ["pre", "post"] as const);
    const qkvBias = rand() < 0.5;
    const lnEps = pick(rand, [1e-5, 1e-3]);
    const key = JSON.stringify([heads, dk, norm, qkvBias, lnEps]);
    if (!models.has(key))
      models.set(
        key,
        createModel({ kind: "vit", imageSize: 4, channels: 1, patchSize: 2, dModel: heads * dk, heads, blocks: 1, mlpHidden: 4, classes: 2, qkvBias, norm, lnEps }),
      );
    const model = models.get(key)!;
    const c = model.config as VitConfig;
    model.setWeights(
      tinyVitWeights(rand, c),
    );
    const x = tf.randomUniform([1, 4, 4, 1], 0, pick(rand, [0.01, 1]), "float32", t);
    const { logits, trace } = model.forward(x, { trace: true });
    const nb = networkBounds(model, trace!, { variants: ["fused"] });
    const u = Float64Array.from(trace!.blocks[0].input.dataSync());
    logits.dispose();
    disposeTrace(trace!);
    x.dispose();
    const weights = model.getWeights();
    const n = u.length / c.dModel;
    const truth = sigmaMax(fdJacobian((z) => block64(z, n, c, weights, 0).out, u, 1e-6), u.length, u.length);
    const block = nb.examples[0].layers.find((l) => l.name === "blocks.0")!;
    const fused = block.values.fused;
    const product = block.children.reduce((p, child) => p * child.values.fused, 1);
    assert.ok(fused >= truth * (1 - 1e-4) - 1e-8, `case ${t} (${norm}-LN): fused ${fused} < dense truth ${truth}`);
    assert.ok(fused <= product * (1 + 1e-12), `case ${t} (${norm}-LN): fused ${fused} > its parts' product ${product}`);
    gains.push(product / fused);
    // (d_model 2 makes LayerNorm's Jacobian 0 up to eps: a post-LN block's truth is then rounding noise.)
    if (truth > 1e-6) tightest = Math.min(tightest, fused / truth);
  }
  for (const m of models.values()) m.dispose();
  // The joint bound is used where it is smaller than the product: it must be, on most cases.
  assert.ok(median(gains) > 1, `fused is no tighter than the product on most blocks (median gain ${median(gains)})`);
  console.log(`1,000 blocks: fused / dense truth >= ${tightest.toFixed(3)}; the product of the parts / fused: median ${median(gains).toFixed(2)}, max ${Math.max(...gains).toFixed(2)}`);
});
