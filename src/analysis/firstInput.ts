import type { tf } from "../backend.ts";

/**
 * The first analysed input, as analysis.json keeps it beside the attention maps (which are of
 * that input), so that the report can show what the maps belong to: an image's pixels, or a
 * text's tokens.
 */
export type FirstInput =
  | {
      kind: "image";
      height: number;
      width: number;
      channels: number;
      /** Row-major [height, width, channels] values, rounded to 3 decimals. */
      pixels: number[];
    }
  | {
      kind: "text";
      /** The token of each position (padding included), as the tokenizer names it. */
      tokens: string[];
      /** Real (unpadded) positions, the first ones. */
      real: number;
    };

/**
 * The first input of a batch: images [N, H, W, C] give their pixels; token ids [N, n] give
 * their tokens through `decode` (null without one, e.g. a random-init text model whose
 * tokenizer is not at hand).
 *
 * @param x the model's input, images float32 [N, H, W, C] or token ids int32 [N, n]; read, not disposed.
 * @param mask the padding mask [N, n] (1 = real token) of text, null for images.
 * @example firstInputOf(images, null) // { kind: "image", height: 28, width: 28, channels: 1, pixels: [...] }
 */
export function firstInputOf(
  x: tf.Tensor,
  mask: tf.Tensor | null,
  decode?: (ids: ArrayLike<number>) => string[],
): FirstInput | null {
  if (x.shape[0] === 0) return null;
  if (x.rank === 4) {
    const [, height, width, channels] = x.shape as [number, number, number, number];
    const size = height * width * channels;
    const pixels = Array.from((x.dataSync() as Float32Array).subarray(0, size), (v) => Math.round(v * 1000) / 1000);
    return { kind: "image", height, width, channels, pixels };
  }
  if (x.rank === 2 && decode !== undefined) {
    const n = x.shape[1] as number;
    const ids = (x.dataSync() as Int32Array).subarray(0, n);
    const real = mask === null ? n : Array.from((mask.dataSync() as Float32Array).subarray(0, n)).filter((v) => v !== 0).length;
    return { kind: "text", tokens: decode(ids), real };
  }
  return null;
}
