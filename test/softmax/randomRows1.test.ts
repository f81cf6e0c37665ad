import { test } from "node:test";
import { checkRandomRows, SWEEP_ROWS } from "./checkRandomRows.ts";

// Half of the random rows (the other half runs in the sibling file, on the other core):
// 500 here by default, 5,000 with ATTNLIP_FULL_SWEEPS=1.
test(`${SWEEP_ROWS} random softmax rows (seed 2) against the dense eigensolver; sigma <= quad <= top2 <= 1/2`, () => {
  checkRandomRows(SWEEP_ROWS, 2);
});
