// `kvctl generate`: one or more prompts through Generate, or one through GenerateStream
// (--stream), printing text as it arrives.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "server/kvctl/kvctl_channel.h"
#include "server/kvctl/kvctl_commands.h"

namespace kvserve::kvctl {

const char kGenerateUsage[] =
    "kvctl generate ((--prompt TEXT | --prompt-file F)... | --token-ids '1 2 3') [--chat [--system TEXT]] [--stream]\n"
    "  [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
    "  [--presence-penalty P] [--frequency-penalty P] [--seed S] [--stop TEXT]... [--stop-token-id ID]...\n"
    "  [--ignore-eos] [--kv-policy POLICY] [--kv-budget B|auto:RISK] [--budget-plan PLAN (or --kv-plan)]\n"
    "  [--compress-at WHEN] [--chunk-scoring MODE] [--question-tokens N] [--chunk-headroom N]\n"
    "  [--evicted-weight drop|merge|merge-near|merge-values|merge-mid (unset: the server's default)]\n"
    "  [--sink-tokens N (the prompt's first N entries always kept)]\n"
    "  [--request-id ID] [--usage (finish reason, usage and timings on stderr)] [--ids (print token ids)]\n";

const std::vector<std::string>& GenerateFlags() {
  static const std::vector<std::string> f = {
      "prompt", "prompt-file", "token-ids", "system", "max-new-tokens", "temperature", "top-k", "top-p", "min-p",
      "repetition-penalty", "presence-penalty", "frequency-penalty", "seed", "stop", "stop-token-id",
      "kv-policy", "kv-budget", "budget-plan|kv-plan", "compress-at", "chunk-scoring", "question-tokens", "chunk-headroom", "evicted-weight",
      "sink-tokens", "request-id"};
  return f;
}

const std::vector<std::string>& GenerateBoolFlags() {
  static const std::vector<std::string> f = {"chat", "stream", "ignore-eos", "usage", "ids"};
  return f;
}

absl::StatusOr<CliArgs> ParseWithConnection(int argc, char** argv, std::vector<std::string> value_flags,
                                            std::vector<std::string> bool_flags, const std::string& usage) {
  value_flags.insert(value_flags.end(), ConnectionFlags().begin(), ConnectionFlags().end());
  bool_flags.insert(bool_flags.end(), ConnectionBoolFlags().begin(), ConnectionBoolFlags().end());
  return CliArgs::Parse(argc, argv, value_flags, bool_flags, usage + kConnectionUsage);
}

namespace {

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& flag, const std::string& s) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(s, absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", std::string(part), "' is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

// Copies a numeric flag into the request only when given, so unset means the server default.
template <typename T, typename Setter>
absl::Status Optional(const CliArgs& a, const char* flag, Setter set) {
  if (!a.Has(flag)) return absl::OkStatus();
  if constexpr (std::is_floating_point_v<T>) {
    absl::StatusOr<double> v = a.GetDouble(flag, 0);
    if (!v.ok()) return v.status();
    set(static_cast<T>(*v));
  } else {
    absl::StatusOr<int64_t> v = a.GetInt(flag, 0);
    if (!v.ok()) return v.status();
    set(static_cast<T>(*v));
  }
  return absl::OkStatus();
}

std::string FinishName(v1::FinishReason r) {
  const std::string& name = v1::FinishReason_Name(r);
  const std::string prefix = "FINISH_REASON_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

void PrintUsage(const v1::Completion& c) {
  const v1::Usage& u = c.usage();
  const v1::Timings& t = c.timings();
  std::fprintf(stderr,
               "finish=%s prompt_tokens=%lld generated_tokens=%lld kv_tokens_kept=%lld peak_kv_bytes=%lld "
               "queue=%.4fs ttft=%.4fs total=%.4fs%s%s\n",
               FinishName(c.finish_reason()).c_str(), static_cast<long long>(u.prompt_tokens()),
               static_cast<long long>(u.generated_tokens()), static_cast<long long>(u.kv_tokens_kept()),
               static_cast<long long>(u.peak_kv_bytes()), t.queue_seconds(), t.time_to_first_token_seconds(),
               t.total_seconds(), c.error().empty() ? "" : " error=", c.error().c_str());
  if (u.has_kv_compressibility()) {
    const v1::KvCompressibility& k = u.kv_compressibility();
    std::fprintf(stderr, "kv: budget=%.1f tokens/layer risk=%.4f trace=%.4f effective_rank=%.2f spectral_tail=%.4f\n",
                 k.budget_tokens(), k.risk(), k.trace(), k.effective_rank(), k.spectral_tail());
  }
}

}  // namespace

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const CliArgs& a) {
  v1::GenerateRequest r;
  r.set_request_id(a.Get("request-id").value_or(""));
  // --prompt-file: a whole file is one prompt (long prompts do not fit in one argv string,
  // which Linux caps at 128 KiB).
  std::vector<std::string> texts = a.GetAll("prompt");
  for (const std::string& path : a.GetAll("prompt-file")) {
    absl::StatusOr<std::string> text = ReadFlagFile("prompt-file", path);
    if (!text.ok()) return text.status();
    texts.push_back(*std::move(text));
    if (texts.back().empty()) return absl::InvalidArgumentError(absl::StrCat("--prompt-file '", path, "' is empty"));
  }
  for (const std::string& text : texts) {
    v1::Prompt* p = r.add_prompts();
    if (a.Flag("chat")) {
      if (auto sys = a.Get("system")) {
        v1::ChatMessage* m = p->add_messages();
        m->set_role("system");
        m->set_content(*sys);
      }
      v1::ChatMessage* m = p->add_messages();
      m->set_role("user");
      m->set_content(text);
    } else {
      p->set_text(text);
    }
  }
  if (auto ids = a.Get("token-ids")) {
    absl::StatusOr<std::vector<int32_t>> parsed = ParseIds("token-ids", *ids);
    if (!parsed.ok()) return parsed.status();
    r.add_prompts()->mutable_token_ids()->Assign(parsed->begin(), parsed->end());
  }
  v1::SamplingParams* s = r.mutable_sampling();
  v1::StoppingCriteria* st = r.mutable_stopping();
  v1::KvCacheParams* kv = r.mutable_kv();
  for (absl::Status status : {
           Optional<float>(a, "temperature", [&](float v) { s->set_temperature(v); }),
           Optional<int32_t>(a, "top-k", [&](int32_t v) { s->set_top_k(v); }),
           Optional<float>(a, "top-p", [&](float v) { s->set_top_p(v); }),
           Optional<float>(a, "min-p", [&](float v) { s->set_min_p(v); }),
           Optional<float>(a, "repetition-penalty", [&](float v) { s->set_repetition_penalty(v); }),
           Optional<float>(a, "presence-penalty", [&](float v) { s->set_presence_penalty(v); }),
           Optional<float>(a, "frequency-penalty", [&](float v) { s->set_frequency_penalty(v); }),
           Optional<uint64_t>(a, "seed", [&](uint64_t v) { s->set_seed(v); }),
           Optional<uint32_t>(a, "max-new-tokens", [&](uint32_t v) { st->set_max_new_tokens(v); }),
       }) {
    if (!status.ok()) return status;
  }
  for (const std::string& stop : a.GetAll("stop")) st->add_stop_sequences(stop);
  for (const std::string& id : a.GetAll("stop-token-id")) {
    absl::StatusOr<std::vector<int32_t>> parsed = ParseIds("stop-token-id", id);
    if (!parsed.ok()) return parsed.status();
    for (int32_t t : *parsed) st->add_stop_token_ids(t);
  }
  st->set_ignore_eos(a.Flag("ignore-eos"));
  kv->set_policy(a.Get("kv-policy").value_or(""));
  kv->set_budget_plan(a.Get("budget-plan").value_or(""));
  kv->set_compress_at(a.Get("compress-at").value_or(""));
  kv->set_chunk_scoring(a.Get("chunk-scoring").value_or(""));
  kv->set_evicted_weight(a.Get("evicted-weight").value_or(""));
  if (absl::Status status = Optional<int64_t>(a, "question-tokens", [&](int64_t v) { kv->set_question_tokens(v); });
      !status.ok()) {
    return status;
  }
  if (absl::Status status = Optional<int64_t>(a, "chunk-headroom", [&](int64_t v) { kv->set_chunk_headroom(v); });
      !status.ok()) {
    return status;
  }
  if (absl::Status status = Optional<int64_t>(a, "sink-tokens", [&](int64_t v) { kv->set_sink_tokens(v); });
      !status.ok()) {
    return status;
  }
  // --kv-budget auto:RISK asks the server to pick the budget; a number fixes it.
  if (auto b = a.Get("kv-budget"); b && b->rfind("auto:", 0) == 0) {
    double risk = 0;
    if (!absl::SimpleAtod(b->substr(5), &risk)) {
      return absl::InvalidArgumentError("--kv-budget '" + *b + "' is not auto:RISK with a number RISK");
    }
    kv->set_budget_auto_risk(risk);
  } else if (absl::Status status = Optional<double>(a, "kv-budget", [&](double v) { kv->set_budget(v); });
             !status.ok()) {
    return status;
  }
  return r;
}

int RunGenerate(int argc, char** argv) {
  absl::StatusOr<CliArgs> args = ParseWithConnection(argc, argv, GenerateFlags(), GenerateBoolFlags(), kGenerateUsage);
  if (!args.ok()) return ReportError(args.status());
  if (args->help()) return 0;
  absl::StatusOr<v1::GenerateRequest> req = BuildGenerateRequest(*args);
  if (!req.ok()) return ReportError(req.status());
  absl::StatusOr<Connection> conn = Connect(*args);
  if (!conn.ok()) return ReportError(conn.status());
  auto stub = v1::Generation::NewStub(conn->channel);
  std::unique_ptr<grpc::ClientContext> ctx = conn->NewContext();
  const bool show_ids = args->Flag("ids");

  if (args->Flag("stream")) {
    std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>> reader = stub->GenerateStream(ctx.get(), *req);
    v1::GenerateStreamResponse msg;
    v1::Completion done;
    while (reader->Read(&msg)) {
      if (msg.has_chunk()) {
        if (show_ids) {
          for (int32_t id : msg.chunk().token_ids()) std::printf("%d ", id);
        } else {
          std::fwrite(msg.chunk().text().data(), 1, msg.chunk().text().size(), stdout);
        }
        std::fflush(stdout);
      } else if (msg.has_complete()) {
        done = msg.complete();
      }
    }
    grpc::Status st = reader->Finish();
    std::fputc('\n', stdout);
    if (!st.ok()) return ReportRpcError(st);
    if (args->Flag("usage")) PrintUsage(done);
    return done.error().empty() ? 0 : 1;
  }

  v1::GenerateResponse resp;
  grpc::Status st = stub->Generate(ctx.get(), *req, &resp);
  if (!st.ok()) return ReportRpcError(st);
  int rc = 0;
  for (const v1::Completion& c : resp.completions()) {
    if (resp.completions_size() > 1) std::printf("[%u] ", c.index() + 1);
    if (show_ids) {
      for (int32_t id : c.token_ids()) std::printf("%d ", id);
    } else {
      std::fwrite(c.text().data(), 1, c.text().size(), stdout);
    }
    std::fputc('\n', stdout);
    if (args->Flag("usage")) PrintUsage(c);
    if (!c.error().empty()) rc = 1;
  }
  return rc;
}

}  // namespace kvserve::kvctl
