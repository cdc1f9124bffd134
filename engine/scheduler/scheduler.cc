// The continuous-batching step: admission, batch building, and each sequence's tail.
#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/compress/device_form.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/kv/kv_memory.h"

namespace kvserve {

struct Scheduler::Sequence {
  Sequence(RequestHandle h, EngineRequest r, int64_t n_layers, int64_t peak, const Tokenizer& tok)
      : handle(h), request(std::move(r)), kv(n_layers), peak_pages(peak),
        sink(std::make_shared<const RequestSink>(std::move(request.sink))), tail(request, tok) {}

  RequestHandle handle;
  EngineRequest request;
  SequenceKv kv;
  int64_t peak_pages;
  std::shared_ptr<const RequestSink> sink;
  SequenceTail tail;  // sampling, stops and text; its history is prompt + generated
  std::unique_ptr<SequenceCompressor> compressor;  // null: the full cache is kept
  int64_t peak_pages_held = 0;
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now(), admitted = submitted;
  int64_t cached = 0;            // tokens of history already in the KV cache
  std::vector<TokenLogprob> prompt_logprobs;  // scored so far; sent with the first event after the prompt
  bool done = false;

  const std::vector<int32_t>& history() const { return tail.history(); }
  int64_t prompt_len() const { return static_cast<int64_t>(request.prompt.size()); }
  bool prefilling() const { return cached < prompt_len(); }
};

absl::Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  auto bad = [](const char* flag, int64_t v, const char* rule) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be ", rule, ", got ", v));
  };
  if (c.max_batch_tokens < 1) return bad("--max-batch-tokens", c.max_batch_tokens, ">= 1");
  if (c.prefill_chunk < 1) return bad("--prefill-chunk", c.prefill_chunk, ">= 1");
  if (c.max_waiting < 0) return bad("--max-waiting", c.max_waiting, ">= 0");
  if (c.max_long_prefills < 0) return bad("--max-long-prefills", c.max_long_prefills, ">= 0 (0 = no limit)");
  if (c.max_context < 0) return bad("--max-context", c.max_context, ">= 0 (0 = the model's)");
  if (!(c.decode_share >= 0 && c.decode_share <= 0.9)) {
    return absl::InvalidArgumentError(absl::StrCat("--decode-share must be in [0, 0.9], got ", c.decode_share));
  }
  return ValidateCompressionSettings(c.kv_defaults, /*n_layers=*/0);  // the model's layers: at Submit
}

