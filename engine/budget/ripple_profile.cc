// RippleKV profile files: saving, loading and the check that a profile fits the model.
#include "engine/budget/ripple_profile.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

constexpr const char* kFormat = "kvserve-ripple-profile/1";

// FNV-1a, 64 bit: stable across builds and platforms, which std::hash is not.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void Int(int64_t v) { Bytes(&v, sizeof v); }
  void Str(const std::string& s) { Int(static_cast<int64_t>(s.size())), Bytes(s.data(), s.size()); }
  void Tensor(const WeightView& w) {
    Int(static_cast<int64_t>(w.dtype));
    Int(w.rows);
    Int(w.cols);
  }
};

}  // namespace

std::string ModelFingerprint(const Model& model) {
  const ModelConfig& c = model.config;
  Fnv f;
  f.Str(c.architecture);
  for (int64_t v : {c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_hidden, c.vocab_size}) f.Int(v);
  f.Tensor(model.weights.token_embd);
  f.Tensor(model.weights.output);
  for (const LayerWeights& l : model.weights.layers) {
    for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) f.Tensor(*w);
    if (l.wv.data) f.Bytes(l.wv.data, static_cast<size_t>(std::min<int64_t>(256, RowBytes(l.wv.dtype, l.wv.cols))));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(f.h));
  return hex;
}

absl::Status SaveRippleProfile(const RippleProfile& p, const std::string& path) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["model"] = {{"architecture", p.architecture}, {"n_layers", p.n_layers}, {"n_heads", p.n_heads},
                {"n_kv_heads", p.n_kv_heads}, {"head_dim", p.head_dim}, {"fingerprint", p.fingerprint}};
  j["calibration"] = {{"files", p.calibration_files}, {"samples", p.samples}, {"max_tokens", p.max_tokens},
                      {"scored_tokens", p.scored_tokens}};
  j["parameters"] = {{"perturbation", "gaussian noise, std = perturbation_scale * per-head RMS of the values"},
                     {"perturbation_scale", p.perturbation_scale}, {"seed", p.seed}};
  j["seconds"] = p.seconds;
  j["sensitivity"] = p.sensitivity;
  std::ofstream out(path);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write profile '", path, "'"));
  out << j.dump(2) << "\n";
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("writing profile '", path, "' failed"));
}

absl::StatusOr<RippleProfile> LoadRippleProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("RippleKV profile '", path, "' cannot be read"));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("RippleKV profile '", path, "': ", why));
  };
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object() || j.value("format", "") != kFormat) return bad(absl::StrCat("format is not ", kFormat));
  RippleProfile p;
  try {
    const auto& m = j.at("model");
    p.architecture = m.at("architecture").get<std::string>();
    p.n_layers = m.at("n_layers").get<int64_t>();
    p.n_heads = m.at("n_heads").get<int64_t>();
    p.n_kv_heads = m.at("n_kv_heads").get<int64_t>();
    p.head_dim = m.at("head_dim").get<int64_t>();
    p.fingerprint = m.at("fingerprint").get<std::string>();
    const auto& c = j.at("calibration");
    p.calibration_files = c.at("files").get<std::vector<std::string>>();
    p.samples = c.at("samples").get<int64_t>();
    p.max_tokens = c.at("max_tokens").get<int64_t>();
    p.scored_tokens = c.at("scored_tokens").get<int64_t>();
    p.perturbation_scale = j.at("parameters").at("perturbation_scale").get<double>();
    p.seed = j.at("parameters").at("seed").get<uint64_t>();
    p.seconds = j.value("seconds", 0.0);
    p.sensitivity = j.at("sensitivity").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  if (static_cast<int64_t>(p.sensitivity.size()) != p.n_layers) {
    return bad(absl::StrCat("has ", p.sensitivity.size(), " sensitivities for ", p.n_layers, " layers"));
  }
  for (size_t l = 0; l < p.sensitivity.size(); ++l) {
    if (!std::isfinite(p.sensitivity[l]) || p.sensitivity[l] < 0) {
      return bad(absl::StrCat("sensitivity[", l, "] = ", p.sensitivity[l], " is not a finite value >= 0"));
    }
  }
  return p;
}

absl::Status CheckProfileMatchesModel(const RippleProfile& p, const Model& model) {
  const std::string fp = ModelFingerprint(model);
  if (p.fingerprint == fp && p.n_layers == model.config.n_layers) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the RippleKV profile was made for another model (", p.architecture, ", ", p.n_layers, " layers, fingerprint ",
      p.fingerprint, "); this model is ", model.config.architecture, ", ", model.config.n_layers,
      " layers, fingerprint ", fp, ". Run kvserve profile for it"));
}

absl::StatusOr<std::shared_ptr<const RippleProfile>> LoadRippleProfileFor(const std::string& path,
                                                                          const Model& model) {
  absl::StatusOr<RippleProfile> profile = LoadRippleProfile(path);
  if (!profile.ok()) return profile.status();
  if (absl::Status st = CheckProfileMatchesModel(*profile, model); !st.ok()) return st;
  return std::make_shared<const RippleProfile>(*std::move(profile));
}

}  // namespace kvserve
