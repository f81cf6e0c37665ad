import { join } from "node:path";
import { tf, useBackend, type BackendName } from "../backend.ts";
import { evaluatedModel } from "./evaluatedModel.ts";
import { describeSplit } from "../data/evaluationInputs.ts";
import { checkOutPath, refuseToReplace } from "../io/outPath.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace } from "../nn/trace.ts";
import { checkDataTask, modelInputs, type ModelInputs } from "../robustness/modelInputs/index.ts";
import { ATTACK_DEFAULTS } from "../robustness/defaults.ts";
import { InputError } from "../util/errors.ts";
import { stageProgress } from "../util/stageProgress.ts";
import { formatNumber, renderTable } from "../util/table.ts";
import { ballNetwork, type BallInput } from "../certify/ballNetwork.ts";
import type { SigmaRule } from "../certify/ballRules.ts";
import { certifyInput, type CertifyNorm, type InputCertificate } from "../certify/certify.ts";
import {
  CERTIFY_FILES,
  summarizeCertificates,
  writeCertifyFiles,
  type CertifiedInput,
  type CertifyFile,
} from "../certify/certifyFile.ts";

/**
 * `attnlip certify`'s driver: the model and held-out inputs exactly as `attack` loads them
 * (src/pipelines/evaluatedModel.ts, src/robustness/modelInputs/: the same data, split and input space),
 * then per input one traced forward pass, the float64 ball network (ballNetwork.ts) and its
 * certificate (certify.ts); a table on stdout, certify.json and certify.csv in the out folder.
 */

/** What `attnlip certify` was asked to do; every field but the model's may be left out. */
export interface CertifyRequest {
  /** A checkpoint or Hugging Face folder; absent: `model` with a random init. */
  checkpoint?: string;
  /** Preset or JSON config for a random init ["vit-tiny"]. */
  model?: string;
  /** Data spec (default: the checkpoint's own data, else the model kind's: mnist, spam). */
  data?: string;
  /** "l2" (default) or "linf". */
  norm?: CertifyNorm;
  /** Held-out inputs [100]. */
  n?: number;
  /** Radii at which certified accuracy is reported (the norm's units) [defaultRadii]. */
  radii?: number[];
  /** Seed of the random init and of the data split (as attack) [0]. */
  seed?: number;
  backend?: BackendName;
  /** The folder certify.json and certify.csv go to (default: the checkpoint folder). */
  out?: string;
  /** Replace existing certify.json / certify.csv. */
  force?: boolean;
  /** Text files: columns and encoding (as attack). */
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
  /** Relative width at which each bisection stops [1e-3]. */
  tolerance?: number;
}

/** Decades where certified radii of a product of per-layer bounds fall (docs/math.md section 7). */
const DECADES = [1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2];

/**
 * The default radii: 0, the decades 1e-12 to 1e-2 (where certified radii of a product of
 * per-layer bounds fall) and the radii `attack` uses by default for the same input kind and
 * norm, so that the report can set certified accuracy beside the attack's robust accuracy.
 *
 * @example defaultRadii("image", "l2") // [0, 1e-12, ..., 0.01, 0.5, 1, 2]
 */
export function defaultRadii(space: "image" | "embedding", norm: CertifyNorm): number[] {
  const attack = ATTACK_DEFAULTS.eps[space === "image" ? "image" : "text"][norm];
  return [...new Set([0, ...DECADES, ...attack])].sort((a, b) => a - b);
}

/** How the bound is made, written to certify.json (docs/math.md section 7). */
const METHOD: Record<string, string> = {
  composition:
    "per-layer balls: each layer's input lies in a ball around its float64 reference activation, of radius the previous layer's sup Jacobian norm times its own; L(x, r) is the product of the sups",
  attention:
    "the t3 head bound with every input quantity replaced by its sup over the ball; score intervals from the ball, probability boxes from the score intervals",
  dist: "sigma over each row's probability box: min(max p_hi, Gershgorin, top2 closed form, 1/2)",
  half: "sigma = 1/2 on every row (prior art)",
  certificate: "margin > sqrt(2) L(x, r) r; the largest such r by bisection",
  linf: "an l_inf ball of radius r lies in the l_2 ball of radius sqrt(D) r (D input entries)",
  math: "docs/math.md section 7",
};

