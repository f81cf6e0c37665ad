// The demo's trained models against an independent dense Jacobian (issue 16): the two vit-tiny
// checkpoints `attnlip demo` trains (baseline and JaSMin lambda 0.1; config, weights and training
// state copied into test/fixtures/demo-vit-tiny/), at held-out test digits of their own split.
// The oracle (./denseBlock64.ts) computes every block's Jacobian and the network's input Jacobian
// in float64 from the weights alone, by the chain rule written out by hand (no tfjs, none of
// src/lipschitz); it is itself checked against central finite differences of the float64
// reference forward pass first.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import { tf, useBackend } from "../../src/backend.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { loadDataset } from "../../src/data/dataset.ts";
import { modelFromBytes } from "../../src/explorer/compute.ts";
import { createModel } from "../../src/nn/index.ts";
import type { VitConfig } from "../../src/nn/config.ts";
import { block64, vitForward64, vitSequence64 } from "../helpers/reference64.ts";
import { fdJacobian, mulberry32, normals } from "./rulesHelpers.ts";
import { blockJacobian64, blockOperators, lanczosNorm, vitJacobians64 } from "./denseBlock64.ts";

before(async () => {
  await useBackend("wasm");
});

const FIXTURES = new URL("../fixtures/demo-vit-tiny/", import.meta.url);
const DIGITS = 1;

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let t = 0; t < a.length; t++) m = Math.max(m, Math.abs(a[t] - b[t]));
  return m;
};
const maxAbs = (a: ArrayLike<number>) => maxAbsDiff(a, new Float64Array(a.length));

test("the oracle: its block and network Jacobians equal central finite differences of the float64 forward pass (random vit-micro)", () => {
  const model = createModel("vit-micro");
  const cfg = model.config as VitConfig;
  const weights = model.getWeights();
  const rand = mulberry32(16);
  const image = Float64Array.from({ length: 784 }, () => rand());
  const x = vitSequence64(cfg, weights, image);
  const N = x.length;
  for (let i = 0; i < cfg.blocks; i++) {
    const ops = blockOperators(blockJacobian64(cfg, weights, i, x));
    const fd = fdJacobian((z) => block64(z, N / cfg.dModel, cfg, weights, i).out, x, 1e-5);
    const dense = new Float64Array(N * N);
    for (let c = 0; c < N; c++) {
      const e = new Float64Array(N);
      e[c] = 1;
      const col = ops.block.apply(e);
      for (let r = 0; r < N; r++) dense[r * N + c] = col[r];
    }
    assert.ok(maxAbsDiff(dense, fd) <= 1e-6 * maxAbs(fd), `block ${i}: oracle and finite differences differ by ${maxAbsDiff(dense, fd)}`);
    // The transposed products are the adjoint: <u, J v> = <J^T u, v>.
    const u = normals(rand, N);
    const v = normals(rand, N);
    const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((s, t, k) => s + t * b[k], 0);
    const lhs = dot(u, ops.block.apply(v));
    assert.ok(Math.abs(lhs - dot(ops.block.applyT(u), v)) <= 1e-10 * Math.abs(lhs) + 1e-12, `block ${i}: applyT is not the adjoint`);
    x.set(block64(x, N / cfg.dModel, cfg, weights, i).out);
  }
  const net = vitJacobians64(cfg, weights, image).network;
  const fdNet = fdJacobian((z) => vitForward64(cfg, weights, z).logits, image, 1e-5);
  assert.ok(maxAbsDiff(net, fdNet) <= 1e-6 * maxAbs(fdNet), `network: oracle and finite differences differ by ${maxAbsDiff(net, fdNet)}`);
  model.dispose();
});

