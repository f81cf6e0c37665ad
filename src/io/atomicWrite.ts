import writeFileAtomic from "write-file-atomic";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * Writes a file atomically (write-file-atomic: a temporary file in the same folder, fsync,
 * then rename), creating the folder first, so an interrupted run never leaves a partial file.
 */
export async function writeFileAtomically(path: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFileAtomic(path, typeof data === "string" ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength));
}

/** JSON with two-space indentation and a final newline, written atomically. */
export async function writeJsonAtomically(path: string, value: unknown): Promise<void> {
  await writeFileAtomically(path, JSON.stringify(value, null, 2) + "\n");
}