Scheduler::Scheduler(const Model& model, const Tokenizer& tokenizer, Backend& backend, PagePool& pool,
                     const SchedulerConfig& config)
    : model_(model), tokenizer_(tokenizer), backend_(backend), pool_(pool), config_(config),
      forward_(model, backend, pool) {
  if (!config_.clock) {
    config_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
}

Scheduler::~Scheduler() { AbortAll(); }

absl::Status Scheduler::Validate(const EngineRequest& r, int64_t peak_pages) const {
  const RequestLimits limits{config_.max_context > 0 ? config_.max_context : model_.config.max_context,
                             pool_.shape().page_size, config_.prefill_chunk};
  if (absl::Status st = ValidateRequest(model_, r, limits); !st.ok()) return st;
  if (peak_pages > pool_.shape().num_pages) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request needs ", peak_pages, " KV pages (", r.prompt.size(), " prompt + ", r.max_new_tokens,
        " new tokens over ", model_.config.n_layers, " layers, page size ", pool_.shape().page_size,
        ") but the pool has only ", pool_.shape().num_pages, " pages"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestHandle> Scheduler::Submit(EngineRequest request) {
  absl::StatusOr<PreparedRequest> prepared = Prepare(std::move(request));
  if (!prepared.ok()) return prepared.status();
  const RequestHandle h = next_handle_++;
  if (absl::Status st = Enqueue(h, *std::move(prepared)); !st.ok()) return st;
  return h;
}

absl::StatusOr<PreparedRequest> Scheduler::Prepare(EngineRequest request) const {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  const CompressionSettings kv = ResolveKvSettings(request.kv, config_.kv_defaults, request.chat_question_tokens);
  if (absl::Status st = ValidateCompressionSettings(kv, model_.config.n_layers); !st.ok()) return st;
  // A pool in device memory compresses only through the device kernels; refuse what has none
  // here, before admission, rather than fail the request after its prefill has run.
  if (!pool_.host_memory()) {
    if (absl::Status st = CheckDeviceForm(kv, backend_.Name()); !st.ok()) return st;
    // Every prompt row's logits would cross to the host each chunk; no GPU check covers it yet.
    if (request.prompt_logprobs) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt_logprobs (gRPC logprobs.prompt_logprobs, OpenAI echo with logprobs) is not supported "
                       "on the ", std::string(backend_.Name()), " backend; run the server with --device cpu"));
    }
  }
  // Admission reserves the peak: the compressed one when a policy evicts, else the full cache.
  PreparedRequest out;
  if (kv.active() && !request.prompt.empty() && request.max_new_tokens > 0) {
    auto made = SequenceCompressor::Create(model_, kv, prompt_len, request.max_new_tokens, pool_.shape().page_size,
                                           config_.prefill_chunk);
    if (!made.ok()) return made.status();
    out.compressor = *std::move(made);
    out.peak_pages = out.compressor->PeakPages();
  } else {
    out.peak_pages =
        PeakPagesForRequest(prompt_len, request.max_new_tokens, pool_.shape().page_size, model_.config.n_layers);
  }
  if (absl::Status st = Validate(request, out.peak_pages); !st.ok()) return st;
  out.request = std::move(request);
  return out;
}

bool Scheduler::HasRoomFor(int64_t peak_pages) const {
  const bool admit_now = waiting_.empty() && peak_pages <= pool_.unpromised_pages() &&
                         num_running() < config_.max_batch_tokens;
  return admit_now || num_waiting() < config_.max_waiting;
}

absl::Status Scheduler::Enqueue(RequestHandle handle, PreparedRequest prepared) {
  if (!HasRoomFor(prepared.peak_pages)) {
    return QueueFullError(absl::StrCat("waiting queue is full (--max-waiting ", config_.max_waiting, "); retry later"));
  }
  waiting_.push_back(std::make_unique<Sequence>(handle, std::move(prepared.request), model_.config.n_layers,
                                                prepared.peak_pages, tokenizer_));
  waiting_.back()->compressor = std::move(prepared.compressor);
  Admit();
  return absl::OkStatus();
}

void Scheduler::Admit() {
  // Strict FIFO: a large request at the head is not overtaken, so it cannot starve.
  while (!waiting_.empty() && num_running() < config_.max_batch_tokens) {
    Sequence& s = *waiting_.front();
    if (!s.kv.Reserve(pool_, s.peak_pages).ok()) break;
    s.admitted = std::chrono::steady_clock::now();
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

absl::Status Scheduler::Abort(RequestHandle handle) {
  auto cancel = [&](Sequence& s) { Fail(s, absl::CancelledError(absl::StrCat("request ", handle, " aborted"))); };
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->handle == handle) {
      cancel(**it);
      waiting_.erase(it);
      return absl::OkStatus();
    }
  }
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->handle == handle) {
      cancel(**it);
      running_.erase(it);
      Admit();  // the freed reservation may let the queue move
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("request ", handle, " is not waiting or running"));
}

void Scheduler::AbortAll() {
  for (auto& s : waiting_) Fail(*s, absl::CancelledError("engine shut down"));
  for (auto& s : running_) Fail(*s, absl::CancelledError("engine shut down"));
  waiting_.clear();
  running_.clear();
}

void Scheduler::Fail(Sequence& s, const absl::Status& status) {
  StreamEvent e;
  e.finished = true;
  e.status = status;
  FillUsage(s, &e);
  deliveries_.push_back({s.sink, std::move(e)});
  s.kv.Release(pool_);
  s.done = true;
}

