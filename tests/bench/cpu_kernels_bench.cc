// Microbenchmarks of the CPU kernels that dominate a forward step: paged attention (decode and
// prefill, f32 and f16 pages, SmolLM2's 9 query / 3 KV heads of 64) and the quantized dots,
// each under every kernel ISA (the last argument: 0 avx2, 1 avx512) this CPU runs.
// End-to-end throughput against llama.cpp is scripts/bench_vs_llama_cpp.py; this isolates the
// kernels behind it (docs/PERF.md).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/kv_rows.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve {
namespace {

constexpr int64_t kPage = 16, kKvHeads = 3, kHeads = 9, kHeadDim = 64;

// The ISA a benchmark's argument `arg` names; false (and the run marked skipped) when this
// CPU cannot run it.
bool UseIsa(benchmark::State& state, int64_t arg, cpu::CpuIsa* isa) {
  *isa = arg ? cpu::CpuIsa::kAvx512 : cpu::CpuIsa::kAvx2;
  if (cpu::CpuSupports(*isa)) return true;
  state.SkipWithError("this CPU cannot run this ISA");
  return false;
}

// One sequence with `keys` cached entries and `rows` new query rows; its pages in scattered
// order (a fragmented pool) or consecutive (as the pool hands out a long prompt's chunks).
struct AttentionCase {
  AttentionCase(int64_t keys, int64_t rows, DType dtype, bool consecutive = false) : n_q(rows) {
    const int64_t pages = (keys + kPage - 1) / kPage;
    k.resize(static_cast<size_t>(pages * kPage * kKvHeads * RowBytes(dtype, kHeadDim)));
    v.resize(k.size());
    log_w.assign(static_cast<size_t>(pages * kPage * kKvHeads), 0.0f);
    kv = {k.data(), v.data(), log_w.data(), kPage, kKvHeads, kHeadDim, dtype};
    const int64_t n_rows = pages * kPage * kKvHeads;
    const auto keys_in = testing::RandomFloats(static_cast<size_t>(n_rows * kHeadDim), 1);
    const auto values_in = testing::RandomFloats(static_cast<size_t>(n_rows * kHeadDim), 3);
    for (int64_t r = 0; r < n_rows; ++r) {
      WriteKvRow(kv, kv.k, r, keys_in.data() + r * kHeadDim);
      WriteKvRow(kv, kv.v, r, values_in.data() + r * kHeadDim);
    }
    for (int64_t p = 0; p < pages; ++p) page_indices.push_back(static_cast<int32_t>(consecutive ? p : (p * 7) % pages));
    q_indptr = {0, static_cast<int32_t>(rows)};
    page_indptr = {0, static_cast<int32_t>(pages)};
    kv_len = {static_cast<int32_t>(keys)};
    q = testing::RandomFloats(static_cast<size_t>(rows * kHeads * kHeadDim), 2);
    out.resize(q.size());
  }
  void Run() {
    const AttentionBatch batch{1, q_indptr.data(), page_indptr.data(), page_indices.data(), kv_len.data()};
    cpu::PagedAttention(kv, batch, {kHeads, 0.125f}, q.data(), out.data());
  }

