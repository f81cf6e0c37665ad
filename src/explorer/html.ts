import { escapeHtml } from "../report/html.ts";

/**
 * The explorer's HTML: three panels (attention-row playground, model view, attack panel) and
 * the status line; page.js fills them. Styles reflow to one column below 900 px. For a text
 * model (body data-kind="text") the digit panels are hidden and the text-only ones shown: a
 * text box with the held-out texts and the tokens, and an attack on the token embeddings.
 *
 * @param title the page title (the model's name).
 * @param kind "image" (a ViT on digits) or "text" (a text classifier).
 * @example explorerHtml("vit-micro on MNIST").startsWith("<!doctype html>") // true
 */
export function explorerHtml(title: string, kind: "image" | "text" = "image"): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<script>window.attnlipWorker = new Worker("worker.js"); // started first: it loads while page.js does</script>
<title>attnlip explorer: ${escapeHtml(title)}</title>
<style>
body { font: 14px Helvetica, Arial, sans-serif; margin: 0 auto; max-width: 1300px; padding: 12px; color: #222; }
h1 { font-size: 20px; margin: 4px 0; } h2 { font-size: 16px; margin: 6px 0; }
#status { position: sticky; top: 0; background: #fffbe6; padding: 4px 8px; border: 1px solid #eed; min-height: 1.2em; }
.panels { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
section { border: 1px solid #ddd; border-radius: 4px; padding: 8px; overflow-x: auto; }
section.wide { grid-column: 1 / -1; }
@media (max-width: 900px) { .panels { grid-template-columns: 1fr; } }
table { border-collapse: collapse; } th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; font-size: 12px; }
th { background: #f6f6f6; } small { color: #666; }
canvas#draw { width: 280px; height: 280px; touch-action: none; cursor: crosshair; border: 1px solid #999; }
canvas.digit { cursor: pointer; margin: 2px; border: 1px solid #ccc; }
canvas#input, canvas#adversarial { width: 112px; height: 112px; border: 1px solid #999; image-rendering: pixelated; }
.row { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
label { margin-right: 8px; } input#row { width: 260px; }
body[data-kind="text"] #input-panel, body[data-kind="text"] #attack-panel, body[data-kind="text"] label:has(#folder) { display: none; }
body:not([data-kind="text"]) .text-only { display: none; }
textarea#text { width: 100%; box-sizing: border-box; height: 5em; font: inherit; }
#examples button { margin: 2px; max-width: 190px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; text-align: left; }
#tokens code { display: inline-block; margin: 1px; padding: 0 3px; background: #eef; border-radius: 3px; }
</style>
</head>
<body${kind === "text" ? ' data-kind="text"' : ""}>
<h1>attnlip explorer</h1>
<p>Model: <strong id="model-name">loading</strong>. How the attention distribution shapes the local
Lipschitz constant (arXiv:2507.07814): sigma(p) = ||diag(p) - p p^T||_2 of each attention row,
the bounds built from it, and the true values. <label>Another model folder, an attnlip
checkpoint or a Hugging Face ViT of 28x28 grey images (config.json + model.safetensors): <input type="file" id="folder" webkitdirectory multiple></label></p>
<p><label>tfjs backend: <select id="backend"><option value="wasm">wasm (XNNPACK, SIMD; as attnlip computes in Node)</option><option value="cpu">cpu (plain JavaScript)</option><option value="webgl">WebGL (the GPU)</option></select></label></p>
<div id="status" role="status">starting...</div>
<div class="panels">
<section id="playground"><h2>An attention row</h2>
<label>entries are <select id="row-mode"><option value="logits">logits (softmax first)</option><option value="probabilities">probabilities</option></select></label>
<input id="row" value="2, 1.5, 0, -1"><br>
<label title="probabilities only: divide the entries by their sum (attnlip sigma --normalize); unticked, a row must sum to 1 within 1e-6"><input type="checkbox" id="normalize"> rescale probabilities to sum 1</label><br>
<label>temperature <input id="temperature" type="range" min="0.05" max="5" step="0.05" value="1"> <span id="temperature-value">1.00</span></label>
<div id="row-out"></div><div id="envelope"></div>
</section>
<section id="input-panel"><h2>An input</h2>
<div class="row"><div><canvas id="draw" width="280" height="280"></canvas><br><button id="clear">clear</button> draw a digit, or pick a held-out test digit<span id="digits-note"></span>:</div></div>
<div id="digits"></div>
<div class="row"><canvas id="input" width="112" height="112"></canvas><div id="prediction"></div></div>
</section>
<section class="text-only" id="text-panel"><h2>A text</h2>
<textarea id="text" spellcheck="false" placeholder="type a text"></textarea><br><button id="read-text">analyse</button> (or Ctrl-Enter), or pick a held-out test text:
<div id="examples"></div>
<div id="tokens"></div>
<div id="text-prediction"></div>
</section>
<section class="wide" id="bounds-panel"><h2>Local Lipschitz bounds beside the true values at this input</h2>
<p><small>Each cell: the bound, and below it bound/true. Block true values are Krylov estimates from below; the network's is the exact input-Jacobian norm. docs/math.md derives every variant.</small></p>
<p class="text-only"><small>Text: the network's value is with respect to the sequence entering block 0 (token plus position embeddings), the space the bounds are in.</small></p>
<div id="bounds"></div></section>
<section id="maps-panel"><h2>Attention maps (block x head)</h2><div id="maps"></div></section>
<section id="sigma-panel"><h2>Sigma of each attention row</h2><div id="row-sigma"></div></section>
<section class="wide" id="attack-panel"><h2>Attack</h2>
<label><select id="attack"><option value="pgd">PGD</option><option value="fgsm">FGSM</option></select></label>
<label>l_inf eps <input id="eps" type="range" min="0" max="0.3" step="0.005" value="0.1"> <span id="eps-value">0.100</span></label>
<label>PGD steps <input id="steps" type="number" min="1" max="100" value="10" style="width:4em"></label>
<button id="run-attack">attack</button>
<div class="row"><canvas id="adversarial" width="112" height="112"></canvas><div id="attack-out"></div><div id="margins"></div></div>
</section>
<section class="wide text-only" id="text-attack-panel"><h2>Attack on the token embeddings</h2>
<p><small>As attnlip attack does for text models: the embeddings of the real tokens move (no clipping: any vector is a legal input to the blocks) within an eps-ball, l_2 over the whole sequence or l_inf per entry, in embedding units; compare eps with the mean token-embedding norm shown after a run.</small></p>
<label><select id="text-attack"><option value="pgd">PGD</option><option value="fgsm">FGSM</option></select></label>
<label><select id="text-norm"><option value="l2">l_2</option><option value="linf">l_inf</option></select></label>
<label>eps <input id="text-eps" type="number" min="0" step="any" value="0.25" style="width:6em"></label>
<label>PGD steps <input id="text-steps" type="number" min="1" max="100" value="10" style="width:4em"></label>
<button id="run-text-attack">attack</button>
<div class="row"><div id="text-attack-out"></div><div id="text-margins"></div></div>
</section>
</div>
<script src="page.js"></script>
</body>
</html>
`;
}
