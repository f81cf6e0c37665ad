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

/**
 * What every tfjs computation says before {@link useBackend} has picked a backend. Without it,
 * tfjs picks the highest-priority backend it knows by itself: wasm, which starts asynchronously,
 * so the first tensor threw "The highest priority backend 'wasm' has not yet been initialized"
 * and, in Node, the wasm module's own exception handler dumped a screen of its minified source.
 */
export const NO_BACKEND_MESSAGE =
  'attnlip: no tfjs backend selected: call `await useBackend()` (from "attnlip": "wasm" [default] or "cpu"; "webgl" or "webgpu" in a browser) once, before making any tensor';

/** The placeholder's name: tf.getBackend() before {@link useBackend}. */
const UNSELECTED = "attnlip-unselected";

/**
 * A placeholder backend, registered above every real one, so that tfjs picks it when nothing
 * was selected: it stores nothing, and writing a tensor or running a kernel on it throws
 * {@link NO_BACKEND_MESSAGE} (an Error of one line). useBackend replaces it; memory() and the
 * bookkeeping calls answer as for an empty backend, so tf.memory() works before useBackend.
 */
class UnselectedBackend extends tf.KernelBackend {
  override write(): never {
    throw new Error(NO_BACKEND_MESSAGE);
  }
  override move(): never {
    throw new Error(NO_BACKEND_MESSAGE);
  }
  override read(): never {
    throw new Error(NO_BACKEND_MESSAGE);
  }
  override readSync(): never {
    throw new Error(NO_BACKEND_MESSAGE);
  }
  override numDataIds(): number {
    return 0;
  }
  override memory(): { unreliable: boolean } {
    return { unreliable: false };
  }
  override refCount(): number {
    return 0;
  }
  override incRef(): void {}
  override disposeData(): boolean {
    return true;
  }
  override timerAvailable(): boolean {
    return false;
  }
  override floatPrecision(): 32 {
    return 32;
  }
  override epsilon(): number {
    return 1e-7;
  }
  override dispose(): void {}
}

/** Registers the placeholder once, and every kernel tfjs knows on it as one that throws. */
function registerUnselected(): void {
  if (tf.findBackendFactory(UNSELECTED) !== null) return;
  tf.registerBackend(UNSELECTED, () => new UnselectedBackend(), Number.MAX_SAFE_INTEGER);
  const refuse = (): never => {
    throw new Error(NO_BACKEND_MESSAGE);
  };
  const names = new Set(
    ["cpu", "wasm"].flatMap((backend) => tf.getKernelsForBackend(backend).map((k) => k.kernelName)),
  );
  for (const kernelName of names)
    tf.registerKernel({ kernelName, backendName: UNSELECTED, kernelFunc: refuse });
}

registerUnselected();

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
 * Selects and initialises a tfjs backend: call it once before any tensor is made (before it,
 * every tfjs computation throws {@link NO_BACKEND_MESSAGE}). Safe to call more than once. Tensors made on another
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
