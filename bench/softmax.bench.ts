import { EigenvalueDecomposition, Matrix } from "ml-matrix";
import { tf, useBackend } from "../src/backend.ts";
import { sigmaRows, softmaxRow } from "../src/softmax/index.ts";
import { renderTable } from "../src/util/table.ts";
import { timeMs } from "./timing.ts";
import { mulberry32 } from "../src/nn/prng.ts";

/** Seeded normal logits, so every run measures the same rows. */
function randomLogits(count: number, seed: number, scale: number): Float32Array {
  const rand = mulberry32(seed);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++)
    out[i] = Math.sqrt(-2 * Math.log(Math.max(rand(), 1e-300))) * Math.cos(2 * Math.PI * rand()) * scale;
  return out;
}

function softmaxRows(logits: Float32Array, n: number): Float64Array {
  const out = new Float64Array(logits.length);
  for (let r = 0; r < logits.length / n; r++) out.set(softmaxRow(logits.subarray(r * n, (r + 1) * n)), r * n);
  return out;
}

function denseLambdaMax(p: Float64Array, offset: number, n: number): number {
  const m = new Matrix(n, n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) m.set(i, j, (i === j ? p[offset + i] : 0) - p[offset + i] * p[offset + j]);
  return Math.max(...new EigenvalueDecomposition(m, { assumeSymmetric: true }).realEigenvalues);
}

/** Issue 2's benchmark: rows per second of each sigma, against the dense eigensolver and tfjs softmax. */
export async function benchSoftmax(): Promise<Record<string, unknown>> {
  await useBackend("wasm");
  const perN: Record<string, unknown>[] = [];
  const table: (string | number)[][] = [];
  for (const n of [16, 64, 197, 512]) {
    const rows = Math.max(64, Math.floor(200_000 / n));
    const p = softmaxRows(randomLogits(rows * n, n, 2), n);
    const out = new Float64Array(rows);
    const perRow = (norm: "exact" | "quad" | "top2") => timeMs(() => sigmaRows(p, n, { norm, out })) / rows;
    const exact = perRow("exact");
    const quad = perRow("quad");
    const top2 = perRow("top2");
    const eigRows = n >= 512 ? 2 : n >= 197 ? 4 : 16;
    const eig =
      timeMs(
        () => {
          for (let r = 0; r < eigRows; r++) denseLambdaMax(p, r * n, n);
        },
        { warmup: 1, repeats: 3, minMs: 1 },
      ) / eigRows;
    const entry = {
      n,
      rowsPerSecond: { exact: 1000 / exact, quad: 1000 / quad, top2: 1000 / top2, eigensolver: 1000 / eig },
      speedupOverEigensolver: { exact: eig / exact, quad: eig / quad, top2: eig / top2 },
    };
    perN.push(entry);
    table.push([n, 1000 / exact, 1000 / quad, 1000 / top2, 1000 / eig, eig / exact]);
  }
  console.log("sigma rows per second (float64, one core) and exact sigma's speed-up over ml-matrix's dense eigensolver");
  console.log(renderTable(["n", "exact rows/s", "quad rows/s", "top2 rows/s", "eigensolver rows/s", "exact / eigensolver"], table));

  // A whole ViT-B-sized attention map [12, 197, 197]: sigma over every row (including the
  // read-back of the probabilities) against the tfjs softmax that produced them.
  const shape = [12, 197, 197];
  const logits = tf.tensor(randomLogits(12 * 197 * 197, 5, 3), shape);
  const softmaxMs = timeMs(() => {
    const probs = tf.softmax(logits);
    probs.dataSync();
    probs.dispose();
  });
  const probs = tf.softmax(logits);
  const mapOut = new Float64Array(12 * 197);
  const mapMs: Record<string, number> = {};
  for (const norm of ["exact", "quad", "top2"] as const)
    mapMs[norm] = timeMs(() => sigmaRows(probs.dataSync(), 197, { norm, out: mapOut }));
  tf.dispose([logits, probs]);
  console.log("whole attention map [12, 197, 197]: time relative to the wasm softmax that produced it (both with read-back)");
  console.log(
    renderTable(
      ["what", "ms", "ratio to softmax"],
      [["tfjs softmax", softmaxMs, 1], ...(["exact", "quad", "top2"] as const).map((k) => [`sigma ${k}`, mapMs[k], mapMs[k] / softmaxMs])],
    ),
  );
  return { perN, attentionMap: { shape, softmaxMs, sigmaMs: mapMs, ratioToSoftmax: Object.fromEntries(Object.entries(mapMs).map(([k, v]) => [k, v / softmaxMs])) } };
}
