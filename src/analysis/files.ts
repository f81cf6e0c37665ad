import { stringify } from "csv-stringify/sync";
import { join } from "node:path";
import { writeFileAtomically, writeJsonAtomically } from "../io/atomicWrite.ts";
import type { Analysis, BoundsAgainstTruth } from "./analyze.ts";

/** Layer-level arrays as analysis.json lays them out: one array over inputs per variant and `true`. */
function layerArrays(b: BoundsAgainstTruth): Record<string, unknown> {
  return { ...b.bounds, true: b.true, ratio: b.ratios };
}

/**
 * The analysis.json document: `layers` maps "block.i" and "network" to one array over inputs
 * for each bound variant and for `true` (plus `ratio`, heads and convergence details), and
 * `summary` holds medians and quartiles. NaN (a true value not computed) is written as null.
 */
export function analysisDocument(analysis: Analysis, meta: Record<string, unknown>): Record<string, unknown> {
  const layers: Record<string, unknown> = {};
  analysis.blocks.forEach((b) => {
    layers[b.name] = {
      ...layerArrays(b),
      truthMethod: "power iteration on Df^T Df (an estimate from below)",
      iterations: b.iterations,
      relativeChange: b.relativeChange,
      converged: b.converged,
      ln1: b.ln1,
      ln2: b.ln2,
      mlpLocal: b.mlpLocal,
      mlpRelaxed: b.mlpRelaxed,
      heads: b.heads.map((h) => ({ head: h.head, ...layerArrays(h), attention: h.stats })),
    };
  });
  layers.network = { ...layerArrays(analysis.network), truthMethod: "exact: spectral norm of the C x D input Jacobian" };
  const summary: Record<string, unknown> = {};
  analysis.blocks.forEach((b, i) => (summary[b.name] = analysis.summary.blocks[i]));
  summary.network = analysis.summary.network;
  return {
    ...meta,
    inputs: analysis.inputs,
    inputSpace: analysis.inputSpace,
    variants: analysis.variants,
    seconds: analysis.seconds,
    layers,
    summary,
    attentionRows: analysis.attentionRows,
    attentionMaps: analysis.attentionMaps,
  };
}

/** Long-format CSV: one row per input, layer, head ("" for the whole layer) and variant. */
export function analysisCsv(analysis: Analysis): string {
  const rows: (string | number)[][] = [["input", "layer", "head", "variant", "bound", "true", "ratio"]];
  const add = (layer: string, head: string, b: BoundsAgainstTruth) => {
    for (let i = 0; i < b.true.length; i++)
      for (const v of analysis.variants) rows.push([i, layer, head, v, b.bounds[v][i], num(b.true[i]), num(b.ratios[v][i])]);
  };
  for (const block of analysis.blocks) {
    add(block.name, "", block);
    for (const h of block.heads) add(block.name, String(h.head), h);
  }
  add("network", "", analysis.network);
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
