import { join } from "node:path";
import { useBackend } from "../backend.ts";
import { InputError } from "../util/errors.ts";
import { progressLine } from "../util/progressLine.ts";
import { formatNumber } from "../util/table.ts";
import type { AttackFlags } from "./attackFlags.ts";
import { describeSplit, type TrainedData } from "../data/evaluationInputs.ts";
import { evaluatedModel } from "./evaluatedModel.ts";
import type { EvaluationSplit } from "../data/heldOut.ts";
import type { TextTokenizer } from "../data/text/tokenizer.ts";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { checkOutPath, refuseToReplace } from "../io/outPath.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { summarize } from "../stats.ts";
import { rangeRadius, type RobustnessEvaluation } from "../robustness/evaluate.ts";
import type { LipschitzProxy } from "../robustness/lipschitzProxy.ts";
import { attackInWorkers } from "../parallel/attackTask.ts";
import { defaultWorkers } from "../parallel/workerCount.ts";
import { checkDataTask, modelInputs, type ModelInputKind } from "../robustness/modelInputs/index.ts";
import { AttackFileSchema, type AttackRecord } from "../robustness/attackFile.ts";
import { ATTACK_DEFAULTS } from "../robustness/defaults.ts";
import {
  attackLabel,
  attacksReading,
  checkAttackClasses,
  type AttackSettingName,
} from "../robustness/attacks.ts";
import { attackLines, attackResultsOf, attackSettingsOf, uniformSteps } from "../robustness/attackSummary.ts";

export type { AttackRecord };

/**
 * What `attnlip attack` was asked to do (validated flags plus the checkpoint folder). Every
 * flag may be left out programmatically: the CLI's defaults apply, except that `data`
 * defaults to the checkpoint's own data for a text model (else mnist), `eps` to
 * {@link DEFAULT_TEXT_EPS} for a text model (else DEFAULT_EPS), and `rangeCheck` to false
 * (the command turns it on; the demo and the study leave it off unless they ask).
 */
export type AttackRun = Partial<AttackFlags> & {
  checkpoint?: string;
  /** Text files: the text / label columns (default: the checkpoint's, else "text" / "label"). */
  textColumn?: string;
  labelColumn?: string;
  /** Text files: the encoding (default: the checkpoint's, else auto). */
  encoding?: string;
};

/**
 * Default radii for text models, in embedding units (ATTACK_DEFAULTS.eps.text: token
 * embeddings of text-tiny have l_2 norms of order 1 per token after training; the l_2 radius
 * is over the whole sequence).
 */
export const DEFAULT_TEXT_EPS = ATTACK_DEFAULTS.eps.text;

/**
 * Loads the model (checkpoint or preset) and the first n held-out test examples of its kind
 * (robustness/modelInputs/: images in input space, clipped to the pixel range; text in
 * token-embedding space, padding rows untouched, no clipping), runs evaluateIn and
 * lipschitzProxyIn in that space, prints the table and the proxy line, and writes attack.json
 * atomically (to run.out, else CHECKPOINT/attack.json; not at all for a random init without
 * --out). Same attack.json schema for both (attackFile.ts: robust accuracy and zero-gradient
 * fraction per registered attack and eps); eps and radii are in input units (pixels) or
 * embedding units (text).
 *
 * @throws InputError on an --out that cannot be written (checked before the work starts),
 *   image data for a text model (or text data for a ViT), data whose images do not fit the
 *   model, an eps above what the images allow (l_inf: the width of the data set's pixel
 *   range; l_2: its diameter, width * sqrt(H W C); text embeddings have no upper limit);
 *   CheckpointError (an InputError) on a missing or broken checkpoint; InputError on
 *   unreadable text data, a missing column or an unknown label.
 * @example await runAttack({ checkpoint: "runs/jasmin", eps: [0, 0.05], attacks: ["pgd"] }) // writes runs/jasmin/attack.json
 */
