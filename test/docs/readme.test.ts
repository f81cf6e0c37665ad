// README's command examples use commands and flags that exist: every `npx attnlip ...` line of
// a ```sh block names a registered command, and each --flag is one of that command's options
// (a renamed or removed flag would otherwise leave README telling users to type an error).
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildProgram } from "../../src/cli/program.ts";
import { readmeShellLines } from "../helpers/readme.ts";

/** The attnlip command lines of README's sh blocks, split into words after `npx attnlip`. */
function readmeCommands(): string[][] {
  return readmeShellLines()
    .filter((l) => l.startsWith("npx attnlip "))
    .map((l) => l.slice("npx attnlip ".length).split(/\s+/));
}

test("every attnlip command in README's examples exists and uses only its own flags", () => {
  const program = buildProgram();
  const commands = readmeCommands();
  assert.ok(commands.length >= 20, `found ${commands.length} commands`);
  const problems: string[] = [];
  for (const [name, ...args] of commands) {
    const command = program.commands.find((c) => c.name() === name);
    if (command === undefined) {
      problems.push(`unknown command ${name}`);
      continue;
    }
    const flags = new Set(
      command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined)),
    );
    for (const arg of args)
      if (arg.startsWith("--") && !flags.has(arg.split("=")[0]) && arg !== "--help")
        problems.push(`${name}: unknown flag ${arg}`);
  }
  assert.deepEqual(problems, []);
});
