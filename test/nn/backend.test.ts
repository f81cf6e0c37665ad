// useBackend: the Node backends start; a browser backend whose package is not imported, and an
// unknown name, are refused with a line that says what to do.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";

test("useBackend starts cpu and wasm, and refuses an unregistered WebGL/WebGPU or an unknown name", async () => {
  await useBackend("cpu");
  assert.equal(tf.getBackend(), "cpu");
  await useBackend("wasm");
  assert.equal(tf.getBackend(), "wasm");
  await assert.rejects(
    useBackend("webgl"),
    /backend: "webgl" is not registered; import "@tensorflow\/tfjs-backend-webgl" first/,
  );
  await assert.rejects(
    useBackend("webgpu"),
    /backend: "webgpu" is not registered; import "@tensorflow\/tfjs-backend-webgpu" first/,
  );
  await assert.rejects(
    useBackend("gpu" as never),
    /backend: expected one of wasm, cpu, webgl, webgpu, got "gpu"/,
  );
  assert.equal(tf.getBackend(), "wasm", "a refusal leaves the backend as it was");
});
