import { visit, type JSONPath } from "jsonc-parser";

/**
 * JSON parsing that refuses an object with the same key twice, at any depth. JSON.parse keeps
 * the LAST value of a repeated key without a word, so a safetensors header listing "W_Q" twice
 * loaded the second entry (zeros) silently; RFC 8259 leaves such a document's meaning open,
 * and attnlip refuses it. Every reader of a JSON file a user hands over goes through
 * {@link parseJsonStrict}.
 *
 * The value is JSON.parse's own (its syntax checks, its error messages, its numbers); the
 * duplicate check is a second pass with jsonc-parser's `visit` (Microsoft's scanner behind VS
 * Code's JSON support), which reports each property name, unescaped, with its line and column
 * and the path of the enclosing object, without building a tree.
 */

/** An object in a JSON text has the same key twice (a SyntaxError, like JSON.parse's own). */
export class DuplicateKeyError extends SyntaxError {
  override name = "DuplicateKeyError";
  /**
   * @param key the repeated key (unescaped).
   * @param path where the object is, e.g. `$`, `$.layers["0"]`, `$.vocab[3]`.
   * @param line 1-based line of the second occurrence; @param column its 1-based column.
   * @param firstLine 1-based line of the first occurrence; @param firstColumn its column.
   */
  constructor(
    readonly key: string,
    readonly path: string,
    readonly line: number,
    readonly column: number,
    readonly firstLine: number,
    readonly firstColumn: number,
  ) {
    super(
      `duplicate key ${JSON.stringify(key)} in the object at ${path} (line ${line}, column ${column}; ` +
        `first at line ${firstLine}, column ${firstColumn}): a JSON object must not repeat a key`,
    );
  }
}

/** `$` followed by `.name`, `["odd name"]` or `[index]` per step. */
function formatPath(path: JSONPath): string {
  return (
    "$" +
    path
      .map((p) =>
        typeof p === "number"
          ? `[${p}]`
          : /^[A-Za-z_$][\w$]*$/.test(p)
            ? `.${p}`
            : `[${JSON.stringify(p)}]`,
      )
      .join("")
  );
}

/**
 * Parses a JSON text like JSON.parse, and refuses it when any object, at any depth, has the
 * same key twice (after unescaping: "a" and "\u0061" are the same key).
 *
 * @param text the JSON text (a leading BOM is an error, as for JSON.parse: strip it first).
 * @returns the parsed value, exactly what JSON.parse(text) returns.
 * @throws SyntaxError from JSON.parse when the text is not JSON; DuplicateKeyError (a
 *   SyntaxError) naming the key, the object's path and both positions. The caller prefixes
 *   the file's name.
 * @example parseJsonStrict('{"W_Q": 1, "W_Q": 2}') // throws DuplicateKeyError: duplicate key "W_Q" in the object at $ ...
 */
export function parseJsonStrict(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (!text.includes("{")) return value; // no object, no key to repeat
  // One map per open object, key -> [line, column] (0-based) of its first occurrence.
  const open: Map<string, [number, number]>[] = [];
  visit(
    text,
    {
      onObjectBegin: () => {
        open.push(new Map());
      },
      onObjectEnd: () => {
        open.pop();
      },
      onObjectProperty: (key, _offset, _length, line, column, pathSupplier) => {
        const keys = open[open.length - 1];
        const first = keys.get(key);
        if (first !== undefined)
          throw new DuplicateKeyError(
            key,
            formatPath(pathSupplier()),
            line + 1,
            column + 1,
            first[0] + 1,
            first[1] + 1,
          );
        keys.set(key, [line, column]);
      },
    },
    { disallowComments: true, allowTrailingComma: false },
  );
  return value;
}
