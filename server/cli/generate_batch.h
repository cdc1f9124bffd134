// `kvserve generate --prompts-file F`: every line of F is a prompt; all run as one batch
// through the continuous-batching engine and each completion is printed.
#pragma once
#include "engine/generator.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"
#include "server/flags/cli_args.h"

namespace kvserve {

// Returns the process exit status; errors go to stderr with the offending value. The KV pool
// and every forward step live on `backend` (--device).
int RunGenerateBatch(const CliArgs& args, const GenerationOptions& options, const Model& model,
                     const Tokenizer& tokenizer, int64_t max_context, Backend& backend);

}  // namespace kvserve
