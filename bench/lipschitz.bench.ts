import { tf, useBackend } from "../src/backend.ts";
import { createModel } from "../src/nn/create.ts";
import type { TransformerClassifier } from "../src/nn/model.ts";
import { disposeTrace } from "../src/nn/trace.ts";
import { loadEmbeddedMnist, takeExamples } from "../src/data/mnist.ts";
import { networkBounds } from "../src/lipschitz/networkBounds.ts";
import { HEAD_VARIANTS } from "../src/lipschitz/rules/attentionHead.ts";
import { networkLipschitz } from "../src/lipschitz/truth/inputJacobian.ts";
import { blockLipschitz } from "../src/lipschitz/truth/powerIteration.ts";
import { renderTable } from "../src/util/table.ts";
import { timeMs } from "./timing.ts";

/**
 * Issue 3's benchmark on vit-tiny with 16 embedded test digits: the cost of the bounds and of
 * the true values, each relative to one traced forward pass of the same batch.
 */
export async function benchLipschitz(): Promise<Record<string, unknown>> {
  await useBackend("wasm");
  const batch = 16;
  const model = createModel("vit-tiny", 0) as TransformerClassifier;
  const split = takeExamples(loadEmbeddedMnist({ seed: 0 }).test, batch);
  const x = tf.tensor4d(split.images, [batch, 28, 28, 1]);

  const forwardMs = timeMs(() => {
    const { logits, trace } = model.forward(x, { trace: true });
    logits.dataSync();
    logits.dispose();
    disposeTrace(trace!);
  });
  const { logits, trace } = model.forward(x, { trace: true });
  logits.dispose();
  const weights = model.getWeights();
  const source = { config: model.config, weights };
  networkBounds(source, trace!, { mlp: "relaxed" }); // fills the per-model weight-norm cache
  const relaxedMs = timeMs(() => networkBounds(source, trace!, { mlp: "relaxed" }), { warmup: 1, repeats: 3, minMs: 1 });
  const localMs = timeMs(() => networkBounds(source, trace!, { mlp: "local" }), { warmup: 0, repeats: 3, minMs: 1 });
  // Issue 12's aim: every variant but the exact query paths (cov, fused) within 3x a forward pass.
  const withoutCov = HEAD_VARIANTS.filter((v) => v !== "cov" && v !== "fused");
  const noCovMs = timeMs(() => networkBounds(source, trace!, { mlp: "relaxed", variants: withoutCov }), { warmup: 1, repeats: 3, minMs: 1 });
  // Issue 16's aim: the new variant (fused) at most 2x the time of the current ones (cov, the costliest).
  const covMs = timeMs(() => networkBounds(source, trace!, { mlp: "relaxed", variants: ["cov"] }), { warmup: 1, repeats: 3, minMs: 1 });
  const fusedMs = timeMs(() => networkBounds(source, trace!, { mlp: "relaxed", variants: ["fused"] }), { warmup: 1, repeats: 3, minMs: 1 });
  // With the exact MLP (the default): fused also bounds each block jointly with its MLP half.
  const covLocalMs = timeMs(() => networkBounds(source, trace!, { mlp: "local", variants: ["cov"] }), { warmup: 1, repeats: 3, minMs: 1 });
  const fusedLocalMs = timeMs(() => networkBounds(source, trace!, { mlp: "local", variants: ["fused"] }), { warmup: 1, repeats: 3, minMs: 1 });
  const blockInput = tf.slice(trace!.blocks[1].input, 0, 1);
  disposeTrace(trace!);
  const networkTrueMs = timeMs(() => networkLipschitz(model, x), { warmup: 1, repeats: 3, minMs: 1 });
  let iterations = 0;
  const blockTrueMs = timeMs(
    () => {
      iterations = blockLipschitz(model, 1, blockInput, null, { maxIterations: 100, tolerance: 1e-6 }).iterations;
    },
    { warmup: 0, repeats: 3, minMs: 1 },
  );
  tf.dispose([x, blockInput]);
  model.dispose();

  const rows: (string | number)[][] = [
    ["traced forward pass, batch 16 (reference)", forwardMs, 1],
    [`all ${HEAD_VARIANTS.length} bound variants, every block and head, MLP relaxed`, relaxedMs, relaxedMs / forwardMs],
    [`all ${HEAD_VARIANTS.length} bound variants, MLP exact local (default)`, localMs, localMs / forwardMs],
    ["all variants but cov and fused, MLP relaxed (--variants)", noCovMs, noCovMs / forwardMs],
    ["cov alone, MLP relaxed", covMs, covMs / forwardMs],
    ["fused alone (LayerNorm fused into attention), MLP relaxed", fusedMs, fusedMs / forwardMs],
    ["cov alone, MLP local (exact)", covLocalMs, covLocalMs / forwardMs],
    ["fused alone, MLP local (also the MLP half fused into each block)", fusedLocalMs, fusedLocalMs / forwardMs],
    ["true network value: exact 10x784 input Jacobians, 16 inputs", networkTrueMs, networkTrueMs / forwardMs],
    [`true block value: Lanczos on Df^T Df, 1 input, 1 block (${iterations} products)`, blockTrueMs, blockTrueMs / forwardMs],
  ];
  console.log("vit-tiny on 16 embedded MNIST digits (wasm): cost relative to one traced forward pass of the batch");
  console.log(renderTable(["what", "ms", "ratio to forward"], rows));
  return {
    model: "vit-tiny",
    batch,
    forwardMs,
    boundsMs: { relaxedMlp: relaxedMs, localMlp: localMs, withoutCovRelaxedMlp: noCovMs, covAlone: covMs, fusedAlone: fusedMs, covAloneLocalMlp: covLocalMs, fusedAloneLocalMlp: fusedLocalMs },
    truthMs: { networkInputJacobian: networkTrueMs, blockPowerIteration: blockTrueMs, blockIterations: iterations },
    ratioToForward: {
      boundsRelaxedMlp: relaxedMs / forwardMs,
      boundsLocalMlp: localMs / forwardMs,
      boundsWithoutCovRelaxedMlp: noCovMs / forwardMs,
      fusedOverCov: fusedMs / covMs,
      fusedOverCovLocalMlp: fusedLocalMs / covLocalMs,
      networkTruth: networkTrueMs / forwardMs,
      blockTruthOneInput: blockTrueMs / forwardMs,
    },
  };
}
