import { attentionMapsSpec } from "../report/charts.ts";
import { sigma } from "../softmax/sigma.ts";
import { parseProbabilityRow } from "../softmax/parse.ts";
import { sigmaQuad, sigmaTop2 } from "../softmax/closedForm.ts";
import { counted, formatNumber } from "../util/format.ts";
import { envelopeWithRowSpec, marginSpec, rowSigmaSpec } from "./charts.ts";
import { boundsTable } from "./boundsTable.ts";
import type { Inspection } from "./compute.ts";
import { textMapsSpec, textMarginSpec, textRowSigmaSpec } from "./charts.ts";
import type { ExplorerBackend, ExplorerReply, ExplorerRequest } from "./protocol.ts";

// The explorer page (served by `attnlip explore`): an attention-row playground computed on the
// page (closed forms are microseconds), and a model view and attack panel computed in a web
// worker (worker.ts) so that the page never freezes. Plain DOM, no framework: the page has
// three panels and a handful of controls.

/** A held-out test digit sent by the command (digits.json). */
interface Digit {
  pixels: number[];
  label: number;
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const status = (text: string): void => {
  $("status").textContent = text;
};
type RenderVegaLite = typeof import("../report/render.ts").renderVegaLite;
let renderer: Promise<RenderVegaLite> | undefined;
/**
 * Renders a chart with Vega-Lite from charts.js (chartsEntry.ts), which the page loads when it
 * draws its first chart: vega and vega-lite are most of the page's code, and parsing them before
 * the page starts would hold back the requests that send the model and the first input to the
 * worker; loaded here, they are parsed while the worker computes.
 */
async function renderVegaLite(...args: Parameters<RenderVegaLite>): Promise<string> {
  renderer ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = "charts.js";
    script.onload = () =>
      resolve(
        (window as unknown as { attnlipRenderVegaLite: RenderVegaLite }).attnlipRenderVegaLite,
      );
    script.onerror = () => {
      renderer = undefined; // the next chart tries again
      reject(new Error("charts.js did not load: the charts cannot be drawn"));
    };
    document.head.appendChild(script);
  });
  return (await renderer)(...args);
}
// An error no handler caught (a chart that cannot be drawn, a reply the page did not expect)
// shows on the status line instead of only in the browser's console.
window.addEventListener("unhandledrejection", (e: PromiseRejectionEvent) =>
  status(`error: ${e.reason instanceof Error ? e.reason.message : String(e.reason)}`),
);
window.addEventListener("error", (e: ErrorEvent) => status(`error: ${e.message}`));
/** A request without its id (the union's members each lose theirs). */
type Unsent = ExplorerRequest extends infer R ? (R extends unknown ? Omit<R, "id"> : never) : never;

// ---- worker: it answers one request at a time, in the order sent; a page waiting for an
// answer ignores it when a newer input has superseded its own
const worker =
  (window as unknown as { attnlipWorker?: Worker }).attnlipWorker ?? new Worker("worker.js");
let nextId = 1;
const pending = new Map<number, (reply: ExplorerReply) => void>();
worker.onmessage = (event: MessageEvent<ExplorerReply>) => {
  const reply = event.data;
  if (reply.kind === "progress") return status(`${reply.text}...`);
  pending.get(reply.id)?.(reply);
  pending.delete(reply.id);
};
function ask(request: Unsent, transfer: Transferable[] = []): Promise<ExplorerReply> {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    worker.postMessage({ ...request, id }, transfer);
  });
}

// ---- attention-row playground
/** The row's entries, or what is wrong with them (an empty entry, one that is no finite number). */
function parseRow(text: string): number[] | string {
  if (/,\s*,/.test(text) || /^\s*,|,\s*$/.test(text))
    return "an entry is empty (two commas in a row, or one at an end)";
  const entries = text.split(/[\s,]+/).filter((s) => s !== "");
  const bad = entries.find((e) => !Number.isFinite(Number(e)));
  if (bad !== undefined) return `"${bad}" is not a finite number`;
  if (entries.length < 2) return "give at least two numbers, separated by commas";
  return entries.map(Number);
}

/** PGD's step count from its box, or null after saying on the status line what is wrong. */
function pgdSteps(id: string): number | null {
  const text = $<HTMLInputElement>(id).value.trim();
  const steps = Number(text);
  if (text === "" || !Number.isInteger(steps) || steps < 1 || steps > 100) {
    status(`error: PGD steps must be a whole number from 1 to 100, got "${text}"`);
    return null;
  }
  return steps;
}

