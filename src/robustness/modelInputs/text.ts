import { tf } from "../../backend.ts";
import { textEvaluationSplit } from "../../data/evaluationInputs.ts";
import { refuseEmptyTexts, textSplitTensors } from "../../data/text/dataset.ts";
import type { TextClassifier } from "../../nn/textClassifier.ts";
import { InputError } from "../../util/errors.ts";
import { ATTACK_DEFAULTS } from "../defaults.ts";
import { embeddingSpace } from "../inputSpace.ts";
import type { ModelInputKind } from "./registry.ts";

/**
 * A text classifier's inputs: token ids int32 [N, n] with their padding mask float32 [N, n],
 * encoded with the checkpoint's tokenizer (spam, csv:FILE, jsonl:FILE), attacked in
 * token-embedding space [N, n, d] (padding rows never move, no clipping:
 * robustness/inputSpace.ts).
 *
 * load throws InputError for a model that is not a text model, data with more classes than
 * the model, unreadable data and the held-out checks' refusals; space throws RangeError
 * without a mask.
 *
 * @example const inputs = await TEXT_INPUTS.load(model, { who: "analyze", data: "spam", trained: null, seed: 0, n: 8 }, {});
 */
export const TEXT_INPUTS: ModelInputKind = {
  modelKind: "text",
  task: "text",
  defaultData: "spam",
  noun: "test texts in token-embedding space, padding masked",
  attackNoun: "test texts in token-embedding space (no clipping)",
  units: "embedding",
  defaultEps: (norm) => [...ATTACK_DEFAULTS.eps.text[norm]],
  space(model, x, mask, _clip) {
    if (mask === null) throw new RangeError("text inputs: the padding mask is missing");
    return embeddingSpace(model as unknown as TextClassifier, { ids: x, mask }, "attack");
  },
  async load(model, request, reading) {
    const config = model.config;
    if (config.kind !== "text") throw new InputError(`${request.who}: text inputs need a text model, this is a ${config.kind} model`);
    // The checkpoint's own columns and encoding are applied by textEvaluationSplit when the data is its own.
    const chosen = await textEvaluationSplit(request, {
      classes: config.classes,
      tokenizer: reading.tokenizer ?? undefined,
      vocabSize: config.vocabSize,
      maxLength: config.maxLength,
      labelNames: request.trained?.labels ?? reading.labels ?? undefined,
      textColumn: reading.textColumn,
      labelColumn: reading.labelColumn,
      encoding: reading.encoding,
    });
    refuseEmptyTexts(chosen.split, `${request.who}: data ${chosen.spec}`);
    const { ids, mask } = textSplitTensors(chosen.split);
    return {
      spec: chosen.spec,
      info: chosen.info,
      count: chosen.split.count,
      labels: chosen.split.labels,
      x: ids,
      mask,
      space: embeddingSpace(model as unknown as TextClassifier, { ids, mask }, request.who),
      checkEps: () => {}, // the embedding space has no valid range, so no upper limit
      dispose: () => tf.dispose([ids, mask]),
    };
  },
};
