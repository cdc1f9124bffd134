// The Llama-family forward pass: embed -> [rmsnorm, qkv, rope, paged attention, o_proj,
// residual, rmsnorm, SwiGLU mlp, residual] x L -> final norm -> logits.
#include "engine/model/forward.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "absl/strings/str_cat.h"

namespace kvserve {
namespace {

const float* F32(const WeightView& w) { return static_cast<const float*>(w.data); }

int64_t PagesFor(int64_t slots, int64_t page_size) { return (slots + page_size - 1) / page_size; }

}  // namespace

std::vector<float> RopeInverseFrequencies(const ModelConfig& c, const WeightView& freq_factors) {
  const int64_t half = c.rope_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(c.rope_dim));
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLinear) {
    for (float& f : inv) f /= s.factor;
  } else if (s.type == RopeScaling::Type::kLlama3 && !freq_factors.data) {
    // Long wavelengths are slowed by `factor`, short ones kept, the band between blended.
    const float orig = static_cast<float>(s.original_max_positions);
    const float low_wavelen = orig / s.low_freq_factor;
    const float high_wavelen = orig / s.high_freq_factor;
    for (float& f : inv) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else {
        const float smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  if (freq_factors.data) {
    // GGUF files carry the llama3 scaling precomputed as per-pair divisors.
    for (int64_t i = 0; i < half && i < freq_factors.cols; ++i) inv[i] /= F32(freq_factors)[i];
  }
  return inv;
}

LlamaForward::LlamaForward(const Model& model, Backend& backend, PagePool& pool)
    : model_(model), backend_(backend), pool_(pool),
      inv_freq_(RopeInverseFrequencies(model.config, model.weights.rope_freq_factors)),
      x_(backend), xn_(backend), q_(backend), k_(backend), v_(backend), attn_(backend), gate_(backend),
      up_(backend), tmp_(backend), logits_(backend) {}

absl::Status LlamaForward::ReservePages(absl::Span<const ForwardRequest> batch) {
  const int64_t ps = pool_.shape().page_size;
  int64_t needed = 0;
  for (const ForwardRequest& r : batch) {
    for (int64_t l = 0; l < model_.config.n_layers; ++l) {
      const int64_t len = r.kv->layer_len[l] + static_cast<int64_t>(r.tokens.size());
      needed += std::max<int64_t>(0, PagesFor(len, ps) - static_cast<int64_t>(r.kv->layer_pages[l].size()));
    }
  }
  if (needed > pool_.free_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("forward step needs ", needed,
                                                     " more KV pages, ", pool_.free_pages(), " free"));
  }
  for (const ForwardRequest& r : batch) {
    for (int64_t l = 0; l < model_.config.n_layers; ++l) {
      const int64_t len = r.kv->layer_len[l] + static_cast<int64_t>(r.tokens.size());
      // A reserved sequence draws from its reservation, others from unpromised pages.
      if (absl::Status st = r.kv->GrowLayer(pool_, l, len); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaForward::Step(absl::Span<const ForwardRequest> batch, std::vector<float>* logits) {
  const ModelConfig& c = model_.config;
  int64_t n = 0;
  for (const ForwardRequest& r : batch) {
    if (r.tokens.empty()) return absl::InvalidArgumentError("forward request with no tokens");
    for (int32_t t : r.tokens) {
      if (t < 0 || t >= c.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", t, " is outside the vocabulary [0, ", c.vocab_size, ")"));
      }
    }
    n += static_cast<int64_t>(r.tokens.size());
  }
  if (!backend_.HostMemory() && pool_.host_memory()) {
    return absl::FailedPreconditionError(absl::StrCat("the ", std::string(backend_.Name()),
                                                      " backend needs its KV pool in device memory "
                                                      "(construct the PagePool with the backend)"));
  }
  if (absl::Status st = ReservePages(batch); !st.ok()) return st;

  batch_ = batch;
  tokens_.clear();
  positions_.clear();
  q_indptr_.assign(1, 0);
  for (const ForwardRequest& r : batch) {
    const int64_t n_tokens = static_cast<int64_t>(r.tokens.size()), tail_from = n_tokens - r.tail_tokens;
    for (int64_t i = 0; i < n_tokens; ++i) {
      tokens_.push_back(r.tokens[static_cast<size_t>(i)]);
      positions_.push_back(static_cast<int32_t>(i < tail_from ? r.start_pos + i : r.tail_start_pos + (i - tail_from)));
    }
    q_indptr_.push_back(static_cast<int32_t>(tokens_.size()));
  }
  const int64_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
  x_.Resize(n * c.hidden);
  xn_.Resize(n * c.hidden);
  tmp_.Resize(n * c.hidden);
  q_.Resize(n * qd);
  attn_.Resize(n * qd);
  k_.Resize(n * kvd);
  v_.Resize(n * kvd);
  gate_.Resize(n * c.ffn_hidden);
  up_.Resize(n * c.ffn_hidden);

  backend_.Embed(model_.weights.token_embd, tokens_.data(), n, x_.data());
  for (int64_t l = 0; l < c.n_layers; ++l) Layer(l, n);

  // Final norm and the output head, only for the rows that need logits.
  std::vector<int64_t> rows;
  for (size_t s = 0; s < batch.size(); ++s) {
    if (batch[s].all_logits) {
      for (int32_t t = q_indptr_[s]; t < q_indptr_[s + 1]; ++t) rows.push_back(t);
    } else {
      rows.push_back(q_indptr_[s + 1] - 1);
    }
  }
  const int64_t nr = static_cast<int64_t>(rows.size());
  const int64_t row_bytes = c.hidden * static_cast<int64_t>(sizeof(float));
  for (int64_t i = 0; i < nr; ++i) {
    backend_.Copy(xn_.data() + i * c.hidden, x_.data() + rows[i] * c.hidden, row_bytes);
  }
  backend_.RmsNorm(xn_.data(), F32(model_.weights.output_norm), xn_.data(), nr, c.hidden, c.rms_eps);
  const size_t base = logits->size();
  logits->resize(base + static_cast<size_t>(nr * c.vocab_size));
  if (backend_.HostMemory()) {
    backend_.MatMul(model_.weights.output, xn_.data(), logits->data() + base, nr);
  } else {
    logits_.Resize(nr * c.vocab_size);
    backend_.MatMul(model_.weights.output, xn_.data(), logits_.data(), nr);
    backend_.CopyOut(logits->data() + base, logits_.data(), nr * c.vocab_size * static_cast<int64_t>(sizeof(float)));
  }
  return absl::OkStatus();
}

void LlamaForward::Layer(int64_t l, int64_t n) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.weights.layers[l];
  const int64_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;

  backend_.RmsNorm(x_.data(), F32(w.attn_norm), xn_.data(), n, c.hidden, c.rms_eps);
  const WeightView qkv[] = {w.wq, w.wk, w.wv};
  float* const qkv_out[] = {q_.data(), k_.data(), v_.data()};
  backend_.MatMulShared(qkv, qkv_out, 3, xn_.data(), n);
  if (c.qkv_bias) {
    backend_.AddBias(q_.data(), F32(w.bq), n, qd);
    backend_.AddBias(k_.data(), F32(w.bk), n, kvd);
    backend_.AddBias(v_.data(), F32(w.bv), n, kvd);
  }
  backend_.Rope(q_.data(), positions_.data(), n, c.n_heads, c.head_dim, inv_freq_.data(), c.rope_dim, c.rope_neox);
  backend_.Rope(k_.data(), positions_.data(), n, c.n_kv_heads, c.head_dim, inv_freq_.data(), c.rope_dim, c.rope_neox);

  // On a device backend, the rows the windows need come back in one copy (one wait for the
  // stream per layer, not one per sequence of a batch): from the first windowed sequence's
  // first row to the last one's last row.
  int64_t lo = n, hi = 0;
  for (size_t s = 0; s < batch_.size(); ++s) {
    if (batch_[s].window) lo = std::min<int64_t>(lo, q_indptr_[s]), hi = q_indptr_[s + 1];
  }
  if (lo < hi && !backend_.HostMemory()) {
    host_q_.resize(static_cast<size_t>((hi - lo) * qd));
    backend_.CopyOut(host_q_.data(), q_.data() + lo * qd, (hi - lo) * qd * static_cast<int64_t>(sizeof(float)));
  }
  for (size_t s = 0; s < batch_.size(); ++s) {
    if (QueryWindow* w = batch_[s].window) {
      const int64_t first = q_indptr_[s], count = q_indptr_[s + 1] - q_indptr_[s];
      const float* rows = backend_.HostMemory() ? q_.data() + first * qd : host_q_.data() + (first - lo) * qd;
      w->Append(l, rows, count);
    }
  }

  // This layer's page tables: each sequence grows by its new tokens.
  page_indptr_.assign(1, 0);
  page_indices_.clear();
  kv_len_.clear();
  for (const ForwardRequest& r : batch_) {
    const auto& pages = r.kv->layer_pages[l];
    page_indices_.insert(page_indices_.end(), pages.begin(), pages.end());
    page_indptr_.push_back(static_cast<int32_t>(page_indices_.size()));
    r.kv->layer_len[l] += static_cast<int64_t>(r.tokens.size());
    kv_len_.push_back(static_cast<int32_t>(r.kv->layer_len[l]));
  }
  AttentionBatch ab{static_cast<int32_t>(batch_.size()), q_indptr_.data(), page_indptr_.data(),
                    page_indices_.data(), kv_len_.data()};
  const PagedKv kv = pool_.view();
  backend_.WriteKv(kv, ab, k_.data(), v_.data());
  AttentionShape shape{c.n_heads, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  backend_.Attention(kv, ab, shape, q_.data(), attn_.data());

  backend_.MatMul(w.wo, attn_.data(), tmp_.data(), n);
  backend_.Add(x_.data(), tmp_.data(), n * c.hidden);

  backend_.RmsNorm(x_.data(), F32(w.ffn_norm), xn_.data(), n, c.hidden, c.rms_eps);
  const WeightView gate_up[] = {w.w_gate, w.w_up};
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  backend_.MatMulShared(gate_up, gate_up_out, 2, xn_.data(), n);
  backend_.SwiGlu(gate_.data(), up_.data(), gate_.data(), n * c.ffn_hidden);
  backend_.MatMul(w.w_down, gate_.data(), tmp_.data(), n);
  backend_.Add(x_.data(), tmp_.data(), n * c.hidden);
}

absl::StatusOr<std::vector<float>> ComputeAllLogits(const Model& model, Backend& backend,
                                                    absl::Span<const int32_t> tokens, DType kv_dtype) {
  const ModelConfig& c = model.config;
  PagePoolShape shape{0, 16, c.n_kv_heads, c.head_dim, kv_dtype};
  shape.num_pages = PagesFor(static_cast<int64_t>(tokens.size()), shape.page_size) * c.n_layers;
  PagePool pool(shape, &backend);
  SequenceKv seq(c.n_layers);
  LlamaForward fwd(model, backend, pool);
  std::vector<float> logits;
  ForwardRequest req{tokens, 0, &seq, true};
  if (absl::Status st = fwd.Step({&req, 1}, &logits); !st.ok()) return st;
  seq.Release(pool);
  return logits;
}

}  // namespace kvserve
