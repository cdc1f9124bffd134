// The interface every KV selection policy implements: given one layer of one sequence and
// its recent queries, say which entries each KV head keeps (and with what log-weight). A
// scoring policy (ScoringPolicy) only scores, through Backend ops; the one orchestration
// (layer_compressor.h) selects and compacts for it, on host and device pools alike.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
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
  // Optional per-entry ||v W_O|| norms [n_kv_heads, norms_stride] of the candidates, in
  // backend memory, that a caller has kept from earlier selections (values never change, so
  // they need computing once per entry). Null: computed when a policy needs them.
  const float* value_norms = nullptr;
  int64_t norms_stride = 0;
  // The layer's last probe_slots slots hold a question probe's entries (its tokens run as if
  // the question came right after the cache): the window's queries attend to them as to any
  // entry, but they are never kept, so a Selection covers slots [0, layer.len - probe_slots)
  // and 1 <= n_keep <= layer.len - probe_slots. value_norms, when given, cover those slots.
  int64_t probe_slots = 0;
  // A chunk-mode compression before the prompt's end (more selections of this layer follow).
  bool mid_prompt = false;
  // Each head keeps the candidates' first min(keep_first, n_keep / 4) slots whatever their
  // scores (SelectSlots): the prompt's first tokens, since every selection of a sequence
  // keeps them and keeps slots in order. The quarter cap, as merge-reduce's sinks, leaves
  // most of a small selection to the scores.
  int64_t keep_first = 0;

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

// Buffers a compressor keeps between calls. On a host-memory backend they are plain heap
// memory, freed without it: a sequence's compressor may outlive the CPU backend it ran on. A
// device backend must outlive them.
void* AllocateKeptBuffer(Backend& backend, int64_t bytes);
void FreeKeptBuffer(Backend& backend, bool host_memory, void* p);

// Grow-only buffers in a backend's memory that a selection borrows: Take hands out the next
// buffer, Rewind makes every buffer free again (the next selection reuses them).
class BackendScratch {
 public:
  explicit BackendScratch(Backend& backend) : backend_(backend), host_memory_(backend.HostMemory()) {}
  ~BackendScratch();
  BackendScratch(const BackendScratch&) = delete;
  BackendScratch& operator=(const BackendScratch&) = delete;

  void Rewind() { next_ = 0; }
  // n elements of T (contents undefined), valid until the Rewind after next.
  template <typename T>
  T* Take(int64_t n) {
    return static_cast<T*>(TakeBytes(static_cast<int64_t>(sizeof(T)) * n));
  }

 private:
  struct Block {
    void* p = nullptr;
    int64_t bytes = 0;
  };
  void* TakeBytes(int64_t bytes);
  Backend& backend_;
  const bool host_memory_;
  std::vector<Block> blocks_;
  size_t next_ = 0;
};

class KvPolicy {
 public:
  virtual ~KvPolicy() = default;
  virtual std::string_view Name() const = 0;
  // The selection, on the host (the layer's pages in host memory): what one-shot callers
  // and tests read. SequenceCompressor never calls it: it compresses through LayerCompressor.
  virtual Selection Select(const SelectionRequest& request, Backend& backend) const = 0;
  // True when the policy reads SelectionRequest::value_norms (it computes them if absent).
  virtual bool UsesValueNorms() const { return false; }
  // True when the policy reads SelectionRequest::window (so a question probe can steer it).
  virtual bool ScoresWithQueries() const { return false; }
  // True when the policy reads K/V on the host (LayerKv::Key / Value): it runs only over a
  // pool in host memory, which CheckDeviceForm (device_form.h) checks once per request.
  virtual bool ReadsHostPages() const { return false; }
};

// A policy that only scores: each KV head keeps its first ForcedFirstSlots(r) candidates and
// the best-scored of the rest, n_keep in all (higher first, ties to the lower slot,
// Backend::TopKPerHead), with their own log-weights. Adding one is a class with Score (and
// its flags) plus its row in KvPolicyTable() (compression_settings.cc).
class ScoringPolicy : public KvPolicy {
 public:
  // scores [n_kv_heads, r.Candidates().len], backend memory. Buffers the policy needs it
  // takes from scratch; float tensors it passes to Backend ops live there or in r. A policy
  // that UsesValueNorms finds r.value_norms set (SelectSlots computes them when absent).
  virtual void Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const = 0;
  // Score, then the top n_keep per head, read back to the host (log-weights carried over).
  Selection Select(const SelectionRequest& r, Backend& backend) const final;
};

// The slots [n_kv_heads, r.n_keep] (backend memory, ascending per head) policy keeps of r's
// candidates, r.keep_first's among them; value norms are computed into scratch when the
// policy uses them and r has none.
int32_t* SelectSlots(const ScoringPolicy& policy, const SelectionRequest& r, Backend& backend,
                     BackendScratch& scratch);

// The sinks a selection keeping n_keep entries per head holds of n_sink asked for: at most a
// quarter of them, so most of a small selection is still chosen (merge-reduce's sinks, and
// the scoring policies' forced first entries).
inline int64_t SinksWithin(int64_t n_sink, int64_t n_keep) { return std::min(n_sink, n_keep / 4); }

// How many leading candidates each head of r keeps whatever their scores.
int64_t ForcedFirstSlots(const SelectionRequest& r);

// out [heads, len - probe] = all [heads, len] without each head's last r.probe_slots
// columns (a question probe's entries, scored but never kept); both backend memory.
void KeepCandidateColumns(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, const float* all,
                          float* out);

}  // namespace kvserve
