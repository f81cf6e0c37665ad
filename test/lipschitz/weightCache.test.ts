// Weight-only quantities computed once per weight content (issue 35): the Gram kernels that
// spectral norms use, the Jacobi stopping rule, and the disk cache of weight norms.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { deserialize, serialize } from "node:v8";
import { EigenvalueDecomposition, Matrix } from "ml-matrix";
import { tf, useBackend } from "../../src/backend.ts";
import { gramCols, gramRows, sqrtFactor, symEigen } from "../../src/lipschitz/linalg.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import {
  cachedWeightQuantity,
  useWeightCacheStore,
  type WeightCacheStore,
} from "../../src/lipschitz/weightCache.ts";
import { weightCacheOnDisk, weightCacheSources } from "../../src/analysis/weightCacheStore.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { uniform } from "../nn/helpers.ts";

/** The plain loops the blocked Gram kernel replaced (sums over k in order). */
function plainGramRows(m: ArrayLike<number>, rows: number, cols: number): Float64Array {
  const g = new Float64Array(rows * rows);
  for (let i = 0; i < rows; i++)
    for (let j = 0; j < rows; j++) {
      let s = 0;
      for (let k = 0; k < cols; k++) s += m[i * cols + k] * m[j * cols + k];
      g[i * rows + j] = s;
    }
  return g;
}
function plainGramCols(m: ArrayLike<number>, rows: number, cols: number): Float64Array {
  const g = new Float64Array(cols * cols);
  for (let i = 0; i < cols; i++)
    for (let j = 0; j < cols; j++) {
      let s = 0;
      for (let r = 0; r < rows; r++) s += m[r * cols + i] * m[r * cols + j];
      g[i * cols + j] = s;
    }
  return g;
}

test("the blocked Gram kernels are bit-identical to plain loops, for odd and even sizes, float32 and float64", () => {
  for (const [rows, cols] of [
    [1, 1],
    [1, 5],
    [5, 1],
    [2, 3],
    [3, 2],
    [7, 7],
    [8, 5],
    [5, 8],
    [33, 64],
  ]) {
    const m64 = Float64Array.from(uniform(rows * cols, rows * 100 + cols, -1, 1));
    const m32 = Float32Array.from(m64);
    for (const m of [m64, m32]) {
      assert.deepEqual(
        gramRows(m, rows, cols),
        plainGramRows(m, rows, cols),
        `gramRows ${rows}x${cols}`,
      );
      assert.deepEqual(
        gramCols(m, rows, cols),
        plainGramCols(m, rows, cols),
        `gramCols ${rows}x${cols}`,
      );
    }
  }
});

test("symEigen stops on the relative pair rule and still matches an independent decomposition to 1e-12", () => {
  for (const [d, dk, seed] of [
    [96, 64, 1],
    [40, 16, 2],
    [16, 16, 3],
  ]) {
    const g = gramCols(uniform(d * dk, seed, -0.1, 0.1), d, dk);
    const ours = Float64Array.from(symEigen(g, dk).values).sort();
    const ref = new EigenvalueDecomposition(
      new Matrix(
        Array.from({ length: dk }, (_, i) => Array.from(g.subarray(i * dk, (i + 1) * dk))),
      ),
    ).realEigenvalues.sort((a, b) => a - b);
    const top = ref[dk - 1];
    for (let i = 0; i < dk; i++)
      assert.ok(
        Math.abs(ours[i] - ref[i]) <= 1e-12 * top,
        `eigenvalue ${i}: ${ours[i]} vs ${ref[i]}`,
      );
    // F^T F = G: the square-root factor the head bounds use.
    const f = sqrtFactor(g, dk);
    let worst = 0;
    for (let i = 0; i < dk; i++)
      for (let j = 0; j < dk; j++) {
        let s = 0;
        for (let k = 0; k < dk; k++) s += f[k * dk + i] * f[k * dk + j];
        worst = Math.max(worst, Math.abs(s - g[i * dk + j]));
      }
    assert.ok(worst <= 1e-12 * top, `F^T F - G: ${worst}`);
  }
});

test("a weight quantity is computed once per content: a changed entry (one float32 ulp) is another key", () => {
  let computed = 0;
  const before = useWeightCacheStore(weightCacheOnDisk({ dir: null }));
  try {
    const w = Float32Array.from(uniform(12, 5, -1, 1));
    const f = () =>
      cachedWeightQuantity(
        "sum",
        [w],
        () => (computed++, w.reduce((a, b) => a + b, 0)),
        (v): v is number => typeof v === "number",
      );
    const isNumber = (v: unknown): v is number => typeof v === "number";
    assert.equal(f(), f());
    assert.equal(computed, 1);
    const changed = Float32Array.from(w);
    changed[3] = Math.fround(changed[3] * (1 + 2 ** -23));
    assert.notEqual(changed[3], w[3]);
    cachedWeightQuantity("sum", [changed], () => (computed++, 0), isNumber);
    assert.equal(computed, 2, "a different content must not hit the cache");
    cachedWeightQuantity("other", [w], () => (computed++, 0), isNumber);
    assert.equal(computed, 3, "another quantity of the same weights must not hit the cache");
  } finally {
    useWeightCacheStore(before);
  }
});