void Scheduler::FillUsage(const Sequence& s, StreamEvent* e) const {
  for (int64_t len : s.kv.layer_len) e->kv_tokens_kept += len;
  if (s.compressor) e->kv_entries_evicted = s.compressor->stats().evicted_slots;
  if (s.compressor) {
    e->kv_compressibility = s.compressor->compressibility();
    e->kv_mean_quota = s.compressor->mean_quota();
    e->kv_estimated_risk = s.compressor->EstimatedRisk();
    e->kv_compression = s.compressor->stats();
  }
  e->peak_kv_bytes = s.peak_pages_held * PagePool::PageBytes(pool_.shape());
  // A request that never left the queue waited until now.
  const auto admitted = s.kv.reserved_pages > 0 || s.cached > 0 ? s.admitted : std::chrono::steady_clock::now();
  e->queue_seconds = std::chrono::duration<double>(admitted - s.submitted).count();
}

bool Scheduler::Compress(Sequence& s, bool prompt_done) {
  if (!s.compressor) return true;
  if (absl::Status st = s.compressor->AfterStep(backend_, pool_, s.kv, prompt_done); !st.ok()) {
    Fail(s, st);
    return false;
  }
  return true;
}

bool Scheduler::Advance(Sequence& s, absl::Span<const float> logits) {
  std::vector<StreamEvent> events = s.tail.Next(logits);
  if (!s.prompt_logprobs.empty()) events.front().prompt_logprobs = std::exchange(s.prompt_logprobs, {});
  const bool finished = !events.empty() && events.back().finished;
  if (finished) FillUsage(s, &events.back());
  for (StreamEvent& e : events) deliveries_.push_back({s.sink, std::move(e)});
  if (finished) {
    s.kv.Release(pool_);
    s.done = true;
  }
  return finished;
}