for (const run of ["baseline", "jasmin"] as const) {
  test(`the demo's trained vit-tiny (${run}), the first held-out digit${DIGITS > 1 ? "s" : ""}: every bound variant of every block and of the network >= the dense float64 truth; attnlip's true values agree with it`, async (t) => {
    const dir = new URL(`${run}/`, FIXTURES);
    const state = JSON.parse(readFileSync(new URL("train_state.json", dir), "utf8")) as { seed: number; data: { spec: string; limit: number } };
    const model = modelFromBytes(JSON.parse(readFileSync(new URL("config.json", dir), "utf8")), new Uint8Array(readFileSync(new URL("model.safetensors", dir))));
    const cfg = model.config as VitConfig;
    const weights = model.getWeights();
    // The demo's own split (its seed and training size): the first test digits are held out.
    const data = await loadDataset(state.data.spec, { seed: state.seed, limit: state.data.limit });
    const pixels = cfg.imageSize * cfg.imageSize * cfg.channels;
    const images = data.test.images.subarray(0, DIGITS * pixels);
    const x = tf.tensor4d(images, [DIGITS, cfg.imageSize, cfg.imageSize, cfg.channels]);
    // attnlip's Lanczos block values are compared on the baseline (the JaSMin model checks the bounds).
    const a = analyze(model, x, { truth: { heads: false, blocks: run === "baseline", network: true }, maxIterations: 300 });
    const forward = model.forward(x);
    const logits = forward.logits.arraySync() as number[][];
    forward.logits.dispose();
    x.dispose();
    for (let e = 0; e < DIGITS; e++) {
      const image = Float64Array.from(images.subarray(e * pixels, (e + 1) * pixels));
      const oracle = vitJacobians64(cfg, weights, image);
      assert.ok(maxAbsDiff(oracle.logits, logits[e]) <= 1e-4 * (1 + maxAbs(oracle.logits)), `${run} digit ${e}: float64 and tfjs logits differ`);
      const lines: string[] = [];
      oracle.blocks.forEach((b, i) => {
        const ops = blockOperators(b);
        const truth = lanczosNorm(ops.block);
        assert.ok(truth.residual < 1e-8, `${run} digit ${e} block ${i}: the oracle's Lanczos did not converge (${truth.residual})`);
        const block = a.blocks[i];
        // attnlip's Lanczos estimate (float32 products) is from below and converged here.
        const est = block.true[e];
        if (run === "baseline")
          assert.ok(Math.abs(est - truth.value) <= 1e-3 * truth.value, `${run} digit ${e} block ${i}: attnlip's true value ${est}, dense ${truth.value}`);
        for (const [variant, values] of Object.entries(block.bounds))
          assert.ok(values[e] >= truth.value * (1 - 1e-5), `${run} digit ${e} block ${i}: ${variant} ${values[e]} < dense truth ${truth.value}`);
        lines.push(`block ${i}: true ${truth.value.toFixed(3)}, fused / true ${(block.bounds.fused[e] / truth.value).toFixed(2)}, cov / true ${(block.bounds.cov[e] / truth.value).toFixed(2)}`);
      });
      const svd = new SingularValueDecomposition(new Matrix(Array.from({ length: oracle.classes }, (_, k) => Array.from(oracle.network.subarray(k * oracle.pixels, (k + 1) * oracle.pixels)))), { computeLeftSingularVectors: false, computeRightSingularVectors: false, autoTranspose: true });
      const netTruth = svd.diagonal[0];
      assert.ok(Math.abs(a.network.true[e] - netTruth) <= 1e-4 * netTruth, `${run} digit ${e}: attnlip's network true value ${a.network.true[e]}, dense ${netTruth}`);
      for (const [variant, values] of Object.entries(a.network.bounds))
        assert.ok(values[e] >= netTruth * (1 - 1e-5), `${run} digit ${e}: network ${variant} ${values[e]} < dense truth ${netTruth}`);
      t.diagnostic(`${run} digit ${e}: network true ${netTruth.toFixed(3)}, fused / true ${(a.network.bounds.fused[e] / netTruth).toExponential(2)}; ${lines.join("; ")}`);
    }
    model.dispose();
  });
}
