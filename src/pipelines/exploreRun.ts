import { createServer, type Server } from "node:http";
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { useBackend } from "../backend.ts";
import { imageEvaluationSplit, textEvaluationSplit } from "../data/evaluationInputs.ts";
import { parseSpec, type TextSource } from "../data/sources/index.ts";
import type { TextTokenizer } from "../data/text/tokenizer.ts";
import { tokenize, tokenizerDocument } from "../explorer/compute.ts";
import { bundleExplorer, type ExplorerScript } from "../explorer/bundle.ts";
import { explorerHtml } from "../explorer/html.ts";
import { writeFileAtomically } from "../io/atomicWrite.ts";
import { encodeSafetensors } from "../io/safetensors.ts";
import type { TextConfig, VitConfig } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { InputError } from "../util/errors.ts";
import { checkOutPath, refuseToReplace } from "../io/outPath.ts";
import { evaluatedModel } from "./evaluatedModel.ts";

/** The explorer's bundled model: a vit-micro trained on the embedded MNIST (models/vit-micro-mnist/). */
export const BUNDLED_MODEL = fileURLToPath(
  new URL("../../models/vit-micro-mnist/", import.meta.url),
);

/**
 * Every file of the explorer page for a model: index.html, page.js, worker.js, the model as
 * attnlip config and weights (model/config.json, model/model.safetensors, model/info.json),
 * and its first `digits` held-out test digits (digits.json: pixels and labels). For a text
 * model, its tokenizer (model/tokenizer.json) and its first `digits` held-out test texts
 * (texts.json: text, label and the ids analyze reads) instead of digits.
 *
 * @param checkpoint an attnlip checkpoint or a Hugging Face ViT, BERT or GPT-2 folder [the
 *   bundled model].
 * @throws InputError on a ViT that does not read 28 x 28 x 1 images (the page draws
 *   MNIST-sized digits), or as `analyze` on a broken checkpoint, tokenizer or data.
 * @example const files = await explorerFiles(undefined, 12); files.get("index.html")
 */
export async function explorerFiles(
  checkpoint: string | undefined,
  digits: number,
): Promise<Map<string, string | Uint8Array>> {
  const folder = checkpoint ?? BUNDLED_MODEL;
  await useBackend("cpu"); // the command only reads the model and its digits; the page computes
  const { model, source, tokenizer, trained, imported, labels } = await evaluatedModel(
    "explore",
    folder,
    "vit-micro",
    0,
  );
  try {
    const config = model.config;
    if (config.kind === "text")
      return await textExplorerFiles(model, source, tokenizer, trained, imported, labels, digits);
    const c = config as VitConfig;
    if (c.imageSize !== 28 || c.channels !== 1)
      throw new InputError(
        `explore: ${folder} reads ${c.imageSize}x${c.imageSize}x${c.channels} images; the explorer draws 28x28 grey digits (MNIST-sized models) for now`,
      );
    const { split, info } = await imageEvaluationSplit({
      who: "explore",
      data: undefined,
      trained,
      imported,
      seed: 0,
      n: digits,
    });
    const size = 28 * 28;
    const digitList = Array.from({ length: split.count }, (_, i) => ({
      pixels: Array.from(
        split.images.subarray(i * size, (i + 1) * size),
        (v) => Math.round(v * 1000) / 1000,
      ),
      label: split.labels[i],
    }));
    const name = checkpoint === undefined ? "vit-micro trained on MNIST (bundled)" : source;
    const scripts = await bundleExplorer();
    return new Map<string, string | Uint8Array>([
      ["index.html", explorerHtml(name)],
      ...scriptFiles(scripts),
      ["model/config.json", JSON.stringify(config)],
      ["model/model.safetensors", encodeSafetensors(model.getWeights())],
      ["model/info.json", JSON.stringify({ name, split: info })],
      ["digits.json", JSON.stringify(digitList)],
    ]);
  } finally {
    model.dispose();
  }
}

