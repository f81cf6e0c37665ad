import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { analysisCsv, analysisDocument, writeAnalysis } from "../../src/analysis/files.ts";
import { analysisTables } from "../../src/analysis/table.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { loadEmbeddedMnist, takeExamples } from "../../src/data/mnist.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

await useBackend("wasm");

const tinyVit = {
  kind: "vit",
  imageSize: 28,
  channels: 1,
  patchSize: 7,
  dModel: 16,
  heads: 2,
  blocks: 2,
  mlpHidden: 32,
  classes: 10,
} as const;

function digits(n: number): tf.Tensor {
  const split = takeExamples(loadEmbeddedMnist({ seed: 0 }).test, n);
  return tf.tensor4d(split.images, [n, 28, 28, 1]);
}

test("analyze: every bound variant is at or above the true value, per block, per head and for the network", () => {
  const model = createModel(tinyVit, 3) as TransformerClassifier;
  const x = digits(3);
  const before = tf.memory().numTensors;
  const a = analyze(model, x, { maxIterations: 300, tolerance: 1e-6 });
  assert.equal(tf.memory().numTensors, before, "analyze leaks no tensors");
  assert.equal(a.inputs, 3);
  assert.equal(a.blocks.length, 2);
  const check = (name: string, b: { bounds: Record<string, number[]>; true: number[] }) => {
    assert.equal(b.true.length, 3);
    for (const v of HEAD_VARIANTS)
      for (let i = 0; i < 3; i++) {
        assert.ok(Number.isFinite(b.bounds[v][i]) && b.true[i] > 0, `${name} ${v} input ${i}`);
        assert.ok(b.bounds[v][i] >= b.true[i] * (1 - 1e-4), `${name} ${v} input ${i}: bound ${b.bounds[v][i]} < true ${b.true[i]}`);
      }
  };
  check("network", a.network);
  for (const block of a.blocks) {
    check(block.name, block);
    assert.ok(block.converged.every(Boolean), `${block.name} power iteration converged`);
    assert.ok(block.residual.every((r) => r <= 1e-6) && block.iterations.every((k) => k >= 2 && k <= 300));
    for (const head of block.heads) {
      check(`${block.name} head ${head.head}`, head);
      assert.deepEqual(head.converged, [true, true, true], `${block.name} head ${head.head} converged`);
      assert.ok(head.residual.every((r) => r <= 1e-6) && head.iterations.every((k) => k >= 2 && k <= 300));
      for (const s of head.stats.meanSigma) assert.ok(s > 0 && s <= 0.5);
      for (const t of head.stats.meanTop) assert.ok(t > 0 && t <= 1);
    }
  }
  assert.equal(a.convergence.method, "lanczos");
  assert.deepEqual(
    [a.convergence.tolerance, a.convergence.maxIterations, a.convergence.unconverged],
    [1e-6, 300, 0],
  );
  assert.deepEqual(a.convergence.blocks, { estimates: 2 * 3, unconverged: 0 });
  assert.deepEqual(a.convergence.heads, { estimates: 2 * 2 * 3, unconverged: 0 });
  assert.match(analysisTables(a), /all 18 converged/);
  assert.doesNotMatch(analysisTables(a), /NOT converged|\*/);
  // The distribution-aware bounds are tighter than the prior-art ones on the network.
  const med = a.summary.network.bounds;
  assert.ok(med["t3-top2"].median < med["t3-half"].median && med.cov.median <= med["t3-exact"].median);
  assert.ok(a.summary.network.ratios!["cov"].median >= 1);
  tf.dispose(x);
  model.dispose();
});

