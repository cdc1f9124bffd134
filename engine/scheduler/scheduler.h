// Continuous-batching scheduler: a FIFO waiting queue, admission by page reservation, and
// steps that batch every running sequence's decode token with chunked prefills. Single
// threaded; Engine runs it on its own thread.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/compress/compression_settings.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/sequence_tail.h"
#include "kernels/backend.h"

namespace kvserve {

struct SchedulerConfig {
  int64_t max_batch_tokens = 2048;  // tokens per forward step; also caps running sequences
  int64_t prefill_chunk = 512;      // prompt tokens of one sequence per step
  int64_t max_waiting = 256;        // queued, not yet admitted requests
  int64_t max_context = 0;          // prompt + max_new_tokens limit; 0 = the model's
  CompressionSettings kv_defaults;  // what a request's unset KV settings fall back to
  // While a long prompt prefills beside requests that are decoding, this share of the
  // engine's time goes to steps without its chunk, so they are not held to one token per
  // chunk (a 512-token chunk at 16K tokens of context takes ~3 s on 2 CPU cores); the long
  // prompt's prefill takes 1 / (1 - share) as long. [0, 0.9]. 0 (the default here; `serve`
  // uses 0.1) keeps steps independent of timing: with a share, which step carries which
  // chunk depends on the clock, and with it, under --max-batch-tokens, where chunk-mode
  // compression cuts a prompt.
  double decode_share = 0;
  // Prompts with more than one chunk left that prefill in the same step; the others wait
  // (admitted, pages reserved) in admission order. Several long prompts advancing together
  // share every step, so all of them answer at the end, when the last would have; one at a
  // time, the oldest answers first and the last about as late (the same chunks run, in
  // another order). Prompts that finish within the step's chunk always go in. 0: no limit (every
  // admitted prompt advances each step; the default here, `serve` uses 1).
  int64_t max_long_prefills = 0;
  // Seconds on a monotonic clock, for decode_share; empty = std::chrono::steady_clock.
  // Tests give a fake one.
  std::function<double()> clock;
};

absl::Status ValidateSchedulerConfig(const SchedulerConfig& config);

// A request Scheduler::Prepare has checked and sized, ready to join the queue.
struct PreparedRequest {
  EngineRequest request;
  std::unique_ptr<SequenceCompressor> compressor;  // null: the full cache is kept
  int64_t peak_pages = 0;                          // what admission reserves
};

// A sink call the caller makes after the step (so sinks never run under a caller's lock).
struct SinkDelivery {
  std::shared_ptr<const RequestSink> sink;
  StreamEvent event;
};

class Scheduler {
 public:
  // config must pass ValidateSchedulerConfig. model, tokenizer, backend and pool outlive it.
  Scheduler(const Model& model, const Tokenizer& tokenizer, Backend& backend, PagePool& pool,
            const SchedulerConfig& config);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Validates and queues a request; admits it at once when nothing waits ahead of it and
  // its reservation fits. INVALID_ARGUMENT for a bad request, RESOURCE_EXHAUSTED when it
  // can never fit the pool or the waiting queue is full. Prepare, then Enqueue.
  absl::StatusOr<RequestHandle> Submit(EngineRequest request);
  // Submit's request-sized work: resolves and checks the KV settings, sets up compression and
  // sizes the peak reservation; errors as Submit's, except a full queue. Reads only the model,
  // the config and the pool's fixed shape, so any thread may call it while another runs Step
  // (the Engine calls it on the caller's thread, outside its lock).
  absl::StatusOr<PreparedRequest> Prepare(EngineRequest request) const;
  // Submit's queueing under a handle the caller allocated (unique, never 0): admits the
  // request when it fits now, else queues it, or QueueFullError when the queue is full.
  absl::Status Enqueue(RequestHandle handle, PreparedRequest prepared);
  // Whether Enqueue would take a request of peak_pages rather than answer QueueFullError.
  bool HasRoomFor(int64_t peak_pages) const;
  // Cancels a waiting or running request: its pages go back to the pool before this
  // returns and its sink gets a final CANCELLED event. NOT_FOUND once it has finished.
  absl::Status Abort(RequestHandle handle);
  // Cancels everything (shutdown).
  void AbortAll();

  // Admits what fits, then runs one forward step over the running sequences. A no-op when
  // idle. An error fails the sequences of that step (their sinks are told) and is returned.
  absl::Status Step();
  // Sink calls queued by Submit/Abort/Step, in order; the caller makes them.
  std::vector<SinkDelivery> TakeDeliveries();
  // Step() then make the sink calls; for single-threaded users.
  absl::Status StepAndDeliver();

  // What the last Step() ran, for step-time metrics.
  struct StepShape {
    int64_t sequences = 0;       // in the batch
    int64_t prefill_tokens = 0;  // prompt tokens among its tokens (0: a decode-only step)
  };
  const StepShape& last_step() const { return last_step_; }

  bool idle() const { return waiting_.empty() && running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const PagePool& pool() const { return pool_; }
  // Checks the pool against the pages the running sequences own.
  absl::Status CheckInvariants() const;

 private:
  struct Sequence;

  absl::Status Validate(const EngineRequest& r, int64_t peak_pages) const;
  // Compacts what the step made due for s; false (s failed) on error.
  bool Compress(Sequence& s, bool prompt_done);
  void FillUsage(const Sequence& s, StreamEvent* e) const;
  void Admit();
  // Hands a step's last row to s's tail and queues its events; true when s finished.
  bool Advance(Sequence& s, absl::Span<const float> logits);
  void Fail(Sequence& s, const absl::Status& status);

  const Model& model_;
  const Tokenizer& tokenizer_;
  Backend& backend_;
  PagePool& pool_;
  SchedulerConfig config_;
  // decode_share's account: seconds of chunk-free steps owed to the decoding requests.
  double decode_credit_s_ = 0;
  StepShape last_step_;
  LlamaForward forward_;
  RequestHandle next_handle_ = 1;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::vector<SinkDelivery> deliveries_;
  std::vector<float> logits_;
};

}  // namespace kvserve
