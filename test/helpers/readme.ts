import { readFileSync } from "node:fs";

/**
 * README's shell lines in order: the lines of its ```sh blocks, continuation lines joined,
 * `a && b` split into two, comments dropped.
 */
export function readmeShellLines(): string[] {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    m[1].replace(/\\\n\s*/g, " "),
  );
  return blocks
    .flatMap((b) => b.split("\n"))
    .flatMap((l) => l.replace(/(^|\s)#\s.*$/, "").split("&&"))
    .map((l) => l.trim())
    .filter((l) => l !== "");
}