/** One input as the ball network takes it, with the tensor the trace needs and its mask. */
function inputAt(
  model: TransformerClassifier,
  inputs: ModelInputs,
  i: number,
  tok: Float32Array | null,
): { ball: BallInput; x: tf.Tensor; mask: tf.Tensor | null } {
  if (inputs.mask === null) {
    const x = tf.slice(inputs.x, [i], [1]);
    return { ball: { kind: "image", pixels: Float64Array.from(x.dataSync()) }, x, mask: null };
  }
  // Text: trimmed to its last real token (padding after it changes no logit), as attack batches.
  const n = inputs.x.shape[1] as number;
  const m = tf.slice(inputs.mask, [i, 0], [1, n]);
  const real = m.dataSync();
  m.dispose();
  let len = 1;
  for (let j = 0; j < n; j++) if (real[j] !== 0) len = j + 1;
  const x = tf.slice(inputs.x, [i, 0], [1, len]);
  const mask = tf.slice(inputs.mask, [i, 0], [1, len]);
  const ids = x.dataSync();
  const d = model.config.dModel;
  const tokens = new Float64Array(len * d);
  for (let j = 0; j < len; j++)
    for (let k = 0; k < d; k++) tokens[j * d + k] = (tok as Float32Array)[ids[j] * d + k];
  return { ball: { kind: "embedding", tokens, n: len }, x, mask };
}

/** A number for JSON: finite, or null (an overflowed L, an unbounded radius). */
const finiteOrNull = (v: number) => (Number.isFinite(v) ? v : null);

function record(index: number, label: number, c: InputCertificate): CertifiedInput {
  const rule = (r: SigmaRule) => ({
    radius: finiteOrNull(c.rules[r].radius),
    lipschitzAtZero: finiteOrNull(c.rules[r].atZero),
    lipschitz: c.rules[r].lipschitz.map(finiteOrNull),
    certified: c.rules[r].certified,
    evaluations: c.rules[r].evaluations,
  });
  return {
    index,
    label,
    prediction: c.prediction,
    correct: c.prediction === label,
    margin: c.margin,
    dist: rule("dist"),
    half: rule("half"),
  };
}

/**
 * Each input's certificate, in order, with the progress line: one traced forward pass (its
 * layer list and masks), the float64 ball network (layer by layer), the bisections.
 */
function certifyAll(
  model: TransformerClassifier,
  inputs: ModelInputs,
  norm: CertifyNorm,
  radii: number[],
  tolerance: number | undefined,
): CertifiedInput[] {
  const weights = model.getWeights();
  const tok = inputs.mask === null ? null : (weights.get("tok")?.data ?? null);
  if (inputs.mask !== null && tok === null)
    throw new Error('certify: the text model has no token embedding "tok"');
  const cache = new Map<string, unknown>();
  const progress = stageProgress("certify");
  const records: CertifiedInput[] = [];
  // About 14 evaluations of L per rule (L(0), a halving or two, ten bisection steps), one per radius.
  const expected = 2 * (14 + radii.length);
  for (let i = 0; i < inputs.count; i++) {
    const { ball, x, mask } = inputAt(model, inputs, i, tok);
    let trace = null;
    let since = performance.now();
    const step = (stage: string, done: number, total: number, unit: string, name: string) =>
      progress.onStage({
        stage,
        input: i + 1,
        inputs: inputs.count,
        done,
        total,
        unit,
        name,
        seconds: (performance.now() - since) / 1000,
      });
    try {
      const fwd = model.forward(x, { trace: true, mask });
      fwd.logits.dispose();
      trace = fwd.trace;
      const net = ballNetwork(model.config, weights, trace!, ball, cache, {
        onLayer: (done, total, name) => step("float64 forward", done, total, "layer", name),
      });
      since = performance.now();
      let evaluations = 0;
      const certificate = certifyInput(net, {
        norm,
        radii,
        tolerance,
        onEvaluation: (rule) => {
          evaluations++;
          const name = rule === "dist" ? "distribution-aware" : "1/2";
          step("bisection", evaluations, Math.max(evaluations, expected), "evaluation of L", name);
        },
      });
      records.push(record(i, inputs.labels[i], certificate));
    } finally {
      disposeTrace(trace);
      tf.dispose([x, ...(mask === null ? [] : [mask])]);
    }
    progress.onProgress(i + 1, inputs.count);
  }
  progress.end();
  return records;
}

/**
 * Certifies the first n held-out inputs of a model: loads it and its inputs as `attack` does,
 * bounds L(x, r) over balls, finds each input's certified radius under both rules, prints a
 * table and writes certify.json and certify.csv (atomically; to request.out, else the checkpoint
 * folder; not at all for a random init or an imported folder without --out).
 *
 * @returns the certify.json document.
 * @throws InputError on an --out that cannot be written or already holds results (without
 *   force), data of the wrong task, a layer kind without an over-the-ball rule (L2 attention);
 *   CheckpointError on a broken checkpoint; as `attack` on data problems.
 * @example await runCertify({ checkpoint: "runs/demo/baseline", n: 100 }) // writes runs/demo/baseline/certify.json
 */
