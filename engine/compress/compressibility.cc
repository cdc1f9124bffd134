#include "engine/compress/compressibility.h"

#include <algorithm>
#include <cmath>

#include "engine/compress/symmetric_eigen.h"

namespace kvserve {

double CompressibilityEstimate::RiskAt(int64_t k) const {
  if (layers.empty()) return 0;
  double sum = 0;
  for (const LayerCompressibility& l : layers) {
    sum += l.effective_rank > 0 ? l.trace * std::pow(static_cast<double>(std::max<int64_t>(1, k)),
                                                     -2.0 / l.effective_rank)
                                : 0.0;
  }
  return sum / static_cast<double>(layers.size());
}

CompressibilityEstimator::CompressibilityEstimator(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), count_(n_layers, 0),
      sum_(n_layers, std::vector<double>(static_cast<size_t>(n_kv_heads * head_dim), 0.0)),
      m2_(n_layers, std::vector<double>(static_cast<size_t>(n_kv_heads * head_dim * head_dim), 0.0)) {}

void CompressibilityEstimator::AddEntries(const LayerKv& layer, int64_t l, int64_t first, int64_t n,
                                          Backend& backend) {
  if (n <= 0) return;
  const int64_t d = head_dim_;
  std::vector<float> kt(static_cast<size_t>(d * n)), gram(static_cast<size_t>(d * d));
  for (int64_t g = 0; g < n_kv_heads_; ++g) {
    double* sum = sum_[l].data() + g * d;
    for (int64_t i = 0; i < n; ++i) {
      const float* k = layer.Key(first + i, g);
      for (int64_t a = 0; a < d; ++a) {
        kt[a * n + i] = k[a];
        sum[a] += k[a];
      }
    }
    // gram [d, d] = K^T K, as MatMul's x * w^T with x = w = K^T [d, n].
    backend.MatMul(WeightView{DType::kF32, d, n, kt.data()}, kt.data(), gram.data(), d);
    double* m2 = m2_[l].data() + g * d * d;
    for (int64_t a = 0; a < d * d; ++a) m2[a] += gram[a];
  }
  count_[l] += n;
}

std::vector<double> ResponseSpectrum(const std::vector<double>& cov, const float* q, int64_t rows, int64_t d,
                                     float scale) {
  // C^1/2 from C's eigen-decomposition (C is PSD; tiny negative eigenvalues are rounding).
  const SymmetricEigen ce = EigenSymmetric(cov, d);
  std::vector<double> root(static_cast<size_t>(d * d), 0.0), g(static_cast<size_t>(d * d), 0.0),
      tmp(static_cast<size_t>(d * d), 0.0), a(static_cast<size_t>(d * d), 0.0);
  for (int64_t i = 0; i < d; ++i) {
    const double s = std::sqrt(std::max(0.0, ce.values[i]));
    for (int64_t r = 0; r < d; ++r) {
      for (int64_t c = 0; c < d; ++c) root[r * d + c] += ce.vectors[r * d + i] * s * ce.vectors[c * d + i];
    }
  }
  const double s2 = static_cast<double>(scale) * scale;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t r = 0; r < d; ++r) {
      const double qr = q[i * d + r] * s2;
      for (int64_t c = 0; c < d; ++c) g[r * d + c] += qr * q[i * d + c];
    }
  }
  for (int64_t r = 0; r < d; ++r) {  // tmp = root * g
    for (int64_t t = 0; t < d; ++t) {
      const double x = root[r * d + t];
      for (int64_t c = 0; c < d; ++c) tmp[r * d + c] += x * g[t * d + c];
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

CompressibilityEstimate CompressibilityEstimator::Estimate(const QueryWindow& window, int64_t n_heads,
                                                           float scale) const {
  CompressibilityEstimate est;
  const int64_t d = head_dim_, n_layers = static_cast<int64_t>(count_.size()), group = n_heads / n_kv_heads_;
  std::vector<float> rows, q;
  for (int64_t l = 0; l < n_layers; ++l) {
    LayerCompressibility layer;
    const int64_t n = count_[l], w = window.size(l);
    if (n >= 2 && w >= 1) {
      window.CopyOrdered(l, &rows);
      for (int64_t g = 0; g < n_kv_heads_; ++g) {
        std::vector<double> cov(static_cast<size_t>(d * d));
        const double* sum = sum_[l].data() + g * d;
        const double* m2 = m2_[l].data() + g * d * d;
        for (int64_t a = 0; a < d; ++a) {
          for (int64_t b = 0; b < d; ++b) {
            cov[a * d + b] = m2[a * d + b] / static_cast<double>(n) - sum[a] * sum[b] / (static_cast<double>(n) * n);
          }
        }
        // The group's window queries as one [group * w, d] block: the response profile of an
        // entry is its logit under every query head of its KV head, every window query.
        q.resize(static_cast<size_t>(group * w * d));
        for (int64_t hh = 0; hh < group; ++hh) {
          for (int64_t i = 0; i < w; ++i) {
            std::copy_n(rows.data() + (i * n_heads + g * group + hh) * d, d, q.data() + (hh * w + i) * d);
          }
        }
        const LayerCompressibility s = SummarizeSpectrum(ResponseSpectrum(cov, q.data(), group * w, d, scale),
                                                         group * w);
        layer.trace += s.trace / static_cast<double>(n_kv_heads_);
        layer.effective_rank += s.effective_rank / static_cast<double>(n_kv_heads_);
        layer.spectral_tail += s.spectral_tail / static_cast<double>(n_kv_heads_);
      }
    }
    est.layers.push_back(layer);
    est.mean.trace += layer.trace / static_cast<double>(n_layers);
    est.mean.effective_rank += layer.effective_rank / static_cast<double>(n_layers);
    est.mean.spectral_tail += layer.spectral_tail / static_cast<double>(n_layers);
  }
  return est;
}

}  // namespace kvserve