  int64_t n_q;
  std::vector<uint8_t> k, v;
  std::vector<float> log_w, q, out;
  std::vector<int32_t> q_indptr, page_indptr, page_indices, kv_len;
  PagedKv kv;
};

// Args: cached keys, query rows, 1 for f16 pages, ISA, 1 for consecutive pages.
void BM_PagedAttention(benchmark::State& state) {
  cpu::CpuIsa isa;
  if (!UseIsa(state, state.range(3), &isa)) return;
  cpu::ScopedCpuIsa use(isa);
  AttentionCase c(state.range(0), state.range(1), state.range(2) ? DType::kF16 : DType::kF32, state.range(4) != 0);
  for (auto _ : state) {
    c.Run();
    benchmark::DoNotOptimize(c.out.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(1));  // query rows
}
BENCHMARK(BM_PagedAttention)
    ->ArgNames({"keys", "rows", "f16", "avx512", "consecutive"})
    // 65536 keys (50 MB of f16 K/V): larger than the L3 cache, so read from DRAM as in a
    // long decode step over 30 layers.
    ->ArgsProduct({{640, 8192, 65536}, {1}, {0, 1}, {0, 1}, {0}})
    ->ArgsProduct({{65536}, {1}, {1}, {0, 1}, {1}})
    ->ArgsProduct({{512, 4096}, {512}, {0, 1}, {0, 1}, {0}})
    // A 512-token prefill chunk at the end of an 8K prompt, f16 pages (the default), as laid out
    // by the pool: the step that sets 8K prefill speed.
    ->ArgsProduct({{8192}, {512}, {1}, {0, 1}, {1}})
    ->Unit(benchmark::kMicrosecond);

// --evicted-weight merge in one chunk-mode compression: `len` f16 entries per head (the
// budget `kept` plus the headroom and a chunk evicted) folded into the kept ones. At 32K with a
// 10% budget, kept 3277 of 5837; the step whose cost grows with budget x prompt. near: the
// merge-near radius (the distance to each chosen key checked again); avx512: the ISA of the
// nearest-key kernel.
void BM_MergeEvictedWeights(benchmark::State& state) {
  cpu::CpuIsa isa;
  if (!UseIsa(state, state.range(3), &isa)) return;
  cpu::ScopedCpuIsa use(isa);
  const int64_t kept = state.range(0), len = kept + state.range(1);
  AttentionCase c(len, 1, DType::kF16, /*consecutive=*/true);
  std::mt19937 rng(9);
  const std::vector<int32_t> slots = testing::RandomKeptSlots(len, kKvHeads, kept, rng);
  std::vector<float> out(slots.size());
  for (auto _ : state) {
    cpu::MergeEvictedWeightsTiled(c.kv, c.page_indices.data(), len, slots.data(), kept,
                                  state.range(2) ? 0.5f : INFINITY, false, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * (len - kept) * kKvHeads);  // evicted entries placed
}
BENCHMARK(BM_MergeEvictedWeights)
    ->ArgNames({"kept", "evicted", "near", "avx512"})
    ->ArgsProduct({{800, 3277}, {2560}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// x[0..cols) quantized as the activations of a dot with act_type (Q8_1 or Q8_0) into dst.
void QuantizeActivationRow(DType act_type, const float* x, uint8_t* dst, int64_t cols) {
  if (act_type == DType::kQ8_1) {
    cpu::QuantizeRowQ8_1(x, dst, cols);
  } else {
    cpu::QuantizeRowQ8_0(x, dst, cols);
  }
}

// Args: weight rows (576 columns, SmolLM2's hidden size), ISA; one activation row, as in decode.
// 576 rows fit in L2, 24,576 in L3; 196,608 (70 MB of Q4_1) stream from memory as decode does.
void QuantDot(benchmark::State& state, DType w_type) {
  cpu::CpuIsa isa;
  if (!UseIsa(state, state.range(1), &isa)) return;
  const cpu::CpuKernels& kernels = cpu::KernelsFor(isa);
  const int64_t rows = state.range(0), cols = 576;
  const auto w = testing::RandomQuantRows(w_type, rows, cols, 1);
  const auto x = testing::RandomFloats(static_cast<size_t>(cols), 2);
  const DType act_type = cpu::ActivationTypeFor(w_type);
  std::vector<uint8_t> act(static_cast<size_t>(RowBytes(act_type, cols)));
  QuantizeActivationRow(act_type, x.data(), act.data(), cols);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    kernels.quant_dot_rows(w_type, w.data(), RowBytes(w_type, cols), rows, act.data(), cols, y.data(), 1);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
}
void BM_Q4_1Dot(benchmark::State& state) { QuantDot(state, DType::kQ4_1); }
void BM_Q8_0Dot(benchmark::State& state) { QuantDot(state, DType::kQ8_0); }
BENCHMARK(BM_Q4_1Dot)->ArgNames({"rows", "avx512"})->ArgsProduct({{576, 24576, 196608}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q8_0Dot)->ArgNames({"rows", "avx512"})->ArgsProduct({{576, 24576, 196608}, {0, 1}})->Unit(benchmark::kMicrosecond);

// A step of batched decodes through 1,536 rows of 576 columns (SmolLM2's FFN gate shape) in
// 16-row tasks, as MatMulShared hands them to a thread: the row-major token kernel (the one
// --deterministic uses) against the row-tile kernel (the default from its threshold). Args:
// tokens, kernel (0 row-major, 1 row tile), ISA (0 AVX2, 1 AVX-512; AVX2's tile is Q4_1 only).
void QuantDotTokens(benchmark::State& state, DType w_type) {
  cpu::CpuIsa isa;
  if (!UseIsa(state, state.range(2), &isa)) return;
  const cpu::CpuKernels& kernels = cpu::KernelsFor(isa);
  const int64_t tokens = state.range(0), rows = 1536, cols = 576;
  const auto w = testing::RandomQuantRows(w_type, rows, cols, 1);
  const DType act_type = cpu::ActivationTypeFor(w_type);
  const int64_t act_bytes = RowBytes(act_type, cols);
  std::vector<uint8_t> act(static_cast<size_t>(act_bytes * tokens));
  const auto x = testing::RandomFloats(static_cast<size_t>(cols * tokens), 2);
  for (int64_t t = 0; t < tokens; ++t) QuantizeActivationRow(act_type, x.data() + t * cols, act.data() + t * act_bytes, cols);
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  auto* kernel = state.range(1) ? kernels.quant_dot_tile_tokens : kernels.quant_dot_rows_tokens;
  const int64_t row_bytes = RowBytes(w_type, cols);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; r += 16) {
      kernel(w_type, w.data() + r * row_bytes, row_bytes, 16, act.data(), act_bytes, tokens, cols, y.data() + r,
             rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["MACs/s"] = benchmark::Counter(static_cast<double>(rows * cols * tokens) * state.iterations(),
                                                benchmark::Counter::kIsRate);
}
void BM_Q4_1Tokens(benchmark::State& state) { QuantDotTokens(state, DType::kQ4_1); }
void BM_Q8_0Tokens(benchmark::State& state) { QuantDotTokens(state, DType::kQ8_0); }
BENCHMARK(BM_Q4_1Tokens)
    ->ArgNames({"tokens", "tile", "avx512"})
    ->ArgsProduct({{2, 3, 4, 8, 32, 63}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q8_0Tokens)
    ->ArgNames({"tokens", "tile", "avx512"})
    ->ArgsProduct({{2, 3, 4, 8, 32, 63}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvserve

BENCHMARK_MAIN();
