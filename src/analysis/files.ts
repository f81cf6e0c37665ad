import { stringify } from "csv-stringify/sync";
import { join } from "node:path";
import { writeFileAtomically, writeJsonAtomically } from "../io/atomicWrite.ts";
import { TRUTH_METHOD } from "../lipschitz/truth/powerIteration.ts";
import { convergenceCount, type Analysis, type BoundsAgainstTruth, type TruthRecord } from "./analyze.ts";

/** Layer-level arrays as analysis.json lays them out: one array over inputs per variant and `true`. */
function layerArrays(b: BoundsAgainstTruth): Record<string, unknown> {
  return { ...b.bounds, true: b.true, ratio: b.ratios };
}

/** What analysis.json says the composition floor is (analyze.ts compositionFloor). */
export const COMPOSITION_FLOOR_NOTE =
  "product of the blocks' true values x every factor outside the blocks (embedding, norms, pooling, head): the least any product of per-block bounds with these factors can be; the block values are Lanczos estimates from below, so the floor is one too (null where block true values were not computed)";

const TRUTH_METHOD_NOTE = `${TRUTH_METHOD}: Krylov power iteration on Df^T Df, stopped by the residual test (an estimate from below, not a bound)`;

/**
 * How an estimated true value was made, per input (iterations, residual, relativeChange,
 * converged; null where not computed) and the layer's counts.
 */
function truthArrays(r: TruthRecord): Record<string, unknown> {
  return {
    truthMethod: TRUTH_METHOD_NOTE,
    iterations: r.iterations,
    residual: r.residual,
    relativeChange: r.relativeChange,
    converged: r.converged,
    convergence: convergenceCount(r),
  };
}

/**
 * The analysis.json document: `layers` maps "block.i" and "network" to one array over inputs
 * for each bound variant and for `true` (plus `ratio`, heads, and for blocks and heads how
 * each estimated true value was made: iterations, residual, converged, and the counts
 * `convergence: {estimates, unconverged}`), `summary` holds medians and quartiles, and the
 * top-level `convergence` holds the method, tolerance, cap and unconverged counts. NaN (a
 * value not computed) is written as null, and so is Infinity, the vacuous bound of a model
 * with a layer that has none (L2 attention): `notes` then says why.
 */
export function analysisDocument(analysis: Analysis, meta: Record<string, unknown>): Record<string, unknown> {
  const layers: Record<string, unknown> = {};
  analysis.blocks.forEach((b) => {
    layers[b.name] = {
      ...layerArrays(b),
      ...truthArrays(b),
      ln1: b.ln1,
      ln2: b.ln2,
      mlpLocal: b.mlpLocal,
      mlpRelaxed: b.mlpRelaxed,
      heads: b.heads.map((h) => ({ head: h.head, ...layerArrays(h), ...truthArrays(h), attention: h.stats })),
    };
  });
  layers.network = {
    ...layerArrays(analysis.network),
    truthMethod: "exact: spectral norm of the C x D input Jacobian",
    compositionFloor: analysis.compositionFloor,
    compositionFloorMethod: COMPOSITION_FLOOR_NOTE,
    outsideBlocks: analysis.outside,
  };
  const summary: Record<string, unknown> = {};
  analysis.blocks.forEach((b, i) => (summary[b.name] = analysis.summary.blocks[i]));
  summary.network = analysis.summary.network;
  summary.compositionFloor = analysis.summary.compositionFloor;
  return {
    ...meta,
    inputs: analysis.inputs,
    inputSpace: analysis.inputSpace,
    variants: analysis.variants,
    ...(analysis.notes.length > 0 ? { notes: analysis.notes } : {}),
    seconds: analysis.seconds,
    convergence: analysis.convergence,
    layers,
    summary,
    attentionRows: analysis.attentionRows,
    attentionMaps: analysis.attentionMaps,
  };
}

/**
 * Long-format CSV: one row per input, layer, head ("" for the whole layer) and variant (plus,
 * where computed, the network's composition floor as variant "composition-floor"); the last
 * column, true_converged, says whether an estimated true value converged ("true" or
 * "false"; "" for the network's exact value and for values not computed). A variant that has
 * no bound for a layer (dot-product variants on L2 attention) has bound "Infinity", the vacuous
 * bound, which numeric CSV readers read as infinite (checked with numpy's genfromtxt);
 * analysis.json writes null there and says why in its notes. true and ratio are "" where not
 * finite.
 */
export function analysisCsv(analysis: Analysis): string {
  const rows: (string | number)[][] = [["input", "layer", "head", "variant", "bound", "true", "ratio", "true_converged"]];
  const add = (layer: string, head: string, b: BoundsAgainstTruth, record?: TruthRecord) => {
    for (let i = 0; i < b.true.length; i++) {
      const c = record?.converged[i];
      const flag = typeof c === "boolean" ? String(c) : "";
      for (const v of analysis.variants) rows.push([i, layer, head, v, b.bounds[v][i], num(b.true[i]), num(b.ratios[v][i]), flag]);
    }
  };
  for (const block of analysis.blocks) {
    add(block.name, "", block, block);
    for (const h of block.heads) add(block.name, String(h.head), h, h);
  }
  add("network", "", analysis.network);
  // The composition floor as its own variant of the network: bound column = the floor.
  analysis.compositionFloor.forEach((f, i) => {
    if (Number.isFinite(f)) {
      const t = analysis.network.true[i];
      rows.push([i, "network", "", "composition-floor", f, num(t), Number.isFinite(t) && t > 0 ? f / t : "", ""]);
    }
  });
  return stringify(rows);
}

const num = (x: number) => (Number.isFinite(x) ? x : "");

/** Writes DIR/analysis.json and DIR/analysis.csv atomically; returns their paths. */
export async function writeAnalysis(dir: string, analysis: Analysis, meta: Record<string, unknown>): Promise<string[]> {
  const json = join(dir, "analysis.json");
  const csv = join(dir, "analysis.csv");
  await writeJsonAtomically(json, analysisDocument(analysis, meta));
  await writeFileAtomically(csv, analysisCsv(analysis));
  return [json, csv];
}