export async function runAttack(request: AttackRun): Promise<AttackRecord> {
  const started = performance.now();
  const defaults = attackRunDefaults();
  const given = Object.fromEntries(
    Object.entries(request).filter(([, v]) => v !== undefined),
  ) as AttackRun;
  const partial = { ...defaults, ...given };
  await useBackend(partial.backend);
  const { model, source, tokenizer, trained, imported, labels } = await evaluatedModel("attack", partial.checkpoint, partial.model, partial.seed);
  // An imported Hugging Face folder is someone else's (often a download cache): only --out writes.
  const out =
    partial.out ??
    (partial.checkpoint !== undefined && !imported ? join(partial.checkpoint, "attack.json") : undefined);
  try {
    const kind = modelInputs(model.config.kind, "attack");
    const run = {
      ...partial,
      data: given.data ?? trained?.spec ?? kind.defaultData,
      eps: given.eps ?? kind.defaultEps(partial.norm),
    };
    // Before any work: an --out that cannot be written is refused now, not after the attack.
    if (out !== undefined)
      checkOutPath(
        out,
        "file",
        partial.out !== undefined ? "--out" : "--out [CHECKPOINT/attack.json]",
        "attack",
      );
    checkDataTask(kind, run.data, "attack");
    // Before any work: an attack that cannot run on the model's class count is refused, and
    // one that runs reduced says so.
    for (const note of checkAttackClasses(run.attacks, model.config.classes, run.targets, "attack: --attack"))
      console.error(`attack: note: ${note}`);
    if (out !== undefined) refuseToReplace([out], partial.force === true, "attack", "FILE");
    const prepared = await prepare(model, kind, run, source, tokenizer, trained, imported, labels);
    const { evaluation, proxy, count, spec, split } = prepared;
    const attacks = [...new Set(run.attacks)];
    const attackSettings = attackSettingsOf(attacks, run);
    const steps = uniformSteps(attackSettings);
    const recorded = attackResultsOf(evaluation, attacks, model.config.classes, prepared.rangeWhat);
    const lines = attackLines(recorded, attacks, evaluation.cleanAccuracy);
    for (const line of lines.out) console.log(line);
    for (const line of lines.err) console.error(line);
    const finite = Array.from(proxy.radii).filter(Number.isFinite);
    const s = finite.length > 0 ? summarize(finite, "proxy radii") : null;
    console.log(
      `Lipschitz proxy radius (l_2 in ${kind.units} units, margin / (sqrt(2) L), local: a proxy, not a certificate): median ${formatNumber(s?.median)}` +
        ` (q1 ${formatNumber(s?.q1)}, q3 ${formatNumber(s?.q3)}); ${proxy.misclassified} of ${count} misclassified (radius 0)`,
    );
    const doc: AttackRecord = {
      model: model.config,
      source: run.checkpoint ?? source,
      data: spec,
      split,
      n: count,
      norm: run.norm,
      ...(steps !== undefined ? { steps } : {}),
      stepSize: run.stepSize,
      // Recorded when an attack that restarts ran (APGD).
      ...(attacksReading("restarts", run.attacks).length > 0 ? { restarts: run.restarts } : {}),
      seed: run.seed,
      attackSettings,
      ...(evaluation.notes.length > 0 ? { notes: evaluation.notes } : {}),
      cleanAccuracy: evaluation.cleanAccuracy,
      ...recorded,
      proxy: {
        median: s?.median ?? null,
        q1: s?.q1 ?? null,
        q3: s?.q3 ?? null,
        misclassified: proxy.misclassified,
        radii: Array.from(proxy.radii, (r) => (Number.isFinite(r) ? r : null)),
      },
      seconds: (performance.now() - started) / 1000,
    };
    AttackFileSchema.parse(doc); // the reader's schema: what is written can be read back
    if (out !== undefined) {
      await writeJsonAtomically(out, doc);
      console.log(`wrote ${out} (${doc.seconds.toFixed(1)} s)`);
    } else console.log(`took ${doc.seconds.toFixed(1)} s (give --out FILE to write attack.json)`);
    return doc;
  } finally {
    model.dispose();
  }
}

/** Flag defaults (the CLI's, from ATTACK_DEFAULTS), with `eps` and `data` resolved later by model kind. */
function attackRunDefaults(): AttackFlags {
  const d = ATTACK_DEFAULTS;
  return {
    model: d.model,
    randomInit: false,
    data: d.data,
    norm: d.norm,
    eps: [...d.eps.image[d.norm]],
    steps: null,
    stepSize: d.stepSize,
    restarts: d.restarts,
    queries: d.queries,
    targets: d.targets,
    // Off for programmatic runs (the demo, the study); the command's flags turn it on.
    rangeCheck: false,
    n: d.n,
    batch: d.batch,
    seed: d.seed,
    attacks: [...d.attacks],
    backend: d.backend,
  };
}

type ResolvedRun = AttackFlags & {
  checkpoint?: string;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
};

interface Prepared {
  evaluation: RobustnessEvaluation;
  proxy: LipschitzProxy;
  count: number;
  spec: string;
  split: EvaluationSplit;
  /** What the range check's radius is, in words (absent when it did not run). */
  rangeWhat?: string;
}

