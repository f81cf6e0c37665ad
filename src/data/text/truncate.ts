/**
 * Shortening text on whole code points: a cut at a UTF-16 index can fall between the two
 * halves of a surrogate pair (an emoji, a CJK Extension B character) and leave a lone half,
 * which is not text (it prints as U+FFFD, fails strict UTF-8 encoders and becomes a token of
 * its own). These helpers step back before such a pair instead.
 */

/**
 * The longest prefix of `text` of at most `maxUnits` UTF-16 code units that does not end in
 * the first half of a surrogate pair.
 *
 * @param maxUnits an integer >= 0 (code units, as String.prototype.length counts).
 * @returns `text` itself when it is short enough, else a prefix of maxUnits or maxUnits - 1 units.
 * @throws RangeError when maxUnits is not an integer >= 0.
 * @example sliceCodePoints("ab😀", 3) // "ab" (not "ab\ud83d")
 */
export function sliceCodePoints(text: string, maxUnits: number): string {
  if (!Number.isInteger(maxUnits) || maxUnits < 0)
    throw new RangeError(`sliceCodePoints: maxUnits must be an integer >= 0, got ${maxUnits}`);
  if (text.length <= maxUnits) return text;
  const last = text.charCodeAt(maxUnits - 1);
  const end = maxUnits > 0 && last >= 0xd800 && last <= 0xdbff ? maxUnits - 1 : maxUnits;
  return text.slice(0, end);
}

/**
 * A value as JSON for an error message, at most `maxUnits` code units: a longer one is cut on
 * a whole code point and ends in "…".
 *
 * @param maxUnits an integer >= 1 [80].
 * @example preview("x".repeat(100), 8) // "\"xxxxxx…"
 */
export function preview(value: unknown, maxUnits = 80): string {
  const json = JSON.stringify(value) ?? String(value);
  return json.length <= maxUnits ? json : `${sliceCodePoints(json, Math.max(0, maxUnits - 1))}…`;
}
