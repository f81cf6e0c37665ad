// The explorer's attention maps and row sigmas fit the width of their panel for any number of
// heads: the heads of each block wrap to as many columns as fit (rendered to SVG here, as the
// page renders them), with every head and the colour legend drawn.
import { test } from "node:test";
import assert from "node:assert/strict";
import { attentionMapsSpec, wrapColumns } from "../../src/report/charts.ts";
import { rowSigmaSpec, textMapsSpec, textRowSigmaSpec } from "../../src/explorer/charts.ts";
import { renderVegaLite } from "../../src/report/render.ts";

/** blocks x heads maps of n tokens, each row a distribution. */
function mapsOf(blocks: number, heads: number, n: number): number[][][] {
  return Array.from({ length: blocks }, (_, b) =>
    Array.from({ length: heads }, (_, h) =>
      Array.from({ length: n * n }, (_, i) => ((i * 7 + b * 3 + h) % 11) / (5 * n * 11)),
    ),
  );
}

const svgWidth = (svg: string) => Number(/<svg[^>]*\swidth="([\d.]+)"/.exec(svg)?.[1]);
const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);

test("attention maps and row sigmas wrap to the panel's width for any head count, every head and the legend drawn", async () => {
  for (const heads of [1, 3, 4, 8, 12])
    for (const width of [330, 620]) {
      const maps = mapsOf(2, heads, 17);
      const rowSigma = maps.map((hs) => hs.map((m) => Array.from({ length: 17 }, (_, q) => m[q])));
      for (const [what, svg] of [
        ["maps", await renderVegaLite(attentionMapsSpec(maps, 17, 64, { width }))],
        ["row sigmas", await renderVegaLite(rowSigmaSpec(rowSigma, { width }))],
      ] as const) {
        const where = `${what}, ${heads} heads in ${width} px`;
        assert.ok(svgWidth(svg) <= width, `${where}: ${svgWidth(svg)} px wide`);
        const labels = texts(svg);
        for (let b = 0; b < 2; b++)
          assert.ok(labels.includes(`block ${b}`), `${where}: block ${b}`);
        for (let h = 0; h < heads; h++)
          assert.equal(
            labels.filter((t) => t === `head ${h}`).length,
            2,
            `${where}: head ${h} once per block`,
          );
        if (what === "maps") assert.ok(labels.includes("probability"), `${where}: the legend`);
      }
    }
});

test("a text's maps (tokens on the axes) and row sigmas wrap to the panel's width too", async () => {
  const tokens = Array.from({ length: 20 }, (_, i) => (i === 0 ? "[CLS]" : `word${i}`));
  const maps = mapsOf(2, 4, tokens.length);
  const rowSigma = maps.map((hs) => hs.map((m) => m.slice(0, tokens.length)));
  for (const width of [400, 620]) {
    const svg = await renderVegaLite(textMapsSpec(maps, tokens, 64, { width }));
    assert.ok(svgWidth(svg) <= width, `maps: ${svgWidth(svg)} px in ${width}`);
    assert.ok(texts(svg).includes("19:word19"), "tokens on the axes");
    assert.equal(texts(svg).filter((t) => t === "head 3").length, 2);
    const sigmas = await renderVegaLite(textRowSigmaSpec(rowSigma, { width }));
    assert.ok(svgWidth(sigmas) <= width, `row sigmas: ${svgWidth(sigmas)} px in ${width}`);
  }
});

test("wrapColumns: as many panels as fit, evened out over the rows a block needs", () => {
  assert.equal(wrapColumns(4, 136, 6, { width: 1000 }), 4);
  assert.equal(wrapColumns(4, 136, 6, { width: 500 }), 2); // room for 3: 2 rows of 2
  assert.equal(wrapColumns(8, 85, 6, { width: 700 }), 4); // room for 7: 2 rows of 4
  assert.equal(wrapColumns(3, 136, 6, { width: 100 }), 1);
  assert.equal(wrapColumns(12, 85, 6, { width: 620, axisWidth: 130 }), 4); // room for 5
});