test("analysis.json holds one array over inputs per variant and `true` for each layer and the network; CSV is long format", async () => {
  const model = createModel(tinyVit, 1) as TransformerClassifier;
  const x = digits(2);
  const a = analyze(model, x, { truth: { heads: false }, maxIterations: 50 });
  const dir = mkdtempSync(join(tmpdir(), "attnlip-analysis-"));
  await writeAnalysis(dir, a, { model: model.config });
  const doc = JSON.parse(readFileSync(join(dir, "analysis.json"), "utf8"));
  for (const layer of ["block.0", "block.1", "network"]) {
    for (const v of [...HEAD_VARIANTS, "true"]) assert.equal(doc.layers[layer][v].length, 2, `${layer}.${v}`);
  }
  assert.equal(doc.layers["block.0"].heads[0].true[0], null, "head truth skipped is null, not NaN");
  // How each estimate was made, per input, and the counts; skipped head estimates are null.
  const block0 = doc.layers["block.0"];
  assert.match(block0.truthMethod, /^lanczos/);
  for (const key of ["iterations", "residual", "relativeChange", "converged"]) assert.equal(block0[key].length, 2, key);
  assert.deepEqual(block0.converged, [true, true]);
  assert.deepEqual(block0.convergence, { estimates: 2, unconverged: 0 });
  assert.deepEqual(block0.heads[0].converged, [null, null]);
  assert.deepEqual(block0.heads[0].iterations, [0, 0]);
  assert.deepEqual(block0.heads[0].convergence, { estimates: 0, unconverged: 0 });
  assert.equal(doc.layers.network.converged, undefined, "the network's true value is exact");
  assert.deepEqual(
    [doc.convergence.method, doc.convergence.maxIterations, doc.convergence.unconverged],
    ["lanczos", 50, 0],
  );
  assert.deepEqual(doc.convergence.blocks, { estimates: 4, unconverged: 0 });
  assert.deepEqual(doc.convergence.heads, { estimates: 0, unconverged: 0 });
  assert.ok(doc.summary.network.ratios.cov.median >= 1);
  const csv = analysisCsv(a).trim().split("\n");
  assert.equal(csv[0], "input,layer,head,variant,bound,true,ratio,true_converged");
  assert.ok(csv[1].startsWith("0,block.0,,") && csv[1].endsWith(",true"), csv[1]);
  assert.ok(csv.at(-1)!.startsWith("1,network,,") && csv.at(-1)!.endsWith(","), "the exact network value has no flag");
  // 2 inputs x 9 variants x (2 blocks x (1 + 2 heads) + network), and the network's composition floor per input
  assert.equal(csv.length - 1, 2 * HEAD_VARIANTS.length * (2 * 3 + 1) + 2);
  tf.dispose(x);
  model.dispose();
});