export async function runCertify(request: CertifyRequest): Promise<CertifyFile> {
  const started = performance.now();
  const norm = request.norm ?? "l2";
  const seed = request.seed ?? 0;
  await useBackend(request.backend ?? "wasm");
  const loaded = await evaluatedModel(
    "certify",
    request.checkpoint,
    request.model ?? "vit-tiny",
    seed,
  );
  const { model, source, tokenizer, trained, imported, labels } = loaded;
  const out =
    request.out ?? (request.checkpoint !== undefined && !imported ? request.checkpoint : undefined);
  try {
    const kind = modelInputs(model.config.kind, "certify");
    const data = request.data ?? trained?.spec ?? kind.defaultData;
    if (out !== undefined) {
      checkOutPath(
        out,
        "folder",
        request.out !== undefined ? "--out" : "--out [CHECKPOINT]",
        "certify",
      );
      refuseToReplace(
        CERTIFY_FILES.map((f) => join(out, f)),
        request.force === true,
        "certify",
        "DIR",
      );
    }
    checkDataTask(kind, data, "certify");
    const inputs = await kind
      .load(
        model,
        { who: "certify", data, trained, imported, seed, n: request.n ?? 100 },
        {
          tokenizer,
          labels,
          textColumn: request.textColumn,
          labelColumn: request.labelColumn,
          encoding: request.encoding,
        },
      )
      .catch((e: unknown) => {
        if (e instanceof InputError && !e.message.startsWith("certify:"))
          throw new InputError(`certify: ${e.message}`);
        throw e;
      });
    const space = inputs.mask === null ? "image" : "embedding";
    const radii = request.radii ?? defaultRadii(space, norm);
    let doc: CertifyFile;
    try {
      console.log(
        `certifying ${source} on ${inputs.count} ${kind.attackNoun}: ${norm} balls, radii ${radii.join(", ")} (${kind.units} units), distribution-aware and 1/2 bounds`,
      );
      console.log(`  data: ${describeSplit(inputs.info)}`);
      const records = certifyAll(model, inputs, norm, radii, request.tolerance);
      const summary = summarizeCertificates(records, radii);
      doc = {
        model: model.config as unknown as Record<string, unknown>,
        source: request.checkpoint ?? source,
        data: inputs.spec,
        split: inputs.info as unknown as CertifyFile["split"],
        n: inputs.count,
        norm,
        inputSpace: space,
        units: kind.units,
        radii,
        seed,
        cleanAccuracy: records.filter((r) => r.correct).length / Math.max(records.length, 1),
        method: METHOD,
        summary,
        inputs: records,
        seconds: (performance.now() - started) / 1000,
      };
    } finally {
      inputs.dispose();
    }
    for (const line of certifyLines(doc)) console.log(line);
    if (out !== undefined) {
      const written = await writeCertifyFiles(out, doc);
      console.log(`wrote ${written.join(" and ")} (${doc.seconds.toFixed(1)} s)`);
    } else
      console.log(
        `took ${doc.seconds.toFixed(1)} s (give --out DIR to write certify.json and certify.csv)`,
      );
    return doc;
  } finally {
    model.dispose();
  }
}

/**
 * The lines certify prints: the table of certified accuracy per radius under both rules, the
 * clean accuracy, the median certified radii and the factor between them.
 *
 * @example certifyLines(doc)[0] // the table's top border
 */
export function certifyLines(doc: CertifyFile): string[] {
  const s = doc.summary;
  const pct = (v: number) => `${(100 * v).toFixed(1)}%`;
  const table = renderTable(
    [
      `radius (${doc.norm}, ${doc.units} units)`,
      "certified accuracy (distribution-aware)",
      "certified accuracy (1/2)",
    ],
    s.certifiedAccuracy.map((a) => [formatNumber(a.radius), pct(a.dist), pct(a.half)]),
  );
  const radius = (v: number | null) => (v === null ? "unbounded" : formatNumber(v));
  return [
    ...table.split("\n"),
    `clean accuracy ${pct(doc.cleanAccuracy)} of ${doc.n}; median certified radius of the correct inputs: ${radius(s.medianRadius.dist)} distribution-aware, ${radius(s.medianRadius.half)} with 1/2` +
      (s.medianFactor === null ? "" : ` (median factor ${formatNumber(s.medianFactor, 3)})`),
  ];
}
