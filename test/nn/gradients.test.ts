// attnlip registers tfjs-core's gradients from its own bundle (package.json's "#tfjs-gradients",
// lib/tfjsGradients.node.mjs), not through the union package @tensorflow/tfjs, whose Node
// bundle registers the same gradients but loads much more. This checks, bit for bit, that every
// gradient attnlip takes is the same either way (the union's run is a process of its own: a
// process registers gradients once).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { gradientDigests } from "./gradientsProbe.ts";

test("every gradient attnlip takes is bit-identical with its gradient bundle and with the union package's", async () => {
  const here = await gradientDigests();
  assert.ok(Object.keys(here).length > 20, "the probe covers every parameter of both models");
  const union = spawnSync(
    process.execPath,
    ["--import", "tsx", fileURLToPath(new URL("./gradientsProbe.ts", import.meta.url)), "--print"],
    { encoding: "utf8", env: { ...process.env, ATTNLIP_TFJS_GRADIENTS: "union" } },
  );
  assert.equal(union.status, 0, union.stderr);
  const there = JSON.parse(union.stdout);
  assert.equal(here.union, "false", "attnlip's own run loaded the union package");
  assert.equal(there.union, "true", "ATTNLIP_TFJS_GRADIENTS=union did not load the union package");
  assert.deepEqual({ ...there, union: "" }, { ...here, union: "" });
});
