import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import CDP from "chrome-remote-interface";

/** One page load's timing: the wall time to the first analysed input and the page's own marks. */
export interface PageLoad {
  /** ms from asking the browser to navigate until document.body.dataset.analyses >= 1. */
  ms: number;
  /** The page's performance marks named "attnlip:...", in ms from its navigation start. */
  marks: Record<string, number>;
}

/**
 * Opens `url` `loads` times in headless Chromium as a first-time visitor would, and times each
 * load to the page's first analysed input. Each load gets a fresh browser context (empty HTTP
 * and code caches), after one unmeasured load that starts the browser's own processes. The
 * browser is driven over the Chrome DevTools Protocol (chrome-remote-interface) with a session
 * on the page only: Playwright, which the browser tests use, also attaches to every web worker
 * and enables its Runtime domain there, and that alone made the explorer worker's script
 * evaluation several times slower (measured: 0.08-0.13 s without, 0.49-0.78 s with;
 * docs/performance.md), a cost no visitor's browser has.
 *
 * @param chromium the browser's executable.
 * @param url the page (served by the caller).
 * @param loads page loads, one after another in the same browser (it starts once).
 * @throws Error when the browser does not start within 30 s or a load takes over 120 s.
 * @example const loads = await firstVisits("/usr/bin/chromium", url, 5);
 */
export async function firstVisits(chromium: string, url: string, loads: number): Promise<PageLoad[]> {
  const profile = mkdtempSync(join(tmpdir(), "attnlip-bench-chromium-"));
  const browser = spawn(chromium, ["--headless", "--no-sandbox", "--remote-debugging-port=0", `--user-data-dir=${profile}`, "about:blank"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let text = "";
      const timer = setTimeout(() => reject(new Error(`${chromium} did not start within 30 s: ${text.slice(-300)}`)), 30_000);
      browser.stderr!.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        const found = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(text);
        if (found) {
          clearTimeout(timer);
          resolve(Number(found[1]));
        }
      });
      browser.on("exit", (code) => reject(new Error(`${chromium} exited with ${code}: ${text.slice(-300)}`)));
    });
    const root = await CDP({ port, local: true, target: (await (await fetch(`http://127.0.0.1:${port}/json/version`)).json()).webSocketDebuggerUrl });
    const results: PageLoad[] = [];
    try {
      // One load more, first and not returned: the browser's own start (its first renderer and
      // network processes) is no part of a visit to the page (measured: 0.7-1.3 s more).
      for (let i = -1; i < loads; i++) {
        const { browserContextId } = await root.send("Target.createBrowserContext");
        const { targetId } = await root.send("Target.createTarget", { url: "about:blank", browserContextId });
        const page = await CDP({ port, local: true, target: targetId as string });
        try {
          const start = performance.now();
          await page.send("Page.navigate", { url });
          for (;;) {
            const { result } = (await page.send("Runtime.evaluate", {
              expression: "Number(document.body?.dataset.analyses ?? 0)",
              returnByValue: true,
            })) as { result: { value: number } };
            if (result.value >= 1) break;
            if (performance.now() - start > 120_000) throw new Error(`${url}: no analysed input after 120 s`);
            await new Promise((r) => setTimeout(r, 20));
          }
          const ms = performance.now() - start;
          const { result } = (await page.send("Runtime.evaluate", {
            expression: `Object.fromEntries(performance.getEntriesByType("mark").filter((m) => m.name.startsWith("attnlip:")).map((m) => [m.name.slice(8), m.startTime]))`,
            returnByValue: true,
          })) as { result: { value: Record<string, number> } };
          if (i >= 0) results.push({ ms, marks: result.value });
        } finally {
          await page.close();
          await root.send("Target.disposeBrowserContext", { browserContextId });
        }
      }
    } finally {
      await root.send("Browser.close").catch(() => undefined);
      await root.close();
    }
    return results;
  } finally {
    if (browser.exitCode === null) {
      const exited = new Promise((r) => browser.once("exit", r));
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      browser.kill("SIGKILL");
    }
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
}
