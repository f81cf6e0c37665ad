// Registers tfjs-core's gradients in a browser bundle (package.json maps "#tfjs-gradients" here
// under the "browser" condition): bundlers resolve tfjs-core's ES modules themselves.
import "@tensorflow/tfjs-core/dist/register_all_gradients";
