import { test } from "node:test";
import { checkRandomRows } from "./checkRandomRows.ts";

// Half of the 10,000 random rows (the other half runs in the sibling file, on the other core).
test("5,000 random softmax rows (seed 2) against the dense eigensolver; sigma <= quad <= top2 <= 1/2", () => {
  checkRandomRows(5000, 2);
});
