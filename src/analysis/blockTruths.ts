import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace, type ForwardTrace } from "../nn/trace.ts";
import {
  blockLipschitz,
  headLipschitz,
  type PowerIterationOptions,
  type PowerIterationResult,
} from "../lipschitz/truth/powerIteration.ts";

/**
 * The estimated true values of blocks and their heads (Lanczos on Df^T Df, docs/math.md section
 * 5), one (block, input) at a time: what {@link analyzeExamples} computes after each input's
 * bounds, and what worker threads compute block by block when one input of a large model is
 * analysed (src/parallel/analyzeTask.ts): both call {@link blockTruthAt}, so the values are the
 * same either way.
 */

/** One block's true value and its heads' at one input (null: not asked for). */
export interface BlockTruthAt {
  block: PowerIterationResult | null;
  heads: (PowerIterationResult | null)[];
}

/**
 * Block i's (and its heads') estimated local Lipschitz constant at example e of a traced batch.
 *
 * @param trace the traced forward pass of the batch (read, not disposed).
 * @param mask the batch's padding mask [b, n] or null.
 * @param which whether to estimate the block's value and the heads' values.
 * @throws as blockLipschitz / headLipschitz.
 * @example blockTruthAt(model, trace, 0, 0, null, { maxIterations: 40 }, { blocks: true, heads: false }).block?.value
 */
export function blockTruthAt(
  model: TransformerClassifier,
  trace: ForwardTrace,
  i: number,
  e: number,
  mask: tf.Tensor | null,
  iteration: PowerIterationOptions,
  which: { blocks: boolean; heads: boolean },
): BlockTruthAt {
  const blockInput = tf.slice(trace.blocks[i].input, e, 1);
  const attnInput = tf.slice(trace.blocks[i].attnInput, e, 1);
  const exMask = mask ? tf.slice(mask, e, 1) : null;
  try {
    const block = which.blocks ? blockLipschitz(model, i, blockInput, exMask, iteration) : null;
    const heads = Array.from({ length: model.config.heads }, (_, h) =>
      which.heads ? headLipschitz(model, i, h, attnInput, exMask, iteration) : null,
    );
    return { block, heads };
  } finally {
    tf.dispose([blockInput, attnInput]);
    exMask?.dispose();
  }
}

/** The true values of some blocks at every input: `values[k][e]` is block `blocks[k]` at input e. */
export interface BlockTruths {
  blocks: number[];
  values: BlockTruthAt[][];
}

/**
 * {@link blockTruthAt} for the listed blocks at every input, over traced forward passes of the
 * same batches as {@link analyzeExamples} (options.batchSize inputs each, from the first), so
 * that every block input is the one analyzeExamples sees, bit for bit.
 *
 * @param inputs images or token ids as analyze takes them; options.mask [N, n] for text.
 * @param blocks block indices, each in [0, blocks).
 * @param options.onBlock called after each (input, block) with the count done and the total.
 * @throws RangeError on a block index outside the model; as blockTruthAt.
 * @example blockTruths(model, ids, [0, 1], { mask, maxIterations: 40, truth: { blocks: true, heads: true } })
 */
export function blockTruths(
  model: TransformerClassifier,
  inputs: tf.Tensor,
  blocks: readonly number[],
  options: PowerIterationOptions & {
    mask?: tf.Tensor | null;
    batchSize?: number;
    truth: { blocks: boolean; heads: boolean };
    onBlock?: (done: number, total: number) => void;
  },
): BlockTruths {
  for (const i of blocks)
    if (!Number.isInteger(i) || i < 0 || i >= model.config.blocks)
      throw new RangeError(`blockTruths: block ${i} is outside [0, ${model.config.blocks})`);
  const count = inputs.shape[0];
  const batchSize = options.batchSize ?? 16;
  const { mask: allMask, batchSize: _b, truth, onBlock, ...iteration } = options;
  const values: BlockTruthAt[][] = blocks.map(() => []);
  let done = 0;
  for (let start = 0; start < count; start += batchSize) {
    const size = Math.min(batchSize, count - start);
    const x = tf.slice(inputs, start, size);
    const mask = allMask ? tf.slice(allMask, start, size) : null;
    const { logits, trace } = model.forward(x, { trace: true, mask });
    logits.dispose();
    try {
      for (let e = 0; e < size; e++)
        blocks.forEach((i, k) => {
          values[k].push(blockTruthAt(model, trace!, i, e, mask, iteration, truth));
          onBlock?.(++done, count * blocks.length);
        });
    } finally {
      disposeTrace(trace!);
      x.dispose();
      mask?.dispose();
    }
  }
  return { blocks: [...blocks], values };
}