function softmax(logits: number[], temperature: number): number[] {
  const top = Math.max(...logits);
  const e = logits.map((v) => Math.exp((v - top) / temperature));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

/**
 * Shows the playground row's sigma values and, with `chart`, its place in the envelope chart.
 * @param chart false at the page's start: the first chart loads charts.js (Vega-Lite), whose
 *   parse holds the page's thread, and the worker's start needs that thread to take the model
 *   and the first input (start()).
 */
async function updatePlayground(chart = true): Promise<void> {
  const mode = $<HTMLSelectElement>("row-mode").value;
  const temperature = Number($<HTMLInputElement>("temperature").value);
  $("temperature-value").textContent = temperature.toFixed(2);
  const values = parseRow($<HTMLInputElement>("row").value);
  const out = $("row-out");
  if (typeof values === "string") {
    out.textContent = values;
    return;
  }
  let p: number[];
  if (mode === "logits") p = softmax(values, temperature);
  else {
    // The check of `attnlip sigma`: entries >= 0 summing to 1 within its tolerance, or rescaled
    // when asked (its --normalize, the page's box), with its messages.
    try {
      p = Array.from(
        parseProbabilityRow(values, {
          normalize: $<HTMLInputElement>("normalize").checked,
          name: "row",
          remedy: 'tick "rescale probabilities to sum 1" to rescale',
        }),
      );
    } catch (e) {
      out.textContent = (e as Error).message;
      return;
    }
  }
  const sorted = [...p].sort((a, b) => b - a);
  const s = sigma(p);
  out.innerHTML = `<table><tr><th>p</th><td>${p.map((v) => formatNumber(v, 4)).join(", ")}</td></tr>
<tr><th>sigma (exact)</th><td id="sigma-exact">${formatNumber(s)}</td></tr>
<tr><th>sigma_top2 (closed form, upper bound)</th><td>${formatNumber(sigmaTop2(p))}</td></tr>
<tr><th>sigma_quad (closed form, upper bound)</th><td>${formatNumber(sigmaQuad(p))}</td></tr>
<tr><th>worst case (prior art)</th><td>0.5</td></tr>
<tr><th>p(1), p(2)</th><td>${formatNumber(sorted[0], 4)}, ${formatNumber(sorted[1], 4)}</td></tr></table>`;
  if (!chart) return;
  $("envelope").innerHTML = await renderVegaLite(envelopeWithRowSpec(sorted[0], s), "envelope");
}

// ---- charts of the current analysis, drawn to fit their panels (any number of heads wraps)
/** The last analysis's maps and row sigmas, redrawn when the window's width changes. */
let drawn: { r: Inspection; tokens: string[] | null } | null = null;

/** Draws the attention maps and row sigmas of `r` to the width of their panels. */
async function drawMaps(r: Inspection, tokens: string[] | null): Promise<void> {
  drawn = { r, tokens };
  const maps = { width: $("maps").clientWidth };
  const sigmas = { width: $("row-sigma").clientWidth };
  $("maps").innerHTML = await renderVegaLite(
    tokens === null
      ? attentionMapsSpec(r.maps, r.n, 64, maps)
      : textMapsSpec(r.maps, tokens, 64, maps),
    "maps",
  );
  $("row-sigma").innerHTML = await renderVegaLite(
    tokens === null ? rowSigmaSpec(r.rowSigma, sigmas) : textRowSigmaSpec(r.rowSigma, sigmas),
    "rowsigma",
  );
}

let resizeTimer: ReturnType<typeof setTimeout> | undefined;
let lastWidth = window.innerWidth;
window.addEventListener("resize", () => {
  if (window.innerWidth === lastWidth) return;
  lastWidth = window.innerWidth;
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (drawn !== null) void drawMaps(drawn.r, drawn.tokens);
  }, 200);
});

/**
 * Empties the attack panel: its result belongs to the model and the input it was computed
 * for, so another model or another input clears it (image and text panels alike).
 */
function clearAttack(): void {
  for (const id of ["attack-out", "margins", "text-attack-out", "text-margins"])
    $(id).innerHTML = "";
  const adversarial = $<HTMLCanvasElement>("adversarial");
  adversarial.getContext("2d")!.clearRect(0, 0, adversarial.width, adversarial.height);
  delete adversarial.dataset.pixels;
}

// ---- model view
let digits: Digit[] = [];
let current: { pixels: number[]; label: number | null } | null = null;
const canvas = () => $<HTMLCanvasElement>("draw");

