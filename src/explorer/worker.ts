import { setWasmPaths } from "@tensorflow/tfjs-backend-wasm";
import { tf, useBackend } from "../backend.ts";
import type { TextConfig, VitConfig } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { attackCurve, inspect, modelFromBytes } from "./compute.ts";
import { inspectText, textAttackCurve, tokenize, tokenizerFromDocument } from "./compute.ts";
import type { TextTokenizer } from "../data/text/tokenizer.ts";
import type { ExplorerReply, ExplorerRequest } from "./protocol.ts";

// The explorer's web worker: the model and every computation live here, so the page stays
// responsive while an analysis or an attack runs. It starts on tfjs's wasm backend (XNNPACK with
// SIMD, the .wasm files served beside the page; what attnlip uses in Node by default, and about
// twice as fast as cpu on the first analysis); the page can switch it to cpu (pure JavaScript)
// or WebGL (webgl.js).

const post = (reply: ExplorerReply) =>
  (self as unknown as { postMessage(m: ExplorerReply): void }).postMessage(reply);
let model: TransformerClassifier | null = null;
let tokenizer: TextTokenizer | null = null; // a text model's
setWasmPaths(new URL("./", self.location.href).href);
const ready = useBackend("wasm");

async function handle(request: ExplorerRequest): Promise<ExplorerReply> {
  await ready;
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  if (request.kind === "load") {
    post({ id: request.id, kind: "progress", text: "loading the model" });
    const next = modelFromBytes(request.config, new Uint8Array(request.weights), request.name);
    model?.dispose();
    model = next;
    const c = next.config as VitConfig;
    return {
      id: request.id,
      kind: "loaded",
      classes: c.classes,
      imageSize: c.imageSize,
      channels: c.channels,
      blocks: c.blocks,
      heads: c.heads,
    };
  }
  if (request.kind === "backend") {
    post({ id: request.id, kind: "progress", text: `starting tfjs's ${request.name} backend` });
    if (request.name === "wasm") setWasmPaths(new URL("./", self.location.href).href);
    if (request.name === "webgl" && tf.findBackendFactory("webgl") === null) {
      // webgl.js registers the WebGL backend on this tfjs-core (bundle.ts).
      (self as unknown as { attnlipTfjsCore: typeof tf }).attnlipTfjsCore = tf;
      (self as unknown as { importScripts(url: string): void }).importScripts("webgl.js");
    }
    await useBackend(request.name);
    return { id: request.id, kind: "backend-ready", name: request.name, seconds: seconds() };
  }
  if (request.kind === "load-text") {
    post({ id: request.id, kind: "progress", text: "loading the model" });
    const next = modelFromBytes(
      request.config,
      new Uint8Array(request.weights),
      request.name,
      "text",
    );
    const c = next.config as TextConfig;
    let nextTokenizer: TextTokenizer;
    try {
      nextTokenizer = tokenizerFromDocument(request.tokenizer, c);
    } catch (e) {
      next.dispose();
      throw e;
    }
    model?.dispose();
    model = next;
    tokenizer = nextTokenizer;
    return {
      id: request.id,
      kind: "loaded-text",
      classes: c.classes,
      maxLength: c.maxLength,
      blocks: c.blocks,
      heads: c.heads,
    };
  }
  if (model === null) throw new Error("no model loaded yet");
  if (request.kind === "inspect-text") {
    if (tokenizer === null) throw new Error("no text model loaded");
    const tokenized = tokenize(tokenizer, request.text);
    post({ id: request.id, kind: "progress", text: "computing the bounds and true values" });
    const result = inspectText(model, tokenized.ids);
    return { id: request.id, kind: "inspected-text", tokenized, result, seconds: seconds() };
  }
  if (request.kind === "attack-text") {
    post({ id: request.id, kind: "progress", text: `attacking at ${request.eps.length} radii` });
    const { points, tokenNorm } = textAttackCurve(
      model,
      request.ids,
      request.label,
      request.attack,
      request.norm,
      request.eps,
      request.steps,
    );
    return { id: request.id, kind: "attacked-text", points, tokenNorm, seconds: seconds() };
  }
  if (request.kind === "inspect") {
    post({ id: request.id, kind: "progress", text: "computing the bounds and true values" });
    return {
      id: request.id,
      kind: "inspected",
      result: inspect(model, request.pixels),
      seconds: seconds(),
    };
  }
  post({ id: request.id, kind: "progress", text: `attacking at ${request.eps.length} radii` });
  const { points, adversarial } = attackCurve(
    model,
    request.pixels,
    request.label,
    request.attack,
    request.eps,
    request.steps,
  );
  return { id: request.id, kind: "attacked", points, adversarial, seconds: seconds() };
}

// Requests are answered one at a time, in the order sent: the page sends a model and its first
// input together, without waiting for the model's answer.
let queue: Promise<void> = Promise.resolve();
self.onmessage = (event: MessageEvent<ExplorerRequest>) => {
  queue = queue.then(async () => {
    try {
      post(await handle(event.data));
    } catch (e) {
      post({ id: event.data.id, kind: "error", message: (e as Error).message });
    }
  });
};
