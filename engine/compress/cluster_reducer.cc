#include "engine/compress/cluster_reducer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/compress/symmetric_eigen.h"

namespace kvserve {
namespace {

// Power iterations for a node's top principal direction; the split only needs its order.
constexpr int kPowerIterations = 8;
// Coordinate-descent sweeps over the representatives; each sweep can only lower the error.
constexpr int kRepresentativeSweeps = 8;

struct Clustering {
  const double* z;  // [n, m] protected coordinates
  const double* w;  // [n]
  int64_t m;
  std::vector<int32_t>* cluster;
};

// The weighted top principal direction of the entries idx (power iteration from the axis of
// largest variance, which is already close for the first levels).
std::vector<double> TopDirection(const Clustering& c, const int32_t* idx, int64_t n) {
  const int64_t m = c.m;
  std::vector<double> mu(static_cast<size_t>(m), 0.0), var(static_cast<size_t>(m), 0.0), dir(static_cast<size_t>(m)),
      u(static_cast<size_t>(m));
  double wsum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* zi = c.z + idx[i] * m;
    wsum += c.w[idx[i]];
    for (int64_t a = 0; a < m; ++a) mu[a] += c.w[idx[i]] * zi[a];
  }
  for (double& x : mu) x /= wsum;
  for (int64_t i = 0; i < n; ++i) {
    const double* zi = c.z + idx[i] * m;
    for (int64_t a = 0; a < m; ++a) var[a] += c.w[idx[i]] * (zi[a] - mu[a]) * (zi[a] - mu[a]);
  }
  std::fill(dir.begin(), dir.end(), 0.0);
  dir[std::max_element(var.begin(), var.end()) - var.begin()] = 1.0;
  for (int it = 0; it < kPowerIterations; ++it) {
    std::fill(u.begin(), u.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double* zi = c.z + idx[i] * m;
      double p = 0;
      for (int64_t a = 0; a < m; ++a) p += (zi[a] - mu[a]) * dir[a];
      for (int64_t a = 0; a < m; ++a) u[a] += c.w[idx[i]] * p * (zi[a] - mu[a]);
    }
    double norm = 0;
    for (double x : u) norm += x * x;
    if (!(norm > 1e-300)) break;  // all entries alike: any direction splits them
    norm = std::sqrt(norm);
    for (int64_t a = 0; a < m; ++a) dir[a] = u[a] / norm;
  }
  return dir;
}

// Splits idx [n] into k clusters of n/k entries (+-1) numbered from first: halves along the
// node's principal direction at the count quantile, recursively (a balanced PCA tree).
void Split(const Clustering& c, int32_t* idx, int64_t n, int64_t k, int32_t first) {
  if (k == 1) {
    for (int64_t i = 0; i < n; ++i) (*c.cluster)[idx[i]] = first;
    return;
  }
  const int64_t k_left = k / 2, n_left = n * k_left / k;
  const std::vector<double> dir = TopDirection(c, idx, n);
  std::vector<double> proj(static_cast<size_t>(n));
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double p = 0;
    for (int64_t a = 0; a < c.m; ++a) p += c.z[idx[i] * c.m + a] * dir[a];
    proj[i] = p;
    order[i] = static_cast<int32_t>(i);
  }
  std::nth_element(order.begin(), order.begin() + n_left, order.end(), [&](int32_t a, int32_t b) {
    return proj[a] < proj[b] || (proj[a] == proj[b] && idx[a] < idx[b]);
  });
  std::vector<int32_t> sorted(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sorted[i] = idx[order[i]];
  std::copy(sorted.begin(), sorted.end(), idx);
  Split(c, idx, n_left, k_left, first);
  Split(c, idx + n_left, n - n_left, k - k_left, first + static_cast<int32_t>(k_left));
}

}  // namespace

