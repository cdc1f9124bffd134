#include "engine/compress/compressibility.h"

#include <algorithm>
#include <cmath>

#include "engine/compress/random_sample_reducer.h"
#include "engine/compress/symmetric_eigen.h"

namespace kvserve {

double CompressibilityEstimate::RiskAt(int64_t k) const {
  if (layers.empty()) return 0;
  double sum = 0;
  for (const LayerCompressibility& l : layers) sum += l.RiskAt(k);
  return sum / static_cast<double>(layers.size());
}

CompressibilityEstimator::CompressibilityEstimator(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim,
                                                   uint64_t seed)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), count_(n_layers, 0),
      sum_(n_layers, std::vector<double>(static_cast<size_t>(n_kv_heads * head_dim), 0.0)),
      m2_(n_layers, std::vector<double>(static_cast<size_t>(n_kv_heads * head_dim * head_dim), 0.0)),
      seed_(seed),
      q_rows_(n_layers, 0),
      q_gram_(n_layers, std::vector<double>(static_cast<size_t>(n_kv_heads * head_dim * head_dim), 0.0)) {
  for (int64_t l = 0; l < n_layers; ++l) {
    values_.emplace_back(n_kv_heads, head_dim, kValueSampleSize, MixSeed(seed, static_cast<uint64_t>(l)));
  }
}

namespace {

// gram[d, d] += X^T X for x [n, d] (through the backend's GEMM: MatMul's x * w^T with
// x = w = X^T [d, n]). xt is scratch.
void AddGram(const std::vector<float>& xt, int64_t n, int64_t d, Backend& backend, std::vector<float>& scratch,
             double* gram) {
  scratch.resize(static_cast<size_t>(d * d));
  backend.MatMul(WeightView{DType::kF32, d, n, xt.data()}, xt.data(), scratch.data(), d);
  for (int64_t a = 0; a < d * d; ++a) gram[a] += scratch[a];
}

}  // namespace

void CompressibilityEstimator::AddQueries(const QueryWindow& window, int64_t l, int64_t n, int64_t n_heads,
                                          Backend& backend) {
  n = std::min(n, window.size(l));
  if (n <= 0) return;
  const int64_t d = head_dim_, group = n_heads / n_kv_heads_, rows = group * n;
  std::vector<float> all, qt(static_cast<size_t>(d * rows)), scratch;
  window.CopyOrdered(l, &all);
  const int64_t first = window.size(l) - n;
  for (int64_t g = 0; g < n_kv_heads_; ++g) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t hh = 0; hh < group; ++hh) {
        const float* q = all.data() + ((first + i) * n_heads + g * group + hh) * d;
        for (int64_t a = 0; a < d; ++a) qt[a * rows + i * group + hh] = q[a];
      }
    }
    AddGram(qt, rows, d, backend, scratch, q_gram_[l].data() + g * d * d);
  }
  q_rows_[l] += rows;
}

void CompressibilityEstimator::AddEntries(const LayerKv& layer, int64_t l, int64_t first, int64_t n,
                                          Backend& backend) {
  if (n <= 0) return;
  const int64_t d = head_dim_;
  std::vector<float> kt(static_cast<size_t>(d * n)), scratch, k(static_cast<size_t>(d));
  for (int64_t g = 0; g < n_kv_heads_; ++g) {
    double* sum = sum_[l].data() + g * d;
    for (int64_t i = 0; i < n; ++i) {
      layer.Key(first + i, g, k.data());
      for (int64_t a = 0; a < d; ++a) {
        kt[a * n + i] = k[a];
        sum[a] += k[a];
      }
    }
    AddGram(kt, n, d, backend, scratch, m2_[l].data() + g * d * d);
  }
  std::vector<float> rows(static_cast<size_t>(n_kv_heads_ * d));
  std::vector<const float*> heads(static_cast<size_t>(n_kv_heads_));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < n_kv_heads_; ++g) {
      layer.Value(first + i, g, rows.data() + g * d);
      heads[g] = rows.data() + g * d;
    }
    values_[l].Offer(heads.data());
  }
  count_[l] += n;
}

std::vector<double> ResponseSpectrum(const std::vector<double>& cov, const float* q, int64_t rows, int64_t d,
                                     float scale) {
  std::vector<double> g(static_cast<size_t>(d * d), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t r = 0; r < d; ++r) {
      const double qr = q[i * d + r];
      for (int64_t c = 0; c < d; ++c) g[r * d + c] += qr * q[i * d + c];
    }
  }
  return ResponseSpectrumFromGram(cov, g, d, scale);
}