function drawPixels(target: HTMLCanvasElement, pixels: number[], side: number): void {
  const ctx = target.getContext("2d")!;
  const scale = target.width / side;
  for (let y = 0; y < side; y++)
    for (let x = 0; x < side; x++) {
      const v = Math.round(255 * pixels[y * side + x]);
      ctx.fillStyle = `rgb(${v},${v},${v})`;
      ctx.fillRect(x * scale, y * scale, scale, scale);
    }
}

/** The drawing canvas (280 x 280) averaged down to 28 x 28 pixels in [0, 1]. */
function canvasPixels(): number[] {
  const side = 28;
  const data = canvas().getContext("2d")!.getImageData(0, 0, 280, 280).data;
  const out = new Array<number>(side * side).fill(0);
  for (let y = 0; y < 280; y++)
    for (let x = 0; x < 280; x++)
      out[Math.floor(y / 10) * side + Math.floor(x / 10)] += data[(y * 280 + x) * 4] / 255 / 100;
  return out.map((v) => Math.min(1, Math.max(0, v)));
}

function setupDrawing(): void {
  const c = canvas();
  const ctx = c.getContext("2d")!;
  ctx.fillStyle = "black";
  ctx.fillRect(0, 0, 280, 280);
  let down = false;
  const at = (e: PointerEvent) => {
    const r = c.getBoundingClientRect();
    return [((e.clientX - r.left) * 280) / r.width, ((e.clientY - r.top) * 280) / r.height];
  };
  c.addEventListener("pointerdown", (e) => {
    down = true;
    const [x, y] = at(e);
    ctx.beginPath();
    ctx.moveTo(x, y);
  });
  c.addEventListener("pointermove", (e) => {
    if (!down) return;
    const [x, y] = at(e);
    ctx.strokeStyle = "white";
    ctx.lineWidth = 22;
    ctx.lineCap = "round";
    ctx.lineTo(x, y);
    ctx.stroke();
  });
  const finish = () => {
    if (!down) return;
    down = false;
    void show({ pixels: canvasPixels(), label: null });
  };
  c.addEventListener("pointerup", finish);
  c.addEventListener("pointerleave", finish);
  $("clear").addEventListener("click", () => {
    ctx.fillStyle = "black";
    ctx.fillRect(0, 0, 280, 280);
  });
}

/**
 * Analyses an input in the worker and draws the result.
 * @param loaded a model's load sent just before (start): when it failed, its error stays on the
 *   status line instead of this input's "no model loaded yet".
 */
async function show(
  input: { pixels: number[]; label: number | null },
  loaded?: Promise<boolean>,
): Promise<void> {
  if (current !== input) clearAttack(); // another input: the last attack was of the old one
  current = input;
  const shown = $<HTMLCanvasElement>("input");
  drawPixels(shown, input.pixels, 28);
  shown.dataset.pixels = JSON.stringify(input.pixels); // what the model reads, for anyone checking the page
  const reply = await ask({ kind: "inspect", pixels: input.pixels });
  if (loaded !== undefined && !(await loaded)) return;
  if (reply.kind === "error") return status(`error: ${reply.message}`);
  if (reply.kind !== "inspected" || current !== input) return; // superseded by a newer input
  // The page's timeline (performance marks, read by `npm run bench -- explorer`).
  performance.mark("attnlip:inspected", { detail: { workerSeconds: reply.seconds } });
  const r = reply.result;
  const predicted = r.predicted; // the logits' argmax, as the attack takes it (compute.ts)
  $("prediction").innerHTML =
    `predicted <strong id="predicted">${predicted}</strong> (${(100 * r.probabilities[predicted]).toFixed(1)}%)` +
    (input.label === null ? "" : `, true label <strong>${input.label}</strong>`);
  $("bounds").innerHTML = boundsTable(r);
  await drawMaps(r, null);
  status(`analysed in ${reply.seconds.toFixed(1)} s`);
  performance.mark("attnlip:drawn");
  document.body.dataset.analyses = String(Number(document.body.dataset.analyses ?? 0) + 1);
}

