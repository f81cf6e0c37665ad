import { median } from "simple-statistics";
import { formatNumber, renderTable } from "../util/table.ts";
import {
  convergenceCount,
  type Analysis,
  type BoundsSummary,
  type ConvergenceCount,
  type ConvergenceSummary,
} from "./analyze.ts";

/** "k of n" counts of unconverged block and head estimates of one layer. */
function unconvergedNote(block: ConvergenceCount, heads: ConvergenceCount): string {
  const parts: string[] = [];
  if (block.unconverged > 0) parts.push(`${block.unconverged} of ${block.estimates} block estimates`);
  if (heads.unconverged > 0) parts.push(`${heads.unconverged} of ${heads.estimates} head estimates`);
  return parts.join(" and ");
}

/**
 * The closing line: how block and head true values were estimated and how many did not converge.
 *
 * @example convergenceLine(analysis.convergence)
 * // "Block and head true values: estimates from below (lanczos, residual tolerance 1e-6, cap 1000
 * //  products, at most 19 used); all 40 converged."
 */
export function convergenceLine(c: ConvergenceSummary): string {
  const estimates = c.blocks.estimates + c.heads.estimates;
  if (estimates === 0) return "Block and head true values: not computed.";
  const how = `${c.method}, residual tolerance ${c.tolerance.toExponential()}, cap ${c.maxIterations} products, at most ${c.mostIterations} used`;
  return c.unconverged === 0
    ? `Block and head true values: estimates from below (${how}); all ${estimates} converged.`
    : `Block and head true values: estimates from below (${how}); ${c.unconverged} of ${estimates} NOT converged ` +
        `(${c.blocks.unconverged} of ${c.blocks.estimates} block, ${c.heads.unconverged} of ${c.heads.estimates} head): ` +
        "each is low by an unknown amount and its ratios bound/true too high (raise --iterations).";
}

/**
 * One table per layer: median bound of each variant, median true value, median ratio. A block
 * whose true values include unconverged estimates has its true value marked "*" and a line
 * counting them (its heads' unconverged estimates are counted there too); a last line sums up
 * how the estimates were made and how many did not converge (docs/math.md section 5). A bound
 * that is Infinity (a layer without a bound, e.g. L2 attention) shows as "none", with the
 * analysis's notes saying why.
 *
 * @returns plain text for the terminal. @example console.log(analysisTables(analyze(model, x)))
 */
export function analysisTables(analysis: Analysis): string {
  const parts: string[] = [];
  // Infinity is the vacuous bound of a layer without one (analysis.notes say why): "none".
  const bound = (x: number | undefined) => (x === Infinity ? "none" : (x ?? NaN));
  const one = (name: string, s: BoundsSummary, note: string, flag = "") => {
    const rows: (string | number)[][] = analysis.variants.map((v) => [
      v,
      bound(s.bounds[v].median),
      flag === "" ? (s.true?.median ?? NaN) : `${formatNumber(s.true?.median)} ${flag}`,
      bound(s.ratios?.[v].median),
      bound(s.ratios?.[v].max),
    ]);
    parts.push(`${name} (${note}; medians over ${analysis.inputs} inputs)`);
    parts.push(renderTable(["variant", "bound", "true", "bound/true", "max bound/true"], rows));
  };
  analysis.blocks.forEach((b, i) => {
    const block = convergenceCount(b);
    const heads = b.heads.map(convergenceCount).reduce(
      (a, c) => ({ estimates: a.estimates + c.estimates, unconverged: a.unconverged + c.unconverged }),
      { estimates: 0, unconverged: 0 },
    );
    const flagged = unconvergedNote(block, heads);
    one(
      b.name,
      analysis.summary.blocks[i],
      (block.estimates === 0 ? "true value not computed" : `true value: ${analysis.convergence.method} estimate from below`) +
        (flagged === "" ? "" : `, ${flagged} NOT converged`),
      block.unconverged > 0 ? "*" : "",
    );
    if (block.unconverged > 0)
      parts.push(`* ${block.unconverged} of ${block.estimates} true values of ${b.name} did not converge: the median may be low.`);
  });
  one("network", analysis.summary.network, `exact input-Jacobian norm, input = ${analysis.inputSpace}`);
  const floor = analysis.summary.compositionFloor;
  if (floor !== null && analysis.variants.every((v) => floor.boundOverFloor[v].median === Infinity))
    parts.push(
      `Composition floor (product of the blocks' true values x every factor outside the blocks): median ${formatNumber(floor.floor.median)}` +
        (floor.floorOverTrue === null ? "" : `, ${formatNumber(floor.floorOverTrue.median)}x the network's true value`) +
        "; no network bound to compare.",
    );
  else if (floor !== null) {
    const tightest = analysis.variants.reduce((best, v) => (floor.boundOverFloor[v].median < floor.boundOverFloor[best].median ? v : best));
    parts.push(
      `Composition floor (product of the blocks' true values x every factor outside the blocks (embedding, norms, pooling, head); no product of block bounds can be lower): ` +
        `median ${formatNumber(floor.floor.median)}` +
        (floor.floorOverTrue === null ? "" : `, ${formatNumber(floor.floorOverTrue.median)}x the network's true value`) +
        `; the tightest network bound (${tightest}) is ${formatNumber(floor.boundOverFloor[tightest].median)}x the floor.`,
    );
  } else if (analysis.summary.blocks.length > 0)
    parts.push("Composition floor: not computed (it needs the blocks' true values; --no-block-truth left them out).");
  const outside = Object.entries(analysis.outside);
  if (outside.length > 0)
    parts.push(`Factors outside the blocks (medians; the same for every variant): ${outside.map(([name, v]) => `${name} ${formatNumber(median(v))}`).join(", ")}.`);
  for (const note of analysis.notes ?? []) parts.push(`Bound "none": ${note}.`);
  parts.push(convergenceLine(analysis.convergence));
  return parts.join("\n");
}
