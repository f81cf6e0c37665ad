// The explorer's WebGL backend, bundled apart (webgl.js) and loaded by the web worker only when a
// user picks WebGL: most visits never need its ~1 MB. Its bundle carries its own copy of
// tfjs-core; tfjs keeps the engine and the kernel registry on the global object, so the backend
// registers into the engine the worker's attnlip already runs on.
import "@tensorflow/tfjs-backend-webgl";
