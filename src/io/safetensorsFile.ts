import { readFile } from "node:fs/promises";
import { writeFileAtomically } from "./atomicWrite.ts";
import {
  decodeSafetensors,
  encodeSafetensors,
  type DecodedSafetensors,
  type DecodeSafetensorsOptions,
  type TensorToWrite,
} from "./safetensors.ts";

// safetensors files on disk (Node only): the format itself, bytes in and bytes out, is in
// safetensors.ts, which runs anywhere.

/**
 * Reads and decodes a safetensors file (see {@link decodeSafetensors}); errors name `path`
 * unless `options.name` is given.
 *
 * @throws SafetensorsError on a malformed file; the file-system error when it cannot be read.
 * @example const { tensors } = await readSafetensors("runs/base/model.safetensors"); tensors.get("head.w")?.shape
 */
export async function readSafetensors(
  path: string,
  options: DecodeSafetensorsOptions = {},
): Promise<DecodedSafetensors> {
  const bytes = await readFile(path);
  return decodeSafetensors(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), {
    ...options,
    name: options.name ?? path,
  });
}

/**
 * Writes float32 tensors to a safetensors file atomically (temporary file, fsync, rename; see
 * writeFileAtomically), creating the folder. Same layout as {@link encodeSafetensors}.
 *
 * @throws as encodeSafetensors, and on file-system errors.
 * @example await writeSafetensors("w.safetensors", new Map([["w", { data: new Float32Array([1, 2]), shape: [2] }]]))
 */
export async function writeSafetensors(
  path: string,
  tensors: Map<string, TensorToWrite>,
  metadata?: Record<string, string>,
): Promise<void> {
  await writeFileAtomically(path, encodeSafetensors(tensors, metadata));
}
