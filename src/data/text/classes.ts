import type { TextDataset } from "./dataset.ts";
import { preview } from "./truncate.ts";

/**
 * What training says about the classes of a text file: every distinct label becomes a class,
 * so a mistyped label ("neutral" among "neg" and "pos", "spma" for "spam") silently builds a
 * model with one more class. Training prints the classes with their counts and warns about a
 * class with very few examples, naming the line where it first occurs.
 */

/** Classes with fewer records than this are flagged by {@link rareClassWarnings}. */
export const RARE_CLASS_COUNT = 3;

/**
 * The classes with their record counts in the whole file.
 *
 * @example classesLine(data) // "classes: neg 40, neutral 1, pos 40"
 */
export function classesLine(data: Pick<TextDataset, "labelNames" | "classCounts">): string {
  return `classes: ${data.labelNames.map((n, c) => `${n} ${data.classCounts[c]}`).join(", ")}`;
}

function times(n: number): string {
  return n === 1 ? "once" : n === 2 ? "twice" : `${n} times`;
}

/**
 * One warning line per class with fewer than {@link RARE_CLASS_COUNT} records (a typo?),
 * naming the label and the line where it first occurs; none for an embedded corpus (no lines)
 * or a class that does not occur (a checkpoint's class missing from the data).
 *
 * @example rareClassWarnings(data) // ['warning: label "neutral" occurs once (line 15); a typo? classes: neg 40, neutral 1, pos 40']
 */
export function rareClassWarnings(
  data: Pick<TextDataset, "labelNames" | "classCounts" | "firstLines">,
): string[] {
  if (data.firstLines === null) return [];
  const lines = data.firstLines;
  return data.labelNames.flatMap((name, c) => {
    const n = data.classCounts[c];
    if (n === 0 || n >= RARE_CLASS_COUNT) return [];
    const where = n === 1 ? `line ${lines[c]}` : `first on line ${lines[c]}`;
    return [`warning: label ${preview(name, 40)} occurs ${times(n)} (${where}); a typo? ${classesLine(data)}`];
  });
}
