import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import "@tensorflow/tfjs-backend-wasm";
// tfjs-core registers no gradients by itself: package.json's "#tfjs-gradients" registers them on
// the same engine (lib/tfjsGradients.node.mjs says how, in Node; bundlers for browsers take
// tfjs-core's own gradient modules through lib/tfjsGradients.browser.mjs).
import "#tfjs-gradients";

/** tfjs backends attnlip supports: wasm (default, XNNPACK + SIMD) and cpu (pure JS fallback). */
export type BackendName = "wasm" | "cpu";

export const BACKENDS: readonly BackendName[] = ["wasm", "cpu"];

/**
 * Selects and initialises a tfjs backend. Safe to call more than once.
 *
 * @throws Error naming the backend when it is unknown or fails to start.
 */
export async function useBackend(name: BackendName = "wasm"): Promise<void> {
  if (!BACKENDS.includes(name))
    throw new Error(`backend: expected one of ${BACKENDS.join(", ")}, got "${String(name)}"`);
  if (currentBackend() === name) return;
  const ok = await tf.setBackend(name);
  if (!ok) throw new Error(`backend: "${name}" failed to initialise`);
  await tf.ready();
  // The cpu backend advertises tfjs-node on its first write; attnlip cannot use tfjs-node
  // (its install downloads a binary), so the hint would only confuse users.
  const backend = tf.backend() as unknown as { firstUse?: boolean };
  if ("firstUse" in backend) backend.firstUse = false;
}

export { tf };

/** The active backend's name, without letting tfjs pick (and print about) a default first. */
function currentBackend(): string | null {
  return tf.engine().backendName ?? null;
}

/**
 * One-hot encoding as float32 of int32 indices, shape [..., depth]. tfjs's wasm OneHot
 * kernel returns all zeros when asked for dtype float32 (checked with 4.22), so the
 * encoding is made in int32 and cast.
 */
export function oneHotFloat(indices: tf.Tensor, depth: number): tf.Tensor {
  return tf.tidy(() => tf.cast(tf.oneHot(indices, depth), "float32"));
}