test("networkBounds with the disk cache of weight norms: the same values, bit for bit, cold, warm, from disk and after a damaged file", async () => {
  await useBackend("wasm");
  const model = createModel(
    {
      kind: "text",
      vocabSize: 50,
      maxLength: 12,
      dModel: 16,
      heads: 2,
      blocks: 2,
      mlpHidden: 32,
      classes: 2,
      norm: "post",
      pooler: "tanh",
      embeddingNorm: true,
      finalNorm: false,
      tokenTypes: 2,
    },
    3,
  ) as TransformerClassifier;
  const ids = tf.tensor2d([[1, 5, 9, 2, 7, 3, 0, 4]], [1, 8], "int32");
  const { logits, trace } = model.forward(ids, { trace: true });
  const dir = mkdtempSync(join(tmpdir(), "attnlip-weights-"));
  const run = () => networkBounds(model, trace!, { mlp: "relaxed" }).examples[0];
  try {
    const plain = run();
    let hits = 0;
    const counting = (inner: WeightCacheStore): WeightCacheStore => ({
      key: inner.key,
      get: (k) => {
        const v = inner.get(k);
        if (v !== undefined) hits++;
        return v;
      },
      set: inner.set,
    });
    const before = useWeightCacheStore(counting(weightCacheOnDisk({ dir })));
    try {
      assert.deepEqual(run(), plain, "cold");
      const files = readdirSync(dir).filter((f) => f.endsWith(".v8"));
      assert.ok(files.length >= 2 * 2 + 2 * 3, `one file per head, W_O, W_1, W_2: ${files.length}`);
      assert.equal(hits, 0);
      assert.deepEqual(run(), plain, "warm (memory)");
      assert.ok(hits > 0);
      // A fresh store (another process) reads the files.
      useWeightCacheStore(counting(weightCacheOnDisk({ dir })));
      hits = 0;
      assert.deepEqual(run(), plain, "from disk");
      assert.equal(hits, files.length);
      // Damaged files are computed again, never used: not a v8 value; one flipped bit of a
      // stored norm; another key's file (a whole, valid file under the wrong name); a valid file
      // of this key whose value has the wrong type (a string for a norm, a head's factors cut).
      const bytes = (f: string) => readFileSync(join(dir, f));
      const body = (f: string) =>
        deserialize(bytes(f).subarray(32)) as { key: string; value: unknown };
      const withDigest = (b: Buffer) => Buffer.concat([createHash("sha256").update(b).digest(), b]);
      const byType = (t: string) => files.filter((f) => typeof body(f).value === t);
      const [n1, n2, n3] = byType("number");
      const [h1] = byType("object");
      writeFileSync(join(dir, n1), "not a v8 value");
      const flipped = bytes(n2);
      flipped[flipped.length - 3] ^= 1; // inside the float64 of the norm
      writeFileSync(join(dir, n2), flipped);
      writeFileSync(join(dir, n3), bytes(h1));
      const head = body(h1);
      const cut = { ...(head.value as Record<string, unknown>), fq: new Float64Array(3) };
      writeFileSync(join(dir, h1), withDigest(serialize({ key: head.key, value: cut })));
      useWeightCacheStore(counting(weightCacheOnDisk({ dir })));
      assert.deepEqual(run(), plain, "from disk, four files damaged");
      // Each damaged file was written anew: a fresh store reads every file back.
      useWeightCacheStore(counting(weightCacheOnDisk({ dir })));
      hits = 0;
      assert.deepEqual(run(), plain, "from disk after the damaged files were replaced");
      assert.equal(hits, files.length);
      assert.equal(body(n3).key, n3.slice(0, -".v8".length));
      assert.equal((body(h1).value as { fq: Float64Array }).fq.length, 8 * 8);
    } finally {
      useWeightCacheStore(before);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    disposeTrace(trace!);
    tf.dispose([logits, ids]);
    model.dispose();
  }
});

test("worker threads find the same cache folder and source digest from their bundle under node_modules/.cache/attnlip", () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
  const fromSources = weightCacheSources(join(root, "src", "analysis", "weightCacheStore.ts"));
  const fromBundle = weightCacheSources(
    join(root, "node_modules", ".cache", "attnlip", "worker-0123456789abcdef.mjs"),
  );
  assert.ok(fromSources !== null, "the checkout's sources are found");
  assert.deepEqual(fromBundle, fromSources);
  assert.match(fromSources.version, /^[0-9a-f]{64}$/);
  assert.equal(weightCacheSources("/no-such-folder/x.ts"), null);
});
