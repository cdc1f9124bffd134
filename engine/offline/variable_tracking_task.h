// RULER's variable tracking: a chain of assignments ("VAR QWERT = 52381." then
// "VAR ASDFG = VAR QWERT." ...) scattered through noise; the question gives the value and
// asks for every variable that holds it. It needs the whole chain, not one needle, so a cache
// that keeps the first link but drops a later one loses the answer.
#pragma once
#include "absl/status/statusor.h"
#include "engine/offline/eval_sample.h"
#include "engine/offline/retrieval_tasks.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

// One chain of three variables (two hops) at increasing random depths. answers: the three
// names (right when the greedy answer contains all of them); answer_tokens list them in
// chain order.
absl::StatusOr<EvalSample> BuildVariableTrackingSample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                                       const RetrievalSpec& r);

}  // namespace kvserve
