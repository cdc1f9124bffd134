#include "engine/compress/reducer.h"

#include "engine/compress/cluster_reducer.h"
#include "engine/compress/random_sample_reducer.h"

namespace kvserve {

std::unique_ptr<Reducer> MakeReducer(std::string_view kind, int64_t protected_dims) {
  if (kind == "random") return std::make_unique<RandomSampleReducer>();
  if (kind == "cluster") return std::make_unique<ClusterReducer>(protected_dims);
  return nullptr;
}

}  // namespace kvserve
