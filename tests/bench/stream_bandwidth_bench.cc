// Streaming read bandwidth of this machine: the roofline a memory-bound decode step is
// measured against (docs/PERF.md). Each OpenMP thread sums its share of a buffer with AVX2
// loads, as the decode kernels stream weights and KV; a buffer larger than the L3 cache gives
// the DRAM figure, a smaller one the cache's.
// Run: OMP_NUM_THREADS=2 build/tests/bench/kvserve_stream_bandwidth_bench
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

// Arg: buffer size in MiB. Reports bytes_per_second of reads (every byte read once per pass).
void BM_StreamRead(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> buf(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)  // first touch by the threads that read it
  for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023) * 1e-3f;
  float total = 0.0f;
  for (auto _ : state) {
    float sum = 0.0f;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int64_t block = 0; block < n / 64; ++block) {
      const float* p = buf.data() + block * 64;
      __m256 a0 = _mm256_loadu_ps(p), a1 = _mm256_loadu_ps(p + 8), a2 = _mm256_loadu_ps(p + 16),
             a3 = _mm256_loadu_ps(p + 24);
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + 32));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + 40));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 48));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 56));
      const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, s);
      sum += lanes[0];  // one lane is enough to keep every load live
    }
    total += sum;
  }
  benchmark::DoNotOptimize(total);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["threads"] = omp_get_max_threads();
}
BENCHMARK(BM_StreamRead)->ArgName("MiB")->Arg(16)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
