import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import "@tensorflow/tfjs-backend-wasm";
// tfjs-core registers no gradients by itself: package.json's "#tfjs-gradients" registers them on
// the same engine (lib/tfjsGradients.node.mjs says how, in Node; bundlers for browsers take
// tfjs-core's own gradient modules through lib/tfjsGradients.browser.mjs).
import "#tfjs-gradients";

/**
 * tfjs-backend-wasm's Identity kernel copies its input, and tfjs-core clones (runs Identity on)
 * every tensor a gradient saves for the backward pass, so on wasm a training step's gradient
 * tape held a copy of every weight matrix and of most activations (BERT-base, 128 tokens,
 * batch 1: 610 MB of the wasm heap's 4 GB). This Identity shares the input's buffer, as the
 * cpu backend's does: tensors are immutable (Variable.assign swaps buffers), so a clone can
 * share its data; the values are the same.
 */
function shareWasmIdentity(): void {
  const kernel = tf.getKernel("Identity", "wasm");
  if (kernel === undefined || kernel.kernelFunc === sharedIdentity) return;
  tf.unregisterKernel("Identity", "wasm");
  tf.registerKernel({ kernelName: "Identity", backendName: "wasm", kernelFunc: sharedIdentity });
}

function sharedIdentity({
  inputs,
  backend,
}: {
  inputs: tf.NamedTensorInfoMap;
  backend: unknown;
}): tf.TensorInfo {
  const x = inputs.x as tf.TensorInfo;
  (backend as { incRef(dataId: tf.DataId): void }).incRef(x.dataId);
  return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
}

shareWasmIdentity();

/** tfjs backends attnlip runs on in Node (the CLI's --backend): wasm (default, XNNPACK + SIMD) and cpu (pure JS). */
export type BackendName = "wasm" | "cpu";

export const BACKENDS: readonly BackendName[] = ["wasm", "cpu"];

/**
 * Every tfjs backend {@link useBackend} takes: the Node ones and, in a browser, WebGL and WebGPU,
 * which attnlip does not load itself: import "@tensorflow/tfjs-backend-webgl" (or -webgpu) first.
 */
export type AnyBackendName = BackendName | "webgl" | "webgpu";

const ALL_BACKENDS: readonly AnyBackendName[] = [...BACKENDS, "webgl", "webgpu"];

/**
 * Selects and initialises a tfjs backend. Safe to call more than once. Tensors made on another
 * backend move on first use (tfjs moves their data).
 *
 * @param name "wasm" [default] or "cpu" anywhere; "webgl" or "webgpu" in a browser once their
 *   tfjs package is imported. In a browser, wasm needs its .wasm files served (setWasmPaths of
 *   @tensorflow/tfjs-backend-wasm).
 * @throws Error naming the backend when it is unknown, not registered, or fails to start.
 * @example await useBackend("cpu");
 */
export async function useBackend(name: AnyBackendName = "wasm"): Promise<void> {
  if (!ALL_BACKENDS.includes(name))
    throw new Error(`backend: expected one of ${ALL_BACKENDS.join(", ")}, got "${String(name)}"`);
  if (currentBackend() === name) return;
  if (tf.findBackendFactory(name) === null)
    throw new Error(
      `backend: "${name}" is not registered; import "@tensorflow/tfjs-backend-${name}" first (it runs in browsers)`,
    );
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