/** Library InputErrors (data, held-out checks) become the CLI's one-line usage errors. */
function asInputError(e: unknown): never {
  if (e instanceof InputError)
    throw new InputError(e.message.startsWith("attack:") ? e.message : `attack: ${e.message}`);
  throw e;
}

/**
 * Says what is about to be attacked (and that the split is smaller than asked, when it is),
 * and starts the progress line over (batch, eps, attack) units.
 */
function announce(
  run: ResolvedRun,
  source: string,
  count: number,
  what: string,
  split: EvaluationSplit,
) {
  if (count < run.n)
    console.error(
      `attack: ${split.origin === "imported" ? "the data has" : "the test split has"} ${count} ${split.origin === "imported" ? "examples" : "held-out examples"}; using all of them (asked for ${run.n})`,
    );
  const p = progressLine(
    "attack",
    (done, total) => `  attacked ${done}/${total} (each: one batch of up to ${run.batch} inputs at one eps with one attack)`,
  );
  // Each setting only for the attacks that read it (registry: each attack's options), with
  // each attack's own value where it differs (steps: PGD 10, APGD 100 unless --steps).
  const settings = attackSettingsOf(run.attacks, run);
  const readers = (setting: AttackSettingName) => {
    const byValue = new Map<string, string[]>();
    for (const a of attacksReading(setting, run.attacks)) {
      const v = String(settings[a][setting] ?? "");
      byValue.set(v, [...(byValue.get(v) ?? []), attackLabel(a)]);
    }
    return [...byValue].map(([v, labels]) => ({ v, who: labels.join("/") }));
  };
  const parts = [
    ...readers("steps").map(({ v, who }) => `${v} ${who} steps`),
    ...readers("stepSize").map(({ who }) => `${who} step size ${run.stepSize ?? "2.5 * eps / steps"}`),
    ...(run.restarts > 1 ? readers("restarts").map(({ v, who }) => `${v} ${who} runs`) : []),
    ...readers("targets").map(({ v, who }) => `${v} ${who} targets`),
    ...readers("queries").map(({ v, who }) => `${v} ${who} queries`),
    run.rangeCheck ? "range check" : "",
  ].filter((p) => p !== "");
  console.log(
    `attacking ${source} on ${count} ${what}: ${[run.norm, run.attacks.join(" + "), ...parts].join(", ")} (${run.backend} backend)`,
  );
  console.log(`  data: ${describeSplit(split)}`);
  return p;
}

/** The evaluation settings both input spaces share: the attacks, radii and steps of the flags. */
function evaluationOptions(run: ResolvedRun, onProgress: (done: number, total: number) => void) {
  return {
    attack: run.attacks,
    norm: run.norm,
    eps: run.eps,
    steps: run.steps ?? undefined,
    stepSize: run.stepSize,
    restarts: run.restarts,
    queries: run.queries,
    targets: run.targets,
    batchSize: run.batch,
    seed: run.seed,
    onWarning: (m: string) => console.error(`attack: warning: ${m}`),
    onProgress,
  };
}

/**
 * The held-out test inputs of the model's kind (robustness/modelInputs/), the radii checked
 * against their space, then the attacks and the Lipschitz proxy in that space.
 */
async function prepare(
  model: TransformerClassifier,
  kind: ModelInputKind,
  run: ResolvedRun,
  source: string,
  tokenizer: TextTokenizer | null,
  trained: TrainedData | null,
  imported: boolean,
  labels: string[] | null,
): Promise<Prepared> {
  const inputs = await kind
    .load(
      model,
      { who: "attack", data: run.data, trained, imported, seed: run.seed, n: run.n },
      { tokenizer, labels, textColumn: run.textColumn, labelColumn: run.labelColumn, encoding: run.encoding },
    )
    .catch(asInputError);
  try {
    inputs.checkEps(run.eps, run.norm, "attack");
    // The radius of the whole input range, for the range check (from all inputs, before the
    // workers split them).
    const range = run.rangeCheck ? rangeRadius(inputs.space, run.norm, run.batch) : null;
    const p = announce(run, source, inputs.count, kind.attackNoun, inputs.info);
    const { evaluation, proxy } = await attackInWorkers(model, inputs, {
      ...evaluationOptions(run, p.onProgress),
      rangeEps: range?.max ?? null,
      workers: run.workers ?? defaultWorkers(),
      backend: run.backend,
    });
    p.end();
    return {
      evaluation,
      proxy,
      count: inputs.count,
      spec: inputs.spec,
      split: inputs.info,
      ...(range !== null ? { rangeWhat: range.what } : {}),
    };
  } finally {
    inputs.dispose();
  }
}
