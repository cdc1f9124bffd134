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

// Sums the buffer's 64-float blocks, each thread its share; with prefetch_bytes > 0 it also asks
// for the bytes that far ahead as non-temporal, as the decode kernels do (kernels/cpu/prefetch.h).
float SumBlocks(const std::vector<float>& buf, int64_t prefetch_bytes) {
  const int64_t n = static_cast<int64_t>(buf.size());
  float sum = 0.0f;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int64_t block = 0; block < n / 64; ++block) {
    const float* p = buf.data() + block * 64;
    if (prefetch_bytes > 0) {
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(prefetch_bytes);
      for (uintptr_t b = 0; b < 256; b += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + b), _MM_HINT_NTA);
    }
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
  return sum;
}

// Args: buffer size in MiB; bytes asked for ahead as NTA (0: plain loads, the hardware
// prefetcher alone). The roofline is the faster of the two: decode's kernels prefetch, so the
// plain figure alone could understate what the machine streams. Reports bytes_per_second of
// reads (every byte read once per pass).
void BM_StreamRead(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> buf(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)  // first touch by the threads that read it
  for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023) * 1e-3f;
  float total = 0.0f;
  for (auto _ : state) total += SumBlocks(buf, state.range(1));
  benchmark::DoNotOptimize(total);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["threads"] = omp_get_max_threads();
}
BENCHMARK(BM_StreamRead)
    ->ArgNames({"MiB", "prefetch"})
    ->ArgsProduct({{16, 256, 1024}, {0, 2048}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
