import type { BackendName } from "../backend.ts";
import type { Model } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { evaluateIn, joinEvaluations, type EvaluateRobustnessOptions, type RobustnessEvaluation } from "../robustness/evaluate.ts";
import { lipschitzProxyIn, proxyFromMargins, type LipschitzProxy } from "../robustness/lipschitzProxy.ts";
import type { ClipRange } from "../robustness/loss.ts";
import { modelInputs, type ModelInputs } from "../robustness/modelInputs/index.ts";
import { checkCount, resolveAttackOptions } from "../robustness/options.ts";
import { resolveAttacks } from "../robustness/tally.ts";
import { checkWorkers } from "./workerCount.ts";
import { inOrder, WorkerPool } from "./pool.ts";
import { shareModel } from "./sharedModel.ts";
import type { TaskSpec } from "./tasks.ts";
import { sliceRows } from "./tensorData.ts";
import { withModelInputs, type ModelInputsPayload } from "./workerInputs.ts";

/**
 * Attacks in worker threads: examples are attacked in batches whose random starts depend only
 * on (seed, eps, batch index), so whole batches can go to different workers (each told its
 * first batch's index) and the per-example results joined in order are the single-thread
 * ones (a test compares them); the Lipschitz proxy of each example likewise.
 */

/** Evaluation settings a worker may receive (no callbacks: they stay in the main thread). */
type WorkerEvaluateOptions = Omit<EvaluateRobustnessOptions, "onProgress" | "onWarning">;

/** What one worker attacks. */
interface AttackTaskPayload extends ModelInputsPayload {
  clip: ClipRange;
  labels: Int32Array;
  options: WorkerEvaluateOptions;
}

/** What one worker sends back. */
interface AttackTaskResult {
  evaluation: RobustnessEvaluation;
  margins: Float64Array;
  lipschitz: Float64Array;
  warnings: string[];
}

/** The worker side: evaluation and proxy of one slice of whole batches. */
export const ATTACK_TASK: TaskSpec<AttackTaskPayload, AttackTaskResult> = {
  name: "attack",
  run: (task) =>
    withModelInputs(task, (model, x, mask) => {
      const space = modelInputs(model.config.kind, "attack").space(model, x, mask, task.clip);
      const warnings: string[] = [];
      const evaluation = evaluateIn(space, task.labels, { ...task.options, onWarning: (m) => warnings.push(m) }, "attack");
      const proxy = lipschitzProxyIn(space, task.labels, { batchSize: task.options.batchSize }, "attack");
      return { evaluation, margins: proxy.margins, lipschitz: proxy.lipschitz, warnings };
    }),
};

/** Options of {@link attackInWorkers}: the evaluation's, the worker count and their backend. */
export interface ParallelAttackOptions extends EvaluateRobustnessOptions {
  /** Worker threads (1: this thread, no pool) [1]. */
  workers?: number;
  /** The tfjs backend of the workers ["wasm"]. */
  backend?: BackendName;
}

/**
 * The robustness evaluation and the Lipschitz proxy of loaded inputs, as evaluateIn and
 * lipschitzProxyIn compute them in their input space, over worker threads: each task is one
 * batch of options.batchSize (32) examples with its batch index; results are joined in order.
 * With workers 1 (or one batch) it runs in this thread. onProgress counts (batch, eps, attack)
 * units as batches finish; the first warning of any worker goes to onWarning.
 *
 * @param inputs held-out inputs of the model's kind (robustness/modelInputs/); not disposed.
 * @returns what evaluateIn and lipschitzProxyIn return on the same inputs and options.
 * @throws as evaluateIn (an InputError in a worker is rethrown as one).
 * @example const { evaluation, proxy } = await attackInWorkers(model, inputs, { eps: [0, 0.1], workers: 2 });
 */
export async function attackInWorkers(
  model: TransformerClassifier,
  inputs: ModelInputs,
  options: ParallelAttackOptions,
): Promise<{ evaluation: RobustnessEvaluation; proxy: LipschitzProxy }> {
  const { workers: asked = 1, backend = "wasm", onProgress, onWarning, ...rest } = options;
  const workers = checkWorkers(asked, "attackInWorkers");
  const batchSize = options.batchSize ?? 32;
  const n = inputs.count;
  const batches = Number.isInteger(batchSize) && batchSize > 0 ? Math.ceil(n / batchSize) : 1;
  if (workers <= 1 || batches <= 1) {
    const evaluation = evaluateIn(inputs.space, inputs.labels, options, "attack");
    const proxy = lipschitzProxyIn(inputs.space, inputs.labels, { batchSize }, "attack");
    return { evaluation, proxy };
  }
  // Bad settings or inputs are refused here, as the single-thread path refuses them, before any worker starts.
  const attacks = resolveAttacks(options, "attack").length;
  for (const eps of options.eps)
    resolveAttackOptions({ ...options, eps, stepSize: options.stepSize ?? undefined, clip: inputs.space.clip }, "attack", inputs.space.shape);
  checkCount(batchSize, "batchSize", "attack");
  inputs.space.check("attack");
  const started = performance.now();
  const shared = shareModel(model as unknown as Model);
  const values = (await inputs.x.data()) as Float32Array | Int32Array;
  const maskValues = inputs.mask === null ? null : ((await inputs.mask.data()) as Float32Array | Int32Array);
  const perBatch = options.eps.filter((e) => e > 0).length * attacks;
  const total = batches * perBatch;
  let done = 0;
  let warned = false;
  const pool = new WorkerPool(Math.min(workers, batches));
  try {
    const parts = await inOrder(
      Array.from({ length: batches }, async (_, j) => {
        const start = j * batchSize;
        const size = Math.min(batchSize, n - start);
        const payload: AttackTaskPayload = {
          model: shared,
          backend,
          x: sliceRows(values, inputs.x, start, size),
          mask: maskValues === null || inputs.mask === null ? null : sliceRows(maskValues, inputs.mask, start, size),
          clip: inputs.space.clip,
          labels: inputs.labels.slice(start, start + size),
          options: { ...rest, batchOffset: j },
        };
        const part = await pool.run<AttackTaskResult>("attack", payload);
        done += perBatch;
        if (perBatch > 0) onProgress?.(done, total);
        if (!warned && part.warnings.length > 0) {
          warned = true;
          (onWarning ?? ((m: string) => console.warn(m)))(part.warnings[0]);
        }
        return part;
      }),
    );
    const evaluation = joinEvaluations(
      parts.map((p) => p.evaluation),
      (performance.now() - started) / 1000,
    );
    const concat = (pick: (p: AttackTaskResult) => Float64Array) => {
      const out = new Float64Array(n);
      parts.forEach((p, j) => out.set(pick(p), j * batchSize));
      return out;
    };
    return { evaluation, proxy: proxyFromMargins(concat((p) => p.margins), concat((p) => p.lipschitz)) };
  } finally {
    await pool.close();
  }
}