// ---- attack panel
async function runAttack(): Promise<void> {
  if (current === null) return status("pick or draw a digit first");
  const eps = Number($<HTMLInputElement>("eps").value);
  const attack = $<HTMLSelectElement>("attack").value as "fgsm" | "pgd";
  const steps = attack === "pgd" ? pgdSteps("steps") : 1;
  if (steps === null) return;
  const label = current.label ?? Number($("predicted").textContent);
  const grid = Array.from({ length: 9 }, (_, i) => (eps * i) / 8);
  const input = current;
  const model = modelGeneration;
  const reply = await ask({
    kind: "attack",
    pixels: input.pixels,
    label,
    attack,
    eps: grid,
    steps,
  });
  if (reply.kind === "error") return status(`error: ${reply.message}`);
  // Superseded while it ran: another input or model cleared the panel, which stays clear.
  if (reply.kind !== "attacked" || current !== input || modelGeneration !== model) return;
  const last = reply.points.at(-1)!;
  drawPixels($<HTMLCanvasElement>("adversarial"), reply.adversarial, 28);
  $("attack-out").innerHTML =
    `at eps ${formatNumber(eps, 3)}: predicted <strong id="adv-predicted">${last.predicted}</strong>, margin <span id="adv-margin">${formatNumber(last.margin, 4)}</span> (against class ${label}${input.label === null ? ", the drawn digit's clean prediction" : ""}; below 0 = misclassified)`;
  $("margins").innerHTML = await renderVegaLite(marginSpec(reply.points), "margins");
  status(`attacked in ${reply.seconds.toFixed(1)} s`);
}

// ---- start
/** Counts the models loaded: an attack answered after another model loaded is not shown. */
let modelGeneration = 0;

async function loadModel(config: unknown, weights: ArrayBuffer, name: string): Promise<boolean> {
  const reply = await ask({ kind: "load", config, weights, name }, [weights]);
  if (reply.kind === "error") {
    status(`error: ${name}: ${reply.message}`);
    return false;
  }
  modelGeneration++;
  clearAttack(); // the last attack was of the previous model
  $("model-name").textContent = name;
  performance.mark("attnlip:model-loaded");
  return true;
}

/** Moves the worker to another tfjs backend and analyses the current input again there. */
async function pickBackend(name: ExplorerBackend): Promise<void> {
  const reply = await ask({ kind: "backend", name });
  if (reply.kind === "error") return status(`error: backend ${name}: ${reply.message}`);
  document.body.dataset.backend = name;
  if (current !== null) await show(current);
}

/** Loads a picked model folder; resolves true when the model loaded. */
async function pickFolder(files: FileList | null): Promise<boolean> {
  const list = [...(files ?? [])];
  const byName = new Map(list.map((f) => [f.name, f]));
  const folder = list[0]?.webkitRelativePath.split("/")[0] || "your model";
  const config = byName.get("config.json");
  const weights = byName.get("model.safetensors");
  if (config === undefined || weights === undefined) {
    status(
      `error: ${folder}: no ${config === undefined ? "config.json" : "model.safetensors"}${config === undefined && weights === undefined ? " and no model.safetensors" : ""}; the folder needs config.json and model.safetensors (an attnlip checkpoint or a Hugging Face ViT saved with save_pretrained)`,
    );
    return false;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(await config.text());
  } catch (e) {
    status(`error: ${folder}: config.json is not valid JSON (${(e as Error).message})`);
    return false;
  }
  if (!(await loadModel(parsed, await weights.arrayBuffer(), folder))) return false;
  $("digits-note").textContent =
    ` (held out from the bundled model's training data, not necessarily from ${folder}'s)`;
  if (current !== null) await show(current);
  return true;
}

