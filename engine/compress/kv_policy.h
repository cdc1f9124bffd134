// The interface every KV selection policy implements: given one layer of one sequence and
// its recent queries, say which entries each KV head keeps (and with what log-weight).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/kv_rows.h"

namespace kvserve {

// One layer of one sequence, read from the pool through its page list.
struct LayerKv {
  PagedKv kv;
  absl::Span<const int32_t> pages;  // the layer's pages, in slot order
  int64_t len = 0;                  // slots in use

  // out[head_dim] = the key / value of KV head h at slot s, as fp32 whatever the storage.
  void Key(int64_t s, int64_t h, float* out) const { ReadKvRow(kv, kv.k, Offset(s, h), out); }
  void Value(int64_t s, int64_t h, float* out) const { ReadKvRow(kv, kv.v, Offset(s, h), out); }
  // The same as a new vector (tests, tools; hot loops use the forms above with a buffer).
  std::vector<float> Key(int64_t s, int64_t h) const {
    std::vector<float> out(static_cast<size_t>(kv.head_dim));
    Key(s, h, out.data());
    return out;
  }
  std::vector<float> Value(int64_t s, int64_t h) const {
    std::vector<float> out(static_cast<size_t>(kv.head_dim));
    Value(s, h, out.data());
    return out;
  }
  float LogWeight(int64_t s, int64_t h) const { return kv.log_w[Offset(s, h)]; }
  int64_t Offset(int64_t s, int64_t h) const {
    return (static_cast<int64_t>(pages[s / kv.page_size]) * kv.page_size + s % kv.page_size) * kv.n_kv_heads + h;
  }
};

struct SelectionRequest {
  LayerKv layer;                  // keys are post-RoPE
  absl::Span<const float> window; // [window_len, n_heads, head_dim] queries, oldest first;
                                  // the last is the query of the newest cached slot
  int64_t window_len = 0;
  int64_t n_heads = 0;            // query heads, a multiple of n_kv_heads
  float scale = 1.0f;             // attention scale, 1/sqrt(head_dim)
  WeightView wo;                  // the layer's o_proj [hidden, n_heads * head_dim]
  int64_t n_keep = 0;             // entries each KV head keeps, 1 <= n_keep <= layer.len
  // Optional [n_kv_heads, layer.len] per-entry ||v W_O|| norms a caller has kept from
  // earlier selections (values never change, so they need computing once per entry).
  absl::Span<const float> value_norms;
  // The layer's last probe_slots slots hold a question probe's entries (its tokens run as if
  // the question came right after the cache): the window's queries attend to them as to any
  // entry, but they are never kept, so a Selection covers slots [0, layer.len - probe_slots)
  // and 1 <= n_keep <= layer.len - probe_slots. value_norms, when given, cover those slots.
  int64_t probe_slots = 0;

  // The entries that may be kept: the layer without the probe.
  LayerKv Candidates() const { return LayerKv{layer.kv, layer.pages, layer.len - probe_slots}; }
  // The same request over the candidates alone (what per-entry side data, such as value
  // norms, is computed for).
  SelectionRequest WithoutProbe() const {
    SelectionRequest r = *this;
    r.layer = Candidates();
    r.probe_slots = 0;
    return r;
  }
};

struct Selection {
  int64_t n_keep = 0;
  std::vector<int32_t> slots;  // [n_kv_heads, n_keep]: kept slots of each head, ascending
  std::vector<float> log_w;    // [n_kv_heads, n_keep]: their log-weights after selection
};

class KvPolicy {
 public:
  virtual ~KvPolicy() = default;
  virtual std::string_view Name() const = 0;
  virtual Selection Select(const SelectionRequest& request, Backend& backend) const = 0;
  // True when Select reads SelectionRequest::value_norms (it computes them if absent).
  virtual bool UsesValueNorms() const { return false; }
  // True when Select reads SelectionRequest::window (so a question probe can steer it).
  virtual bool ScoresWithQueries() const { return false; }
};

// A base score per entry (higher = more worth keeping) that selection policies build on.
class KvScorer {
 public:
  virtual ~KvScorer() = default;
  // scores [n_kv_heads, layer.len].
  virtual void Score(const SelectionRequest& request, Backend& backend, std::vector<float>* scores) const = 0;
  // True when Score reads SelectionRequest::window.
  virtual bool UsesQueries() const { return true; }
};

}  // namespace kvserve
