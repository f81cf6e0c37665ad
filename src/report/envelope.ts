/**
 * The region of the (p_(1), sigma) plane that attention rows can occupy, drawn beside the rows
 * in the report's scatter plot.
 *
 * Upper envelope: sigma <= p_(1) (interlacing) and sigma <= p_(1)(1 - p_(1) + p_(2)) (the
 * closed form sigmaTop2) with p_(2) <= min(p_(1), 1 - p_(1)). For p_(1) <= 1/2 a tie at the top
 * (p_(2) = p_(1), the rest spread over entries <= p_(1), possible in any row of n >= 1/p_(1)
 * entries) attains sigma = p_(1); for p_(1) >= 1/2 the two-atom row (p_(1), 1 - p_(1)) attains
 * 2 p_(1)(1 - p_(1)). So the largest sigma of rows with top entry p_(1) is exactly
 * sigmaMax(p_(1)) = p_(1) for p_(1) <= 1/2, 2 p_(1)(1 - p_(1)) for p_(1) >= 1/2.
 *
 * Lower envelope: the Rayleigh quotient at e_(1) gives sigma >= p_(1) - p_(1)^2 = p_(1)(1 - p_(1));
 * it is approached by rows whose remaining mass is spread over many tiny entries (n -> infinity).
 */

/** The largest sigma(p) over probability rows p whose largest entry is p1 (see the module note). */
export function sigmaUpperEnvelope(p1: number): number {
  return p1 <= 0.5 ? p1 : 2 * p1 * (1 - p1);
}

/** A lower bound on sigma(p) for rows whose largest entry is p1: p1 (1 - p1) (Rayleigh quotient at e_(1)). */
export function sigmaLowerEnvelope(p1: number): number {
  return p1 * (1 - p1);
}

/** One point of an envelope curve, as the chart draws it. */
export interface EnvelopePoint {
  p1: number;
  sigma: number;
  curve: string;
}

/** Names of the two curves in the chart's legend. */
export const ENVELOPE_CURVES = {
  upper: "max sigma for this p(1)",
  lower: "p(1)(1 - p(1)) lower bound",
} as const;

/**
 * Points of both envelope curves on [from, 1] (from = 0 by default), `steps` intervals each,
 * with p1 = 1/2 (the upper curve's kink) included exactly.
 */
export function envelopePoints(steps = 100, from = 0): EnvelopePoint[] {
  const xs = new Set<number>();
  for (let i = 0; i <= steps; i++) xs.add(from + ((1 - from) * i) / steps);
  if (from <= 0.5) xs.add(0.5);
  const sorted = [...xs].sort((a, b) => a - b);
  return [
    ...sorted.map((p1) => ({ p1, sigma: sigmaUpperEnvelope(p1), curve: ENVELOPE_CURVES.upper })),
    ...sorted.map((p1) => ({ p1, sigma: sigmaLowerEnvelope(p1), curve: ENVELOPE_CURVES.lower })),
  ];
}
