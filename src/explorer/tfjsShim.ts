// What the explorer's web worker gets for "@tensorflow/tfjs" (bundle.ts aliases it here): the
// gradients only. attnlip imports the union package for the gradients it registers (backend.ts);
// the worker computes on the cpu backend, so the union's layers, converter, data and WebGL
// backend would only make the worker's script slower to load.
import "@tensorflow/tfjs-core/dist/register_all_gradients";