async function start(): Promise<void> {
  // The model and digits download, and the worker starts, while the page sets itself up; the
  // playground's chart is drawn while the worker analyses the first digit.
  const fetched = Promise.all([
    fetch("model/info.json").then((r) => r.json() as Promise<{ name: string }>),
    fetch("model/config.json").then((r) => r.json()),
    fetch("model/model.safetensors").then((r) => r.arrayBuffer()),
    fetch("digits.json").then((r) => r.json() as Promise<Digit[]>),
  ]);
  for (const id of ["row", "row-mode", "temperature", "normalize"])
    $(id).addEventListener("input", () => void updatePlayground());
  setupDrawing();
  $("run-attack").addEventListener("click", () => void runAttack());
  $("eps").addEventListener("input", () => {
    $("eps-value").textContent = Number($<HTMLInputElement>("eps").value).toFixed(3);
  });
  $<HTMLSelectElement>("backend").addEventListener(
    "change",
    (e) => void pickBackend((e.target as HTMLSelectElement).value as ExplorerBackend),
  );
  $<HTMLInputElement>("folder").addEventListener("change", (e) => {
    const input = e.target as HTMLInputElement;
    // A folder that did not load is not shown as chosen: the page keeps the model it had.
    void pickFolder(input.files).then((ok) => {
      if (!ok) input.value = "";
    });
  });
  void updatePlayground(false);
  const [info, config, weights, digitList] = await fetched;
  performance.mark("attnlip:fetched");
  digits = digitList;
  const strip = $("digits");
  digits.forEach((d, i) => {
    const c = document.createElement("canvas");
    c.width = c.height = 56;
    c.title = `held-out test digit ${i} (label ${d.label})`;
    c.className = "digit";
    c.dataset.index = String(i);
    drawPixels(c, d.pixels, 28);
    c.addEventListener("click", () => {
      drawPixels(canvas(), d.pixels, 28); // the drawing canvas shows the picked digit
      void show(d);
    });
    strip.appendChild(c);
  });
  // The first digit is sent right behind the model, not when the model's answer comes back, and
  // the playground's chart (charts.js's parse) waits for that answer: a starting worker gets its
  // messages through the page's thread, so the thread stays free until the worker has them
  // (measured: up to 0.3 s later otherwise), and charts.js is then parsed while the worker
  // analyses.
  const loaded = loadModel(config, weights, info.name);
  drawPixels(canvas(), digits[0].pixels, 28);
  const first = show(digits[0], loaded);
  await loaded;
  await updatePlayground();
  await first;
}

// ---- text models (body data-kind="text"): a text box and held-out texts, the tokens as the
// model reads them, and an attack on the token embeddings

/** A held-out test text sent by the command (texts.json): the ids are those analyze reads. */
interface Example {
  text: string;
  label: number;
  ids: number[];
}

/** model/info.json of a text model. */
interface TextInfo {
  name: string;
  /** The model's class names (a checkpoint's labels, an imported model's id2label), null if unknown. */
  classNames: string[] | null;
  /** The held-out data's label names (its class ids are the model's). */
  dataLabels: string[];
}

let textInfo: TextInfo = { name: "", classNames: null, dataLabels: [] };
let currentText: { text: string; label: number | null; ids: number[] | null } | null = null;

const escapeText = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** Class k with its name where known: "1 (spam)". */
function className(k: number): string {
  const name = textInfo.classNames?.[k] ?? textInfo.dataLabels[k];
  return name === undefined || name === String(k) ? String(k) : `${k} (${escapeText(name)})`;
}

/** Reads a text in the worker and draws the result; `loaded` as in {@link show}. */
async function showText(
  input: { text: string; label: number | null },
  loaded?: Promise<boolean>,
): Promise<void> {
  const mine = { ...input, ids: null as number[] | null };
  if (currentText?.text !== input.text || currentText.label !== input.label) clearAttack();
  currentText = mine;
  const reply = await ask({ kind: "inspect-text", text: input.text });
  if (loaded !== undefined && !(await loaded)) return;
  if (reply.kind === "error") return status(`error: ${reply.message}`);
  if (reply.kind !== "inspected-text" || currentText !== mine) return; // superseded by a newer text
  const { ids, tokens, limit } = reply.tokenized;
  mine.ids = ids;
  const shown = $("tokens");
  shown.dataset.ids = JSON.stringify(ids); // what the model reads, for anyone checking the page
  shown.innerHTML =
    `<p><small>${counted(ids.length, "token")} as the model reads them (${ids.length >= limit ? `the model reads at most ${limit}: a longer text is cut here` : `at most ${limit}`}; one text needs no padding); hover for position and id:</small><br>` +
    tokens
      .map((t, i) => `<code title="position ${i}, id ${ids[i]}">${escapeText(t)}</code>`)
      .join(" ") +
    "</p>";
  const r = reply.result;
  const predicted = r.predicted; // the logits' argmax, as the attack takes it (compute.ts)
  $("text-prediction").innerHTML =
    `predicted <strong id="text-predicted" data-class="${predicted}">${className(predicted)}</strong> (${(100 * r.probabilities[predicted]).toFixed(1)}%)` +
    (input.label === null ? "" : `, true label <strong>${className(input.label)}</strong>`);
  $("bounds").innerHTML = boundsTable(r);
  await drawMaps(r, tokens);
  status(`analysed in ${reply.seconds.toFixed(1)} s`);
  performance.mark("attnlip:drawn");
  document.body.dataset.analyses = String(Number(document.body.dataset.analyses ?? 0) + 1);
}