test("estimates stopped by the cap are flagged unconverged and counted: table, analysis.json", async () => {
  const model = createModel(tinyVit, 2) as TransformerClassifier;
  const x = digits(2);
  const a = analyze(model, x, { truth: { network: false }, maxIterations: 2 });
  for (const block of a.blocks) {
    assert.deepEqual(block.converged, [false, false], block.name);
    assert.deepEqual(block.iterations, [2, 2]);
    assert.ok(block.residual.every((r) => r > 1e-6));
    for (const head of block.heads) assert.deepEqual(head.converged, [false, false]);
  }
  assert.deepEqual(a.convergence.blocks, { estimates: 4, unconverged: 4 });
  assert.deepEqual(a.convergence.heads, { estimates: 8, unconverged: 8 });
  assert.equal(a.convergence.unconverged, 12);
  const text = analysisTables(a);
  assert.match(text, /block\.0 \(true value: lanczos estimate from below, 2 of 2 block estimates and 4 of 4 head estimates NOT converged/);
  assert.match(text, /\* 2 of 2 true values of block\.1 did not converge/);
  assert.match(text, /\d \*/, "the true value is marked");
  assert.match(text, /12 of 12 NOT converged \(4 of 4 block, 8 of 8 head\).*raise --iterations/);
  const doc = analysisDocument(a, {}) as { convergence: { unconverged: number }; layers: Record<string, { convergence: unknown; heads: { convergence: unknown }[] }> };
  assert.equal(doc.convergence.unconverged, 12);
  assert.deepEqual(doc.layers["block.1"].convergence, { estimates: 2, unconverged: 2 });
  assert.deepEqual(doc.layers["block.1"].heads[1].convergence, { estimates: 2, unconverged: 2 });
  // Nothing estimated: said so, no counts.
  const none = analyze(model, x, { truth: { network: false, blocks: false, heads: false } });
  assert.equal(none.convergence.blocks.estimates + none.convergence.heads.estimates, 0);
  assert.match(analysisTables(none), /block\.0 \(true value not computed/);
  assert.match(analysisTables(none), /Block and head true values: not computed\./);
  tf.dispose(x);
  model.dispose();
});

test("attnlip analyze runs on embedded digits with a random vit-tiny and writes its files", async () => {
  const out = mkdtempSync(join(tmpdir(), "attnlip-analyze-cli-"));
  const r = await runAttnlipHere(["analyze", "--model", "vit-tiny", "--random-init", "--seed", "0", "--data", "mnist", "--n", "1", "--no-head-truth", "--mlp", "relaxed", "--iterations", "30", "--out", out]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /network \(exact input-Jacobian norm/);
  assert.match(r.stdout, /block\.3/);
  const doc = JSON.parse(readFileSync(join(out, "analysis.json"), "utf8"));
  assert.equal(doc.layers.network.true.length, 1);
  // The input the attention maps are of, for the report.
  assert.deepEqual([doc.firstInput.kind, doc.firstInput.height, doc.firstInput.width, doc.firstInput.channels, doc.firstInput.pixels.length], ["image", 28, 28, 1, 784]);
  assert.ok(readFileSync(join(out, "analysis.csv"), "utf8").startsWith("input,layer,head,variant"));
  // A second analysis into the same folder is refused before any work without --force.
  const before = readFileSync(join(out, "analysis.json"), "utf8");
  const again = await runAttnlipHere(["analyze", "--model", "vit-micro", "--random-init", "--n", "1", "--out", out]);
  assert.equal(again.code, 2, again.stderr);
  assert.match(again.stderr, /^attnlip: analyze: .*analysis\.json exists \(an earlier result\); give --force to replace it, or --out DIR to write elsewhere\n$/);
  assert.equal(again.stdout, "", "refused before any work");
  assert.equal(readFileSync(join(out, "analysis.json"), "utf8"), before);
  const forced = await runAttnlipHere(["analyze", "--model", "vit-micro", "--random-init", "--n", "1", "--no-head-truth", "--no-block-truth", "--workers", "1", "--out", out, "--force"]);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(JSON.parse(readFileSync(join(out, "analysis.json"), "utf8")).layers.network.true.length, 1);
});

test("a subset of variants: the same values as with all of them, cov's exact query path skipped; files, tables and workers follow the subset", async () => {
  const model = createModel(tinyVit, 3) as TransformerClassifier;
  const x = digits(8);
  try {
    const options = { truth: { heads: false, blocks: false }, mlp: "relaxed" as const };
    const all = analyze(model, x, options);
    const some = analyze(model, x, { ...options, variants: ["t3-exact", "paper", "dist"] });
    assert.deepEqual(some.variants, ["paper", "t3-exact", "dist"]);
    for (const v of some.variants) {
      assert.deepEqual(some.network.bounds[v], all.network.bounds[v], `network ${v}`);
      some.blocks.forEach((b, i) => assert.deepEqual(b.bounds[v], all.blocks[i].bounds[v], `block ${i} ${v}`));
    }
    assert.equal("cov" in some.network.bounds, false);
    assert.equal(Object.keys(some.summary.network.bounds).join(), "paper,t3-exact,dist");
    const csv = analysisCsv(some);
    assert.ok(!/,cov,/.test(csv) && /,t3-exact,/.test(csv));
    assert.doesNotMatch(analysisTables(some), /\bcov\b/);
    assert.throws(() => analyze(model, x, { ...options, variants: ["nope" as never] }), /analyze: variants: unknown variant "nope"/);
  } finally {
    x.dispose();
    model.dispose();
  }
  const out = mkdtempSync(join(tmpdir(), "attnlip-variants-"));
  const r = runAttnlip(["analyze", "--random-init", "--model", "vit-micro", "--n", "2", "--variants", "dist,castin", "--no-head-truth", "--no-block-truth", "--out", out]);
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(readFileSync(join(out, "analysis.json"), "utf8")) as { variants: string[]; layers: { network: Record<string, unknown> } };
  assert.deepEqual(doc.variants, ["dist", "castin"]);
  assert.ok("dist" in doc.layers.network && !("cov" in doc.layers.network));
});

test("attnlip analyze rejects bad input with exit 2 and one line", async () => {
  const cases: [string[], RegExp][] = [
    [["analyze"], /give a checkpoint folder, or --random-init/],
    [["analyze", "/nonexistent/run", "--random-init"], /either a checkpoint folder or --random-init/],
    [["analyze", "/nonexistent/run"], /nonexistent\/run/],
    [["analyze", "--random-init", "--n", "0"], /^attnlip: analyze: --n: must be an integer from 1 to 10000, got "0"$/],
    [["analyze", "--random-init", "--n", "abc"], /^attnlip: analyze: --n: must be an integer from 1 to 10000, got "abc"$/],
    [["analyze", "--random-init", "--model", "vit-huge"], /--model: .*vit-tiny/],
    [["analyze", "--random-init", "--data", "nope"], /data/i],
    [["analyze", "--random-init", "--backend", "gpu"], /gpu/],
    [["analyze", "--random-init", "--model", "vit-micro", "--n", "1", "--variants", "kim"], /^attnlip: analyze: --variants: variant "kim" .* bounds L2 attention only: dot-product attention is not globally Lipschitz/],
    [["analyze", "--random-init", "--model", "vit-micro", "--n", "1", "--variants", "cov,l2-cov"], /^attnlip: analyze: --variants: variants "l2-dist" and "l2-cov" bound L2 attention only/],
    [["analyze", "--random-init", "--model", "vit-micro-l2", "--n", "1", "--variants", "fused,cov"], /^attnlip: analyze: --variants: the variants asked for bound dot-product attention only, and this layer is L2 attention/],
    // Refused before the data is read: the missing folder is not what the message names.
    [["analyze", "--random-init", "--model", "vit-micro-l2", "--data", "idx:/nonexistent", "--variants", "fused"], /^attnlip: analyze: --variants: the variants asked for bound dot-product attention only/],
    [["analyze", "--random-init", "--variants", "paper,bogus"], /^attnlip: analyze: --variants: unknown variant "bogus" \(known: paper, t3-one, .*castin, l2-dist, l2-cov, kim\)$/],
    [["analyze", "--random-init", "--variants", "dist,dist"], /^attnlip: analyze: --variants: "dist" is listed twice$/],
    [["analyze", "--random-init", "--variants", ","], /^attnlip: analyze: --variants: must be variant names separated by commas, got ","$/],
    [["analyze", "--random-init", "--variants", "paper,"], /^attnlip: analyze: --variants: must be variant names separated by commas, got "paper,"$/],
  ];
  // In this process (no start-up per case); the first case also runs as a separate process, as a user would.
  for (const [k, [args, message]] of cases.entries()) {
    const r = k === 0 ? runAttnlip(args) : await runAttnlipHere(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.match(lines[0], message);
  }
});

test("the composition floor: embedding x product of the block true values x final norm x head, between the network's true value and every network bound", async () => {
  const { networkBounds } = await import("../../src/lipschitz/networkBounds.ts");
  const model = createModel(tinyVit, 5) as TransformerClassifier;
  const x = digits(3);
  try {
    const a = analyze(model, x, { maxIterations: 300, truth: { heads: false } });
    const { trace } = model.forward(x, { trace: true });
    const report = networkBounds(model, trace!);
    const { disposeTrace } = await import("../../src/nn/trace.ts");
    disposeTrace(trace!);
    for (let e = 0; e < 3; e++) {
      const ex = report.examples[e];
      // The top-level factors that are not blocks are exactly the view's embedding, final norm and head.
      const others = ex.layers.filter((l) => !l.name.startsWith("blocks.")).reduce((p, l) => p * l.values.cov, 1);
      assert.ok(Math.abs(others - ex.embedding * ex.finalNorm * ex.head) <= 1e-12 * others);
      const expected = a.blocks.reduce((p, b) => p * b.true[e], others);
      const floor = a.compositionFloor[e];
      assert.ok(Math.abs(floor - expected) <= 1e-12 * expected, `input ${e}: floor ${floor} vs ${expected}`);
      assert.ok(floor >= a.network.true[e] * (1 - 1e-6), `input ${e}: floor ${floor} < network true ${a.network.true[e]}`);
      for (const v of HEAD_VARIANTS) assert.ok(a.network.bounds[v][e] >= floor * (1 - 1e-9), `input ${e}: ${v} below the floor`);
    }
    const s = a.summary.compositionFloor!;
    assert.ok(s.floorOverTrue!.median >= 1 - 1e-6 && s.boundOverFloor.cov.median >= 1 - 1e-9);
    assert.match(analysisTables(a), /Composition floor \(.*\): median .*x the network's true value; the tightest network bound \(\S+\) is .*x the floor\./);
    const doc = analysisDocument(a, {}) as { layers: { network: { compositionFloor: number[] } }; summary: { compositionFloor: unknown } };
    assert.deepEqual(doc.layers.network.compositionFloor, a.compositionFloor);
    assert.ok(doc.summary.compositionFloor !== null);
    assert.equal(analysisCsv(a).split("\n").filter((l) => l.includes(",composition-floor,")).length, 3);
    // Without block true values there is no floor (NaN per input, null summary, a table line that says why).
    const noBlocks = analyze(model, x, { truth: { heads: false, blocks: false } });
    assert.ok(noBlocks.compositionFloor.every(Number.isNaN));
    assert.equal(noBlocks.summary.compositionFloor, null);
    assert.match(analysisTables(noBlocks), /Composition floor: not computed \(it needs the blocks. true values; --no-block-truth left them out\)\./);
  } finally {
    x.dispose();
    model.dispose();
  }
});
