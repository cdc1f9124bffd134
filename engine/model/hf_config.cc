// Maps config.json fields onto ModelConfig. HF checkpoints rotate with rotate_half, so
// rope_neox is always true here (GGUF llama files are the ones with permuted Q/K rows).
#include "engine/model/hf_config.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

using nlohmann::json;

// A field that is absent or null counts as missing (transformers writes "head_dim": null).
bool Has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

absl::StatusOr<int64_t> GetInt(const json& j, const char* key) {
  if (!Has(j, key)) return absl::InvalidArgumentError(absl::StrCat("config.json lacks '", key, "'"));
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json '", key, "' must be a positive integer, got ", j[key].dump()));
  }
  return j[key].get<int64_t>();
}

absl::StatusOr<float> GetFloat(const json& j, const char* key, float def) {
  if (!Has(j, key)) return def;
  if (!j[key].is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json '", key, "' must be a number, got ", j[key].dump()));
  }
  return j[key].get<float>();
}

absl::StatusOr<std::string> Architecture(const json& j) {
  std::string arch;
  if (Has(j, "architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    arch = j["architectures"][0].get<std::string>();
    if (arch == "LlamaForCausalLM") return std::string("llama");
    if (arch == "Qwen2ForCausalLM") return std::string("qwen2");
    if (arch == "MistralForCausalLM") return std::string("mistral");
  } else if (Has(j, "model_type") && j["model_type"].is_string()) {
    // A bare config (no saved model class) still names its family.
    arch = j["model_type"].get<std::string>();
    if (arch == "llama" || arch == "qwen2" || arch == "mistral") return arch;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported architecture '", arch,
      "' in config.json (supported: LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM)"));
}

absl::Status ParseRopeScaling(const json& rs, RopeScaling* out) {
  std::string type;
  if (Has(rs, "rope_type") && rs["rope_type"].is_string()) {
    type = rs["rope_type"].get<std::string>();
  } else if (Has(rs, "type") && rs["type"].is_string()) {
    type = rs["type"].get<std::string>();
  }
  if (type.empty() || type == "default") return absl::OkStatus();
  absl::StatusOr<float> factor = GetFloat(rs, "factor", 1.0f);
  if (!factor.ok()) return factor.status();
  if (type == "linear") {
    out->type = RopeScaling::Type::kLinear;
    out->factor = *factor;
    return absl::OkStatus();
  }
  if (type == "llama3") {
    out->type = RopeScaling::Type::kLlama3;
    out->factor = *factor;
    absl::StatusOr<float> lo = GetFloat(rs, "low_freq_factor", 1.0f);
    absl::StatusOr<float> hi = GetFloat(rs, "high_freq_factor", 4.0f);
    absl::StatusOr<int64_t> orig = GetInt(rs, "original_max_position_embeddings");
    if (!lo.ok()) return lo.status();
    if (!hi.ok()) return hi.status();
    if (!orig.ok()) return orig.status();
    out->low_freq_factor = *lo;
    out->high_freq_factor = *hi;
    out->original_max_positions = *orig;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported rope scaling type '", type, "' in config.json (supported: linear, llama3)"));
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("config.json is not a valid JSON object");
  }
  ModelConfig c;
  absl::StatusOr<std::string> arch = Architecture(j);
  if (!arch.ok()) return arch.status();
  c.architecture = *arch;

  if (Has(j, "hidden_act") && j["hidden_act"] != "silu") {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported hidden_act ", j["hidden_act"].dump(), " (only silu)"));
  }
  // Llama's optional o_proj / MLP biases have no slot in LayerWeights.
  for (const char* flag : {"attention_bias", "mlp_bias"}) {
    if (Has(j, flag) && j[flag].is_boolean() && j[flag].get<bool>()) {
      return absl::InvalidArgumentError(absl::StrCat("config.json '", flag, "': true is unsupported"));
    }
  }

  struct IntField {
    const char* key;
    int64_t* dst;
  };
  for (IntField f : {IntField{"num_hidden_layers", &c.n_layers}, IntField{"hidden_size", &c.hidden},
                     IntField{"num_attention_heads", &c.n_heads},
                     IntField{"intermediate_size", &c.ffn_hidden}, IntField{"vocab_size", &c.vocab_size},
                     IntField{"max_position_embeddings", &c.max_context}}) {
    absl::StatusOr<int64_t> v = GetInt(j, f.key);
    if (!v.ok()) return v.status();
    *f.dst = *v;
  }
  if (Has(j, "num_key_value_heads")) {
    absl::StatusOr<int64_t> v = GetInt(j, "num_key_value_heads");
    if (!v.ok()) return v.status();
    c.n_kv_heads = *v;
  } else {
    c.n_kv_heads = c.n_heads;  // plain multi-head attention
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_attention_heads ", c.n_heads,
                                                   " is not a multiple of num_key_value_heads ",
                                                   c.n_kv_heads));
  }
  if (Has(j, "head_dim")) {
    absl::StatusOr<int64_t> v = GetInt(j, "head_dim");
    if (!v.ok()) return v.status();
    c.head_dim = *v;
  } else {
    if (c.hidden % c.n_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat("hidden_size ", c.hidden,
                                                     " is not a multiple of num_attention_heads ",
                                                     c.n_heads, " and head_dim is not given"));
    }
    c.head_dim = c.hidden / c.n_heads;
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_dim ", c.head_dim, " must be even for RoPE"));
  }
  c.rope_dim = c.head_dim;
  c.rope_neox = true;

  absl::StatusOr<float> eps = GetFloat(j, "rms_norm_eps", 1e-6f);
  if (!eps.ok()) return eps.status();
  c.rms_eps = *eps;

  // transformers v5 folds rope_theta and the scaling into rope_parameters.
  const json* rope = nullptr;
  if (Has(j, "rope_parameters") && j["rope_parameters"].is_object()) {
    rope = &j["rope_parameters"];
  } else if (Has(j, "rope_scaling") && j["rope_scaling"].is_object()) {
    rope = &j["rope_scaling"];
  }
  float theta_default = 10000.0f;
  if (rope != nullptr) {
    absl::StatusOr<float> t = GetFloat(*rope, "rope_theta", theta_default);
    if (!t.ok()) return t.status();
    theta_default = *t;
    if (absl::Status s = ParseRopeScaling(*rope, &c.rope_scaling); !s.ok()) return s;
  }
  absl::StatusOr<float> theta = GetFloat(j, "rope_theta", theta_default);
  if (!theta.ok()) return theta.status();
  c.rope_theta = *theta;

  c.tied_embeddings = Has(j, "tie_word_embeddings") && j["tie_word_embeddings"].is_boolean() &&
                      j["tie_word_embeddings"].get<bool>();
  c.qkv_bias = c.architecture == "qwen2";

  // The forward pass attends to the full cache; a Mistral sliding window smaller than the
  // trained context would make longer contexts diverge from the reference, so cap there.
  if (c.architecture == "mistral" && Has(j, "sliding_window") &&
      j["sliding_window"].is_number_integer()) {
    int64_t w = j["sliding_window"].get<int64_t>();
    if (w > 0 && w < c.max_context) c.max_context = w;
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<ModelConfig> c = ParseHfConfig(ss.str());
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  }
  return c;
}

}  // namespace kvserve