std::vector<double> ResponseSpectrumFromGram(const std::vector<double>& cov, const std::vector<double>& gram,
                                             int64_t d, float scale) {
  // C^1/2 from C's eigen-decomposition (C is PSD; tiny negative eigenvalues are rounding).
  const SymmetricEigen ce = EigenSymmetric(cov, d);
  std::vector<double> root(static_cast<size_t>(d * d), 0.0), tmp(static_cast<size_t>(d * d), 0.0),
      a(static_cast<size_t>(d * d), 0.0);
  for (int64_t i = 0; i < d; ++i) {
    const double s = std::sqrt(std::max(0.0, ce.values[i]));
    for (int64_t r = 0; r < d; ++r) {
      for (int64_t c = 0; c < d; ++c) root[r * d + c] += ce.vectors[r * d + i] * s * ce.vectors[c * d + i];
    }
  }
  const double s2 = static_cast<double>(scale) * scale;
  for (int64_t r = 0; r < d; ++r) {  // tmp = root * scale^2 gram
    for (int64_t t = 0; t < d; ++t) {
      const double x = root[r * d + t] * s2;
      for (int64_t c = 0; c < d; ++c) tmp[r * d + c] += x * gram[t * d + c];
    }
  }
  for (int64_t r = 0; r < d; ++r) {  // a = tmp * root
    for (int64_t t = 0; t < d; ++t) {
      const double x = tmp[r * d + t];
      for (int64_t c = 0; c < d; ++c) a[r * d + c] += x * root[t * d + c];
    }
  }
  std::vector<double> eig = EigenSymmetric(a, d).values;
  for (double& x : eig) x = std::max(0.0, x);
  return eig;
}

LayerCompressibility SummarizeSpectrum(const std::vector<double>& eig, int64_t rows_per_entry) {
  LayerCompressibility out;
  double sum = 0, sum2 = 0, top = 0;
  for (size_t i = 0; i < eig.size(); ++i) {
    sum += eig[i];
    sum2 += eig[i] * eig[i];
    if (static_cast<int64_t>(i) < kCompressibilityTopDirections) top += eig[i];
  }
  if (!(sum > 0)) return out;
  out.trace = sum / static_cast<double>(std::max<int64_t>(1, rows_per_entry));
  out.effective_rank = sum * sum / sum2;
  out.spectral_tail = std::clamp((sum - top) / sum, 0.0, 1.0);
  return out;
}

CompressibilityEstimate CompressibilityEstimator::Estimate(float scale) const {
  CompressibilityEstimate est;
  const int64_t d = head_dim_, n_layers = static_cast<int64_t>(count_.size());
  for (int64_t l = 0; l < n_layers; ++l) {
    LayerCompressibility layer;
    const int64_t n = count_[l];
    if (n >= 2 && q_rows_[l] > 0) {
      for (int64_t g = 0; g < n_kv_heads_; ++g) {
        std::vector<double> cov(static_cast<size_t>(d * d));
        const double* sum = sum_[l].data() + g * d;
        const double* m2 = m2_[l].data() + g * d * d;
        for (int64_t a = 0; a < d; ++a) {
          for (int64_t b = 0; b < d; ++b) {
            cov[a * d + b] = m2[a * d + b] / static_cast<double>(n) - sum[a] * sum[b] / (static_cast<double>(n) * n);
          }
        }
        // The response profile of an entry is its logit under every query head of its KV
        // head, every sampled query: their Gram matrix is all the spectrum needs.
        const std::vector<double> gram(q_gram_[l].begin() + g * d * d, q_gram_[l].begin() + (g + 1) * d * d);
        const LayerCompressibility s = SummarizeSpectrum(ResponseSpectrumFromGram(cov, gram, d, scale), q_rows_[l]);
        layer.trace += s.trace / static_cast<double>(n_kv_heads_);
        layer.effective_rank += s.effective_rank / static_cast<double>(n_kv_heads_);
        layer.spectral_tail += s.spectral_tail / static_cast<double>(n_kv_heads_);
      }
    }
    const ValueReservoir& sample = values_[l];
    layer.sample = sample.size();
    layer.entries = sample.seen();
    for (int64_t g = 0; g < n_kv_heads_; ++g) {
      const std::vector<double> curve =
          UnexplainedValueShare(sample.head(g), sample.size(), d, MixSeed(seed_, static_cast<uint64_t>(l), 1 + g));
      if (curve.empty()) continue;
      layer.value_unexplained.resize(curve.size(), 0.0);
      for (size_t i = 0; i < curve.size(); ++i) layer.value_unexplained[i] += curve[i] / static_cast<double>(n_kv_heads_);
    }
    est.layers.push_back(layer);
    est.mean.trace += layer.trace / static_cast<double>(n_layers);
    est.mean.effective_rank += layer.effective_rank / static_cast<double>(n_layers);
    est.mean.spectral_tail += layer.spectral_tail / static_cast<double>(n_layers);
  }
  return est;
}

}  // namespace kvserve
