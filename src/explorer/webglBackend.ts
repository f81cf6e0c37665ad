// The explorer's WebGL backend, bundled apart (webgl.js) and loaded by the web worker only when a
// user picks WebGL: most visits never need it. Its "@tensorflow/tfjs-core" is the worker's own
// (bundle.ts resolves it to the tfjs-core the worker sets on its global before loading this), so
// the backend registers into the engine the worker's attnlip runs on, with no second copy.
import "@tensorflow/tfjs-backend-webgl";