/** tfjs's wasm binaries, served beside the page for its wasm backend (threaded: cross-origin isolated hosts only). */
const WASM_FILES = [
  "tfjs-backend-wasm.wasm",
  "tfjs-backend-wasm-simd.wasm",
  "tfjs-backend-wasm-threaded-simd.wasm",
];
const wasmFile = (name: string) =>
  join(dirname(createRequire(import.meta.url).resolve("@tensorflow/tfjs-backend-wasm")), name);

/** The page's scripts and the files its backends load: the same for image and text models. */
function scriptFiles(scripts: Record<ExplorerScript, string>): [string, string | Uint8Array][] {
  return [
    ["page.js", scripts["page.js"]],
    ["charts.js", scripts["charts.js"]],
    ["worker.js", scripts["worker.js"]],
    ["webgl.js", scripts["webgl.js"]],
    ...WASM_FILES.map((f): [string, Uint8Array] => [f, readFileSync(wasmFile(f))]),
  ];
}

/**
 * {@link explorerFiles} for a text model: the page's text mode (index.html with body
 * data-kind="text"), the model, its tokenizer, and the first `n` held-out test texts chosen
 * as analyze chooses them (the checkpoint's own held-out split; an imported model's: the spam
 * corpus's test split by seed 0), each with the ids analyze reads.
 */
async function textExplorerFiles(
  model: TransformerClassifier,
  source: string,
  tokenizer: TextTokenizer | null,
  trained: Parameters<typeof imageEvaluationSplit>[0]["trained"],
  imported: boolean,
  labels: string[] | null,
  n: number,
): Promise<Map<string, string | Uint8Array>> {
  const config = model.config as TextConfig;
  if (tokenizer === null)
    throw new InputError(`explore: ${source}: a text model needs its tokenizer (tokenizer.json)`);
  const request = { who: "explore", data: undefined, trained, imported, seed: 0, n };
  const reading = { textColumn: undefined, labelColumn: undefined, encoding: undefined };
  // The same selection and encoding as analyze's (robustness/modelInputs/text.ts).
  const chosen = await textEvaluationSplit(request, {
    classes: config.classes,
    tokenizer,
    vocabSize: config.vocabSize,
    maxLength: config.maxLength,
    labelNames: trained?.labels ?? labels ?? undefined,
    ...reading,
  });
  // The texts themselves, read as the data was read (the checkpoint's columns and encoding).
  const parsed = parseSpec(chosen.spec, "text");
  const { texts } = await (parsed.source as TextSource).load(parsed.arg, {
    textColumn: trained?.textColumn ?? undefined,
    labelColumn: trained?.labelColumn ?? undefined,
    encoding: trained?.encoding ?? undefined,
    labelNames: trained?.labels ?? labels ?? undefined,
  });
  const split = chosen.split;
  const examples = Array.from({ length: split.count }, (_, i) => {
    const ids = Array.from(
      split.ids.subarray(i * split.length, i * split.length + split.lengths[i]),
    );
    const text = texts[split.indices[i]];
    // The page tokenizes the text again: it must read the ids analyze reads.
    if (text === undefined || tokenize(tokenizer, text).ids.join() !== ids.join())
      throw new Error(
        `explore: held-out text ${split.indices[i]} of ${chosen.spec} does not encode as the split does`,
      );
    return { text, label: split.labels[i], ids };
  });
  const scripts = await bundleExplorer();
  return new Map<string, string | Uint8Array>([
    ["index.html", explorerHtml(source, "text")],
    ...scriptFiles(scripts),
    ["model/config.json", JSON.stringify(config)],
    ["model/model.safetensors", encodeSafetensors(model.getWeights())],
    ["model/tokenizer.json", JSON.stringify(tokenizerDocument(tokenizer))],
    [
      "model/info.json",
      JSON.stringify({
        name: source,
        kind: "text",
        split: chosen.info,
        classNames: trained?.labels ?? labels ?? null,
        dataLabels: chosen.labelNames,
      }),
    ],
    ["texts.json", JSON.stringify(examples)],
  ]);
}

