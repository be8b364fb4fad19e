// `embody-engine quantize --in CKPT --out CKPT8`: post-training quantisation of a trained
// policy's checkpoint into an FP8 checkpoint (engine/ptq.h), then, for a policy trained on the
// built-in task, the fp32 and fp8 policies on the same held-out batch side by side.
#pragma once

namespace engine {

// argv[0] is "quantize". Exit status: 0 done; 2 bad command line; 1 any other failure.
int RunQuantizeCommand(int argc, char** argv);

}  // namespace engine