absl::Status Scheduler::Step() {
  auto Window = [](Sequence& s) { return s.compressor ? s.compressor->window() : nullptr; };
  Admit();
  last_step_ = {};
  if (running_.empty()) return absl::OkStatus();
  // decode_share: while prompts prefill beside decoding requests, each step with chunks
  // earns the decoders share / (1 - share) of its time in steps without them. Prompts with
  // at most a small remainder (a chat turn) still go in those steps: they cost little.
  const bool decoding = std::any_of(running_.begin(), running_.end(), [](auto& s) { return !s->prefilling(); });
  const bool prefilling = std::any_of(running_.begin(), running_.end(), [](auto& s) { return s->prefilling(); });
  const bool shared = config_.decode_share > 0 && decoding && prefilling;
  if (!shared) decode_credit_s_ = 0;
  const bool chunk_free = shared && decode_credit_s_ > 0;
  const int64_t small_prompt = std::max<int64_t>(1, config_.prefill_chunk / 8);
  const double t0 = config_.clock();

  // Decode tokens first (admission caps running sequences at max_batch_tokens, so they
  // always fit), then prefill chunks in admission order with what is left, at most
  // max_long_prefills of them from prompts that this chunk does not finish.
  std::vector<ForwardRequest> batch;
  std::vector<Sequence*> members;
  int64_t budget = config_.max_batch_tokens;
  std::vector<int64_t> prompt_tokens;  // per member: history tokens its step caches for good
  int64_t long_prefills = 0;
  for (auto& s : running_) {
    if (s->prefilling()) continue;
    batch.push_back({absl::MakeConstSpan(&s->history()[s->cached], 1), s->cached, &s->kv, false, Window(*s)});
    members.push_back(s.get());
    prompt_tokens.push_back(1);
    --budget;
  }
  for (auto& s : running_) {
    if (budget == 0) break;
    if (!s->prefilling()) continue;
    if (chunk_free && s->prompt_len() - s->cached > small_prompt) continue;
    const bool long_prompt = s->prompt_len() - s->cached > config_.prefill_chunk;
    if (long_prompt && config_.max_long_prefills > 0 && long_prefills == config_.max_long_prefills) continue;
    long_prefills += long_prompt;
    const int64_t cap = std::min(config_.prefill_chunk, budget);
    const absl::Span<const int32_t> prompt = absl::MakeConstSpan(s->history()).first(s->prompt_len());
    // A compressor's step may carry a probe of the question after the chunk (chunk mode).
    const SequenceCompressor::PrefillStep chunk =
        SequenceCompressor::NextPrefillOf(s->compressor.get(), prompt, s->cached, cap, s->kv);
    const bool score = s->request.prompt_logprobs.has_value();  // every row's logits, not just the last
    batch.push_back({chunk.tokens, s->cached, &s->kv, score, Window(*s), chunk.probe_tokens, chunk.probe_start_pos});
    members.push_back(s.get());
    prompt_tokens.push_back(chunk.prompt_tokens);
    const int64_t ran = static_cast<int64_t>(chunk.tokens.size());
    last_step_.prefill_tokens += ran;
    budget -= std::min(budget, ran);
  }
  last_step_.sequences = static_cast<int64_t>(members.size());
  logits_.clear();
  const absl::Status st = forward_.Step(batch, &logits_);
  if (!st.ok()) {
    for (Sequence* s : members) Fail(*s, st);
  } else {
    const int64_t vocab = model_.config.vocab_size;
    size_t row = 0;  // the member's first logits row (all_logits: one per token of its step)
    for (size_t i = 0; i < members.size(); ++i) {
      Sequence& s = *members[i];
      const size_t rows = batch[i].all_logits ? batch[i].tokens.size() : 1;
      const absl::Span<const float> step_logits = absl::MakeConstSpan(logits_).subspan(row * vocab, rows * vocab);
      row += rows;
      if (batch[i].all_logits) {  // the chunk's rows predict prompt tokens cached+1 ..; a probe's rows come after
        const int64_t scored = std::min(prompt_tokens[i], s.prompt_len() - 1 - s.cached);
        AppendPromptLogprobs(step_logits, vocab, absl::MakeConstSpan(s.request.prompt).subspan(s.cached + 1, scored),
                             *s.request.prompt_logprobs, &s.prompt_logprobs);
      }
      s.cached += prompt_tokens[i];
      s.peak_pages_held = std::max(s.peak_pages_held, s.kv.pages_held());
      // A prefill chunk that ends inside the prompt has nothing to sample yet.
      if (s.prefilling()) {
        Compress(s, false);
        continue;
      }
      if (!Advance(s, step_logits.last(vocab))) Compress(s, true);
    }
  }
  if (shared) {  // the step's whole time, with sampling and compression
    const double dt = config_.clock() - t0;
    decode_credit_s_ += chunk_free ? -dt : dt * config_.decode_share / (1.0 - config_.decode_share);
  }
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& s) { return s->done; });
  // A scored prompt's steps held every row's logits (a chunk x vocab floats); give that back
  // once no prompt is being scored, rather than keep it for the server's life.
  const bool scoring = std::any_of(running_.begin(), running_.end(),
                                   [](auto& s) { return s->prefilling() && s->request.prompt_logprobs; });
  if (!scoring && logits_.capacity() > 2 * (running_.size() + 1) * static_cast<size_t>(model_.config.vocab_size)) {
    logits_.clear();
    logits_.shrink_to_fit();
  }
  Admit();
  return st;
}

std::vector<SinkDelivery> Scheduler::TakeDeliveries() { return std::exchange(deliveries_, {}); }

absl::Status Scheduler::StepAndDeliver() {
  const absl::Status st = Step();
  for (const SinkDelivery& d : TakeDeliveries()) {
    if (*d.sink) (*d.sink)(d.event);
  }
  return st;
}

absl::Status Scheduler::CheckInvariants() const {
  std::vector<const std::vector<int32_t>*> owners;
  for (const auto& s : running_) {
    for (const auto& pages : s->kv.layer_pages) owners.push_back(&pages);
  }
  return pool_.CheckInvariants(owners);
}

}  // namespace kvserve