async function runTextAttack(): Promise<void> {
  if (currentText?.ids == null) return status("type or pick a text first");
  const eps = Number($<HTMLInputElement>("text-eps").value);
  if (!(eps >= 0 && Number.isFinite(eps))) return status("error: eps must be a number >= 0");
  const attack = $<HTMLSelectElement>("text-attack").value as "fgsm" | "pgd";
  const norm = $<HTMLSelectElement>("text-norm").value as "l2" | "linf";
  const steps = attack === "pgd" ? pgdSteps("text-steps") : 1;
  if (steps === null) return;
  const label = currentText.label ?? Number($("text-predicted").dataset.class);
  const grid = Array.from({ length: 9 }, (_, i) => (eps * i) / 8);
  const input = currentText;
  const reply = await ask({
    kind: "attack-text",
    ids: input.ids!,
    label,
    attack,
    norm,
    eps: grid,
    steps,
  });
  if (reply.kind === "error") return status(`error: ${reply.message}`);
  // Superseded while it ran: another text cleared the panel, which stays clear.
  if (reply.kind !== "attacked-text" || currentText !== input) return;
  const last = reply.points.at(-1)!;
  const flip = reply.points.find((p) => p.margin < 0);
  $("text-attack-out").innerHTML =
    `at eps ${formatNumber(eps, 3)}: predicted <strong id="text-adv-predicted" data-class="${last.predicted}">${className(last.predicted)}</strong>, margin <span id="text-adv-margin">${formatNumber(last.margin, 4)}</span> (against class ${className(label)}${input.label === null ? ", the text's clean prediction" : ""}; below 0 = misclassified)` +
    `<br>${flip === undefined ? "not misclassified on this grid" : `misclassified from eps ${formatNumber(flip.eps, 3)} on this grid`}; mean l_2 norm of this text's token embeddings: ${formatNumber(reply.tokenNorm, 3)}`;
  $("text-margins").innerHTML = await renderVegaLite(textMarginSpec(reply.points, norm), "margins");
  status(`attacked in ${reply.seconds.toFixed(1)} s`);
}

async function startText(): Promise<void> {
  const fetched = Promise.all([
    fetch("model/info.json").then((r) => r.json() as Promise<TextInfo>),
    fetch("model/config.json").then((r) => r.json()),
    fetch("model/model.safetensors").then((r) => r.arrayBuffer()),
    fetch("model/tokenizer.json").then((r) => r.json()),
    fetch("texts.json").then((r) => r.json() as Promise<Example[]>),
  ]);
  for (const id of ["row", "row-mode", "temperature", "normalize"])
    $(id).addEventListener("input", () => void updatePlayground());
  const box = $<HTMLTextAreaElement>("text");
  const read = () => void showText({ text: box.value, label: null });
  $("read-text").addEventListener("click", read);
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      read();
    }
  });
  $("run-text-attack").addEventListener("click", () => void runTextAttack());
  $("text-norm").addEventListener("change", () => {
    $<HTMLInputElement>("text-eps").value =
      $<HTMLSelectElement>("text-norm").value === "l2" ? "0.25" : "0.005";
  });
  void updatePlayground(false);
  const [info, config, weights, tokenizer, examples] = await fetched;
  textInfo = info;
  const list = $("examples");
  examples.forEach((ex, i) => {
    const b = document.createElement("button");
    b.className = "example";
    b.dataset.index = String(i);
    b.textContent = ex.text.slice(0, 60) || "(empty)";
    b.title = `held-out test text ${i}, label ${info.dataLabels[ex.label] ?? ex.label}:\n${ex.text.slice(0, 400)}`;
    b.addEventListener("click", () => {
      box.value = ex.text;
      void showText({ text: ex.text, label: ex.label });
    });
    list.appendChild(b);
  });
  const loaded = ask({ kind: "load-text", config, weights, tokenizer, name: info.name }, [
    weights,
  ]).then((reply) => {
    if (reply.kind === "error") {
      status(`error: ${info.name}: ${reply.message}`);
      return false;
    }
    $("model-name").textContent = info.name;
    return true;
  });
  // The first text goes right behind the model, and the playground's chart waits, as in start().
  let first: Promise<unknown> = loaded;
  if (examples.length > 0) {
    box.value = examples[0].text;
    first = showText({ text: examples[0].text, label: examples[0].label }, loaded);
  }
  await loaded;
  await updatePlayground();
  await first;
}

void (document.body.dataset.kind === "text" ? startText() : start());