ClusterReduction BalancedClusterReduce(const float* x, const double* w, int64_t n, int64_t d, int64_t m, int64_t k) {
  m = std::min(m, d);
  ClusterReduction r;
  double wsum = 0;
  r.mean.assign(static_cast<size_t>(d), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    wsum += w[i];
    for (int64_t a = 0; a < d; ++a) r.mean[a] += w[i] * x[i * d + a];
  }
  for (double& v : r.mean) v /= wsum;
  r.basis.assign(static_cast<size_t>(d * m), 0.0);
  if (m == d) {
    for (int64_t a = 0; a < d; ++a) r.basis[a * m + a] = 1.0;
  } else {
    std::vector<double> cov(static_cast<size_t>(d * d), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t a = 0; a < d; ++a) {
        const double da = w[i] * (x[i * d + a] - r.mean[a]);
        for (int64_t b = a; b < d; ++b) cov[a * d + b] += da * (x[i * d + b] - r.mean[b]);
      }
    }
    for (int64_t a = 0; a < d; ++a) {
      for (int64_t b = 0; b < a; ++b) cov[a * d + b] = cov[b * d + a];
    }
    const SymmetricEigen eig = EigenSymmetric(cov, d);
    for (int64_t a = 0; a < d; ++a) std::copy_n(&eig.vectors[a * d], m, &r.basis[a * m]);
  }
  std::vector<double> z(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t a = 0; a < d; ++a) {
      const double xa = x[i * d + a] - r.mean[a];
      for (int64_t b = 0; b < m; ++b) z[i * m + b] += xa * r.basis[a * m + b];
    }
  }
  r.cluster.assign(static_cast<size_t>(n), 0);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  Split(Clustering{z.data(), w, m, &r.cluster}, idx.data(), n, k, 0);

  // Representatives. err = sum_c (W_c z_rep(c) - S_c), S_c = sum over c of w_j z_j, is the
  // error of the kept weighted mean of z times the total weight. Herding first: heaviest
  // clusters first (they move the mean most), each keeps the member that brings err closest
  // to 0 (ties: the heavier member); then sweeps re-choose cluster by cluster while err drops.
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) members[r.cluster[i]].push_back(static_cast<int32_t>(i));
  r.cluster_weight.assign(static_cast<size_t>(k), 0.0);
  r.representative.assign(static_cast<size_t>(k), -1);
  std::vector<double> sums(static_cast<size_t>(k * m), 0.0), err(static_cast<size_t>(m), 0.0);
  for (int64_t c = 0; c < k; ++c) {
    // Members by descending weight, so "closest" ties resolve to the heavier entry.
    std::stable_sort(members[c].begin(), members[c].end(), [&](int32_t a, int32_t b) { return w[a] > w[b]; });
    for (int32_t i : members[c]) {
      r.cluster_weight[c] += w[i];
      for (int64_t a = 0; a < m; ++a) sums[c * m + a] += w[i] * z[i * m + a];
    }
  }
  std::vector<int64_t> by_weight(static_cast<size_t>(k));
  std::iota(by_weight.begin(), by_weight.end(), 0);
  std::stable_sort(by_weight.begin(), by_weight.end(),
                   [&](int64_t a, int64_t b) { return r.cluster_weight[a] > r.cluster_weight[b]; });
  for (int sweep = 0; sweep <= kRepresentativeSweeps; ++sweep) {
    bool changed = false;
    for (int64_t c : by_weight) {
      const double wc = r.cluster_weight[c];
      int32_t best = r.representative[c];
      double best_e = std::numeric_limits<double>::infinity();
      if (best >= 0) {
        for (int64_t a = 0; a < m; ++a) err[a] -= wc * z[best * m + a] - sums[c * m + a];
        best_e = 0;
        for (int64_t a = 0; a < m; ++a) {
          const double e = err[a] + wc * z[best * m + a] - sums[c * m + a];
          best_e += e * e;
        }
      }
      for (int32_t i : members[c]) {
        double e2 = 0;
        for (int64_t a = 0; a < m; ++a) {
          const double e = err[a] + wc * z[i * m + a] - sums[c * m + a];
          e2 += e * e;
        }
        if (e2 < best_e * (1 - 1e-12)) {
          best_e = e2;
          best = i;
        }
      }
      changed |= best != r.representative[c];
      r.representative[c] = best;
      for (int64_t a = 0; a < m; ++a) err[a] += wc * z[best * m + a] - sums[c * m + a];
    }
    if (!changed) break;
  }
  return r;
}

std::vector<WeightedEntry> ClusterReducer::Reduce(const LayerKv& layer, int64_t head,
                                                  absl::Span<const WeightedEntry> bucket, int64_t k, uint64_t) const {
  std::vector<WeightedEntry> live;
  float max_lw = -std::numeric_limits<float>::infinity();
  for (const WeightedEntry& e : bucket) {
    if (std::isfinite(e.log_w)) {
      live.push_back(e);
      max_lw = std::max(max_lw, e.log_w);
    }
  }
  if (static_cast<int64_t>(live.size()) <= k) return live;
  const int64_t n = static_cast<int64_t>(live.size()), d = layer.kv.head_dim;
  std::vector<float> keys(static_cast<size_t>(n * d));
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    layer.Key(live[i].slot, head, &keys[i * d]);
    w[i] = std::exp(static_cast<double>(live[i].log_w) - max_lw);  // relative: the max is 1
  }
  const ClusterReduction r = BalancedClusterReduce(keys.data(), w.data(), n, d, protected_dims_, k);
  std::vector<WeightedEntry> out;
  for (int64_t c = 0; c < k; ++c) {
    out.push_back({live[r.representative[c]].slot,
                   static_cast<float>(std::log(r.cluster_weight[c]) + static_cast<double>(max_lw))});
  }
  std::sort(out.begin(), out.end(), [](const WeightedEntry& a, const WeightedEntry& b) { return a.slot < b.slot; });
  return out;
}

}  // namespace kvserve
