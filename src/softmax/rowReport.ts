import { sigma } from "./sigma.ts";
import { sigmaQuad, sigmaTop2 } from "./closedForm.ts";
import { referenceBounds } from "./referenceBounds.ts";

/**
 * Every per-row quantity `attnlip sigma` reports, in its JSON order: the exact sigma, the
 * two closed forms, and the classical bounds (docs/math.md section 1).
 */
export interface RowReport {
  n: number;
  sigma: number;
  sigmaQuad: number;
  sigmaTop2: number;
  top1: number;
  gershgorin: number;
  trace: number;
  half: number;
}

/** The bound names of {@link RowReport}, tightest first (all are >= sigma). */
export const ROW_BOUNDS = ["sigmaQuad", "sigmaTop2", "top1", "gershgorin", "trace", "half"] as const;

/** Computes the {@link RowReport} of one probability row (validated beforehand). */
export function rowReport(p: ArrayLike<number>): RowReport {
  const ref = referenceBounds(p);
  return {
    n: p.length,
    sigma: sigma(p),
    sigmaQuad: sigmaQuad(p),
    sigmaTop2: sigmaTop2(p),
    top1: ref.top1,
    gershgorin: ref.gershgorin,
    trace: ref.trace,
    half: ref.half,
  };
}
