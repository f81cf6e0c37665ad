/**
 * The tiny text classifier the tests train and attack (d_model 8, 2 heads, 1 block), with the
 * vocabulary, length and classes a test needs.
 *
 * @example new TextClassifier(tinyText({ vocabSize: 50 }), 1)
 */
export function tinyText(sizes: { vocabSize: number; maxLength?: number; classes?: number }) {
  return {
    kind: "text",
    vocabSize: sizes.vocabSize,
    maxLength: sizes.maxLength ?? 8,
    dModel: 8,
    heads: 2,
    blocks: 1,
    mlpHidden: 16,
    classes: sizes.classes ?? 2,
    pooling: "cls",
  } as const;
}
