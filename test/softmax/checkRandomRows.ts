import assert from "node:assert/strict";
import { sigma, sigmaQuad, sigmaTop2, referenceBounds } from "../../src/softmax/index.ts";
import { denseSigma } from "../helpers/denseSigma.ts";
import { randomSoftmaxRows } from "./randomRows.ts";

const within = (a: number, b: number) => Math.abs(a - b) <= 1e-10 * Math.abs(b) || Math.abs(a - b) <= 1e-15;
const atMost = (a: number, b: number) => a <= b || within(a, b);

/**
 * Rows per sweep file: 500 by default (1,000 over the two files, a few seconds each), the
 * full 5,000 (10,000 in all) when ATTNLIP_FULL_SWEEPS=1 (README: Tests).
 */
export const SWEEP_ROWS = process.env.ATTNLIP_FULL_SWEEPS === "1" ? 5000 : 500;

/** The property test: exact sigma against the eigensolver, and the bound chain. */
export function checkRandomRows(count: number, seed: number): void {
  let rows = 0;
  let ties = 0;
  for (const p of randomSoftmaxRows(count, seed)) {
    const exact = sigma(p);
    const oracle = denseSigma(p);
    assert.ok(within(exact, oracle), `n=${p.length}: sigma ${exact} vs eigensolver ${oracle}`);
    const quad = sigmaQuad(p);
    const top2 = sigmaTop2(p);
    assert.ok(atMost(exact, quad), `sigma ${exact} > sigmaQuad ${quad} (n=${p.length})`);
    assert.ok(atMost(quad, top2), `sigmaQuad ${quad} > sigmaTop2 ${top2} (n=${p.length})`);
    assert.ok(atMost(top2, 0.5), `sigmaTop2 ${top2} > 1/2`);
    const ref = referenceBounds(p);
    assert.ok(atMost(exact, ref.top1) && atMost(exact, ref.gershgorin) && atMost(exact, ref.trace));
    const sorted = [...p].sort((x, y) => y - x);
    if (sorted.length >= 2 && sorted[0] === sorted[1]) {
      ties++;
      assert.equal(exact, sorted[0], "a tie at the top gives sigma = p_(1) exactly");
      assert.ok(within(quad, exact) && within(top2, quad), "on a tie at the top both closed forms equal p_(1)");
    }
    rows++;
  }
  assert.equal(rows, count);
  assert.ok(ties > count / 20, `expected some exact ties, got ${ties}`);
}
