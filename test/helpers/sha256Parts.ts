import { createHash } from "node:crypto";

/**
 * The content digest of src/data/identity.ts written out independently, for tests: SHA-256 over
 * each part's byte length (64-bit little-endian) followed by its bytes, as "sha256:" and 64 hex
 * digits.
 */
export function sha256Parts(parts: readonly (Uint8Array | string)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) {
    const bytes = typeof part === "string" ? Buffer.from(part, "utf8") : part;
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(bytes.length));
    hash.update(length);
    hash.update(bytes);
  }
  return "sha256:" + hash.digest("hex");
}
