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

const WORDS = ["red", "blue", "green", "gold", "gray", "pink", "teal", "navy", "rose", "jade"];

/**
 * Two common words that tell text i from every other i < 100 after tokenization (each word is
 * frequent enough to be in a small vocabulary, unlike a number that occurs once and becomes
 * [UNK]): test texts built from it are held-out inputs, not copies of training inputs.
 *
 * @example wordPair(12) // "blue blue"
 */
export function wordPair(i: number): string {
  return `${WORDS[i % 10]} ${WORDS[Math.floor(i / 10) % 10]}`;
}
