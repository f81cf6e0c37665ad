// The built-in bound variants' records (src/lipschitz/variants/): the section of docs/math.md
// each names exists and derives it, each has a legend note and a colour of its own, and the
// registry keeps docs/math.md's order, the families the charts draw and the refusals of L2
// variants by dot-product attention.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  boundVariants,
  checkVariants,
  KIM_DOT_REFUSED,
  L2_LOCAL_DOT_REFUSED,
  refuseL2Variants,
  variantNames,
} from "../../src/lipschitz/variants/index.ts";
import { variantFamily } from "../../src/report/charts.ts";

const math = readFileSync(new URL("../../docs/math.md", import.meta.url), "utf8");

/** The text of the docs/math.md section under a heading (up to the next heading of its level or above). */
function section(heading: string): string | null {
  const lines = math.split("\n");
  const start = lines.findIndex((l) => /^#{2,3} /.test(l) && l.replace(/^#+ /, "") === heading);
  if (start < 0) return null;
  const level = lines[start].indexOf(" ");
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && l.indexOf(" ") <= level);
  return lines.slice(start, end < 0 ? undefined : end).join("\n");
}

test("each built-in variant names a docs/math.md section that derives it, a note and a colour of its own", () => {
  const builtins = boundVariants();
  assert.deepEqual(variantNames(), [
    "paper",
    "t3-one",
    "t3-half",
    "t3-top2",
    "t3-quad",
    "t3-exact",
    "dist",
    "cov",
    "fused",
    "castin",
    "l2-dist",
    "l2-cov",
    "kim",
  ]);
  for (const v of builtins) {
    const text = section(v.math);
    assert.ok(text !== null, `${v.name}: docs/math.md has no heading "${v.math}"`);
    assert.ok(text.includes(`\`${v.name}\``), `${v.name}: section "${v.math}" does not name it`);
    assert.ok(v.note.length > 10, `${v.name}: note`);
  }
  assert.equal(new Set(builtins.map((v) => v.colour)).size, builtins.length);
  assert.ok(builtins.every((v) => v.colour !== "black"));
});

test("the registry orders and checks variants, keeps each family for the charts, and refuses L2 variants on dot-product attention with their reasons", () => {
  assert.deepEqual(checkVariants(["kim", "cov", "paper"], "me"), ["paper", "cov", "kim"]);
  assert.throws(() => checkVariants(["cov", "cov"], "me"), /me: variants: "cov" is listed twice/);
  assert.throws(() => checkVariants([], "me"), /me: variants: expected at least one of paper, /);
  assert.deepEqual(
    ["paper", "t3-one", "t3-half", "t3-exact", "cov", "castin", "kim", "true", "unknown"].map(
      variantFamily,
    ),
    [
      "paper",
      "prior art",
      "prior art",
      "distribution-aware",
      "distribution-aware",
      "prior art",
      "prior art",
      "truth",
      "distribution-aware",
    ],
  );
  // kim's reason before the local L2 variants', in whatever order they are asked for.
  for (const asked of [["kim", "l2-dist"], ["l2-dist", "kim"], ["kim"]])
    assert.throws(
      () => refuseL2Variants(asked, "blocks.0.attn"),
      (e: Error) => e.name === "InputError" && e.message === `blocks.0.attn: ${KIM_DOT_REFUSED}`,
    );
  assert.throws(
    () => refuseL2Variants(["cov", "l2-cov"], "blocks.0.attn"),
    (e: Error) => e.message === `blocks.0.attn: ${L2_LOCAL_DOT_REFUSED}`,
  );
  refuseL2Variants(["paper", "fused"], "blocks.0.attn");
});
