import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import "@tensorflow/tfjs-backend-wasm";

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
  if (tf.getBackend() === name) return;
  const ok = await tf.setBackend(name);
  if (!ok) throw new Error(`backend: "${name}" failed to initialise`);
  await tf.ready();
}

export { tf };
