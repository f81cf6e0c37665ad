import type { TransformerClassifier } from "../nn/model.ts";
import { inspect, modelFromBytes, type Inspection } from "./compute.ts";

/**
 * The web worker's head start: the page starts its worker from the page's head (html.ts), and
 * the worker fetches the served image model and the first held-out digit itself and analyses it
 * while the page's own script is still loading. When the page then sends the same model and asks
 * for the same pixels, the worker answers from this instead of computing again. (A text page, or
 * a folder without digits.json, has nothing to preload: the worker waits for the page as before.)
 */
export interface Preloaded {
  config: unknown;
  weights: Uint8Array;
  model: TransformerClassifier;
  pixels: number[];
  result: Inspection;
  /** Seconds the preloaded analysis took. */
  seconds: number;
}

/**
 * Fetches model/config.json, model/model.safetensors and digits.json beside the worker's script
 * and analyses the first digit; null when any is missing or is not an image model the page shows.
 *
 * @example const preloaded = preloadFirstDigit(); // in the worker, once the backend is ready
 */
export async function preloadFirstDigit(): Promise<Preloaded | null> {
  try {
    const [config, weights, digits] = await Promise.all([
      fetch("model/config.json").then((r) => (r.ok ? r.json() : null)),
      fetch("model/model.safetensors").then((r) => (r.ok ? r.arrayBuffer() : null)),
      fetch("digits.json").then((r) => (r.ok ? r.json() : null)),
    ]);
    if (config === null || weights === null || !Array.isArray(digits) || digits.length === 0)
      return null;
    const bytes = new Uint8Array(weights as ArrayBuffer);
    const model = modelFromBytes(config, bytes.slice(), "the served model");
    const pixels = (digits[0] as { pixels: number[] }).pixels;
    const started = performance.now();
    const result = inspect(model, pixels);
    return {
      config,
      weights: bytes,
      model,
      pixels,
      result,
      seconds: (performance.now() - started) / 1000,
    };
  } catch {
    return null; // the page sends the model and asks again; its errors are reported then
  }
}

/** Whether the page's model is the preloaded one (the same config and the same bytes). */
export function samePreloadedModel(p: Preloaded, config: unknown, weights: Uint8Array): boolean {
  if (p.weights.length !== weights.length || JSON.stringify(p.config) !== JSON.stringify(config))
    return false;
  for (let i = 0; i < weights.length; i++) if (p.weights[i] !== weights[i]) return false;
  return true;
}

/** Whether `pixels` are the preloaded digit's. */
export function samePixels(p: Preloaded, pixels: readonly number[]): boolean {
  return p.pixels.length === pixels.length && p.pixels.every((v, i) => v === pixels[i]);
}