const TYPES: Record<string, string> = {
  wasm: "application/wasm",
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  json: "application/json",
  safetensors: "application/octet-stream",
};

/**
 * Why the server cannot listen on host:port, naming the flag at fault: --host when the name
 * does not resolve (getaddrinfo: "999.1.1.1", a typo) or is no address of this machine
 * (EADDRNOTAVAIL) or of a family it lacks (EAFNOSUPPORT); --port when the port is taken
 * (EADDRINUSE) or needs privileges (EACCES); both otherwise.
 *
 * @example listenError(Object.assign(new Error("getaddrinfo ENOTFOUND 999.1.1.1"), { code: "ENOTFOUND", syscall: "getaddrinfo" }), "999.1.1.1", 8377).message
 *   // 'explore: --host 999.1.1.1: no such host or address (getaddrinfo ENOTFOUND): give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0'
 */
export function listenError(e: NodeJS.ErrnoException, host: string, port: number): InputError {
  const why = `${e.syscall ?? "listen"} ${e.code ?? "failed"}`;
  const example = "give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0";
  if (e.syscall === "getaddrinfo" || e.code === "ENOTFOUND" || e.code === "EAI_AGAIN")
    return new InputError(`explore: --host ${host}: no such host or address (${why}): ${example}`);
  if (e.code === "EADDRNOTAVAIL" || e.code === "EAFNOSUPPORT" || e.code === "EINVAL")
    return new InputError(
      `explore: --host ${host}: not an address of this machine (${why}): ${example}`,
    );
  if (e.code === "EADDRINUSE")
    return new InputError(
      `explore: --port ${port}: in use by another program; pick another port, or 0 for any free one`,
    );
  if (e.code === "EACCES")
    return new InputError(
      `explore: --port ${port}: not allowed for this user (${why}; ports below 1024 need privileges); pick another port, or 0 for any free one`,
    );
  return new InputError(
    `explore: --host ${host} --port ${port}: cannot listen there: ${e.message}`,
  );
}

/**
 * Serves the explorer's files over HTTP on host:port (port 0: any free port) until closed.
 *
 * @returns the page's URL and a close function.
 * @throws InputError naming --host or --port ({@link listenError}) when it cannot listen there.
 * @example const { url, close } = await serveExplorer(await explorerFiles(undefined, 12), "127.0.0.1", 0); await close();
 */
export async function serveExplorer(
  files: Map<string, string | Uint8Array>,
  host: string,
  port: number,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path =
      decodeURIComponent((request.url ?? "/").split("?")[0]).replace(/^\/+/, "") || "index.html";
    const body = files.get(path);
    if (request.method !== "GET" || body === undefined) {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    response
      .writeHead(200, {
        "content-type": TYPES[path.split(".").pop()!] ?? "application/octet-stream",
        "cache-control": "no-store",
      })
      .end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => reject(listenError(e, host, port)));
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === "object" && address !== null ? address.port : port;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}/`,
    // A browser keeps its connections open: close them too, or the first Ctrl-C would wait for them.
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Writes the explorer's files into `out` (a static site any web server can serve).
 *
 * @throws InputError when `out` already holds an explorer (index.html) and `force` is false.
 * @example await writeExplorer(await explorerFiles(undefined, 12), "explorer", false)
 */
export async function writeExplorer(
  files: Map<string, string | Uint8Array>,
  out: string,
  force: boolean,
): Promise<void> {
  checkOutPath(out, "folder", "--out", "explore");
  refuseToReplace([join(out, "index.html")], force, "explore", "DIR");
  await mkdir(join(out, "model"), { recursive: true });
  for (const [path, body] of files) await writeFileAtomically(join(out, path), body);
}
