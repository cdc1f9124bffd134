// Converts a Hugging Face BPE tokenizer.json into a TokenizerSpec. Only BPE models exist in
// the Llama family (byte-level for Llama 3 / Qwen2 / SmolLM2, SentencePiece-style with
// byte_fallback for Llama 2 / Mistral); Unigram and WordPiece are rejected.
#include "engine/tokenizer/hf_tokenizer_json.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

using nlohmann::json;

absl::StatusOr<json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid JSON object"));
  }
  return j;
}

// Pre-tokenizers, normalizers and decoders nest as {"type": "Sequence", ...}; flatten them.
void Flatten(const json& node, std::vector<const json*>* out) {
  if (!node.is_object()) return;
  for (const char* key : {"pretokenizers", "normalizers", "decoders", "processors"}) {
    if (node.contains(key) && node[key].is_array()) {
      for (const json& child : node[key]) Flatten(child, out);
      return;
    }
  }
  out->push_back(&node);
}

std::string TypeOf(const json& n) {
  return n.contains("type") && n["type"].is_string() ? n["type"].get<std::string>() : "";
}

bool BoolField(const json& n, const char* key, bool def) {
  return n.contains(key) && n[key].is_boolean() ? n[key].get<bool>() : def;
}

// Token text of a special-token entry in tokenizer_config.json: "text" or {"content": "text"}.
std::string SpecialText(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

// The llama.cpp pre-tokenizer name whose regex matches this tokenizer's split rules.
std::string GuessPre(const std::vector<const json*>& pre) {
  bool byte_level_regex = false, individual_digits = false;
  std::string split_regex;
  for (const json* n : pre) {
    std::string type = TypeOf(*n);
    if (type == "ByteLevel") byte_level_regex |= BoolField(*n, "use_regex", true);
    if (type == "Digits") individual_digits |= BoolField(*n, "individual_digits", false);
    if (type == "Split" && n->contains("pattern") && (*n)["pattern"].is_object() &&
        (*n)["pattern"].contains("Regex") && (*n)["pattern"]["Regex"].is_string()) {
      split_regex += (*n)["pattern"]["Regex"].get<std::string>();
    }
  }
  if (!split_regex.empty()) {
    // Llama 3 groups digits in threes; Qwen2 splits every digit; both share the letter rule.
    if (absl::StrContains(split_regex, "\\p{N}{1,3}")) return "llama-bpe";
    if (absl::StrContains(split_regex, "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+")) return "qwen2";
    return "gpt2";
  }
  if (individual_digits && byte_level_regex) return "smollm";  // SmolLM: Digits + ByteLevel
  return "gpt2";
}

bool IsByteToken(const std::string& t) {
  // SentencePiece byte-fallback pieces: <0x00> .. <0xFF>.
  return t.size() == 6 && absl::StartsWith(t, "<0x") && t[5] == '>';
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfJson(const std::string& tokenizer_json_path,
                                                      const std::string& tokenizer_config_json_path_or_empty) {
  absl::StatusOr<json> tj = ReadJson(tokenizer_json_path);
  if (!tj.ok()) return tj.status();
  const json& root = *tj;
  auto err = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(tokenizer_json_path, ": ", what));
  };
  if (!root.contains("model") || !root["model"].is_object()) return err("no 'model' object");
  const json& model = root["model"];
  std::string model_type = TypeOf(model);
  // Older files omit model.type for BPE; a vocab + merges pair is BPE all the same.
  if (model_type.empty() && model.contains("merges")) model_type = "BPE";
  if (model_type != "BPE") {
    return err(absl::StrCat("unsupported tokenizer model type '", model_type, "' (only BPE)"));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) return err("model.vocab is not an object");

  TokenizerSpec spec;
  std::unordered_map<std::string, int32_t> ids;
  std::unordered_map<int32_t, std::string> by_id;
  int32_t max_id = -1;
  auto add = [&](const std::string& text, int64_t id) -> absl::Status {
    if (id < 0 || id > (int64_t{1} << 24)) {
      return err(absl::StrCat("token '", text, "' has out-of-range id ", id));
    }
    ids[text] = static_cast<int32_t>(id);
    by_id[static_cast<int32_t>(id)] = text;
    max_id = std::max(max_id, static_cast<int32_t>(id));
    return absl::OkStatus();
  };
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) {
      return err(absl::StrCat("vocab entry '", it.key(), "' has a non-integer id ", it.value().dump()));
    }
    if (absl::Status s = add(it.key(), it.value().get<int64_t>()); !s.ok()) return s;
  }
  std::unordered_map<int32_t, TokenType> added_types;
  auto add_special = [&](const json& entry) -> absl::Status {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() ||
        !entry.contains("id") || !entry["id"].is_number_integer()) {
      return err(absl::StrCat("bad added token ", entry.dump()));
    }
    int64_t id = entry["id"].get<int64_t>();
    if (absl::Status s = add(entry["content"].get<std::string>(), id); !s.ok()) return s;
    added_types[static_cast<int32_t>(id)] =
        BoolField(entry, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
    return absl::OkStatus();
  };
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& a : root["added_tokens"]) {
      if (absl::Status s = add_special(a); !s.ok()) return s;
    }
  }
  if (max_id < 0) return err("empty vocabulary");

  // Merges: "a b" strings (tokenizers < 0.20) or ["a", "b"] pairs (newer).
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        spec.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec.merges.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
      } else {
        return err(absl::StrCat("bad merge entry ", m.dump()));
      }
    }
  }

  std::vector<const json*> pre, dec, norm;
  if (root.contains("pre_tokenizer")) Flatten(root["pre_tokenizer"], &pre);
  if (root.contains("decoder")) Flatten(root["decoder"], &dec);
  if (root.contains("normalizer")) Flatten(root["normalizer"], &norm);
  bool byte_level = false, metaspace = false;
  for (const std::vector<const json*>* list : {&pre, &dec}) {
    for (const json* n : *list) {
      std::string type = TypeOf(*n);
      if (type == "ByteLevel") {
        byte_level = true;
        spec.add_space_prefix |= list == &pre && BoolField(*n, "add_prefix_space", false);
      }
      if (type == "Metaspace") {
        metaspace = true;
        if (list == &pre) {
          std::string scheme = n->contains("prepend_scheme") && (*n)["prepend_scheme"].is_string()
                                   ? (*n)["prepend_scheme"].get<std::string>()
                                   : "";
          spec.add_space_prefix |= scheme == "always" || scheme == "first" ||
                                   BoolField(*n, "add_prefix_space", false);
        }
      }
    }
  }
  for (const json* n : norm) {
    // Llama 2 style: normalizer prepends "▁" instead of a Metaspace pre-tokenizer.
    if (TypeOf(*n) == "Prepend") spec.add_space_prefix = true;
  }
  bool byte_fallback = BoolField(model, "byte_fallback", false);
  if (byte_level) {
    spec.model = "gpt2";
    spec.pre = GuessPre(pre);
  } else if (metaspace || byte_fallback || !norm.empty()) {
    spec.model = "llama";
    spec.pre = "default";
  } else {
    return err("cannot tell byte-level BPE (ByteLevel) from SentencePiece BPE (Metaspace / "
               "byte_fallback): neither is present");
  }

  spec.tokens.resize(static_cast<size_t>(max_id) + 1);
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    auto it = by_id.find(static_cast<int32_t>(i));
    if (it == by_id.end()) {
      // Ids that nothing names still need a distinct text so the vocab stays one-to-one.
      spec.tokens[i] = absl::StrCat("<unused_", i, ">");
      spec.types[i] = TokenType::kUnused;
      continue;
    }
    spec.tokens[i] = it->second;
    if (spec.model == "llama" && IsByteToken(it->second)) spec.types[i] = TokenType::kByte;
  }
  for (const auto& [id, type] : added_types) spec.types[id] = type;

  if (spec.model == "llama") {
    // SentencePiece merges the pair whose result scores highest; the merge rank gives the
    // same order. Tokens no merge produces rank below every merge.
    const float n_merges = static_cast<float>(spec.merges.size());
    spec.scores.resize(spec.tokens.size());
    for (size_t i = 0; i < spec.tokens.size(); ++i) spec.scores[i] = -(n_merges + static_cast<float>(i));
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      std::string joined = spec.merges[r];
      size_t sp = joined.find(' ');
      if (sp != std::string::npos) joined.erase(sp, 1);
      auto it = ids.find(joined);
      if (it != ids.end() && spec.scores[it->second] < -static_cast<float>(r)) {
        spec.scores[it->second] = -static_cast<float>(r);
      }
    }
  }

  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = ids.find(model["unk_token"].get<std::string>());
    if (it != ids.end()) spec.unk_id = it->second;
  }

  auto lookup = [&](const std::string& text, const char* what) -> absl::StatusOr<int32_t> {
    if (text.empty()) return -1;
    auto it = ids.find(text);
    if (it == ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat(tokenizer_config_json_path_or_empty, ": ", what,
                                                     " '", text, "' is not in the vocabulary"));
    }
    return it->second;
  };

  bool add_bos_known = false;
  std::filesystem::path template_dir = std::filesystem::path(tokenizer_json_path).parent_path();
  if (!tokenizer_config_json_path_or_empty.empty()) {
    absl::StatusOr<json> cj = ReadJson(tokenizer_config_json_path_or_empty);
    if (!cj.ok()) return cj.status();
    const json& cfg = *cj;
    template_dir = std::filesystem::path(tokenizer_config_json_path_or_empty).parent_path();
    if (cfg.contains("added_tokens_decoder") && cfg["added_tokens_decoder"].is_object()) {
      for (auto it = cfg["added_tokens_decoder"].begin(); it != cfg["added_tokens_decoder"].end(); ++it) {
        int64_t id = 0;
        try {
          id = std::stoll(it.key());
        } catch (...) {
          return absl::InvalidArgumentError(absl::StrCat(tokenizer_config_json_path_or_empty,
                                                         ": added_tokens_decoder key '", it.key(),
                                                         "' is not an id"));
        }
        if (id >= 0 && id < static_cast<int64_t>(spec.types.size()) && BoolField(it.value(), "special", false)) {
          spec.types[id] = TokenType::kControl;
        }
      }
    }
    struct Field {
      const char* key;
      int32_t* dst;
    };
    for (Field f : {Field{"bos_token", &spec.bos_id}, Field{"eos_token", &spec.eos_id},
                    Field{"unk_token", &spec.unk_id}, Field{"pad_token", &spec.pad_id}}) {
      std::string text = SpecialText(cfg, f.key);
      if (text.empty()) continue;
      absl::StatusOr<int32_t> id = lookup(text, f.key);
      if (!id.ok()) return id.status();
      *f.dst = *id;
    }
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
      spec.add_bos = cfg["add_bos_token"].get<bool>();
      add_bos_known = true;
    }
    if (cfg.contains("chat_template")) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) {
        spec.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {  // named templates: take "default"
        for (const json& t : ct) {
          if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
              t["template"].is_string()) {
            spec.chat_template = t["template"].get<std::string>();
          }
        }
      }
    }
  } else {
    // No tokenizer_config.json: fall back to the conventional special-token texts.
    for (const char* t : {"<|begin_of_text|>", "<s>", "<bos>"}) {
      if (spec.bos_id < 0 && ids.count(t)) spec.bos_id = ids[t];
    }
    for (const char* t : {"<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>"}) {
      if (spec.eos_id < 0 && ids.count(t)) spec.eos_id = ids[t];
    }
  }
  if (spec.chat_template.empty()) {
    // transformers >= 4.47 writes the template to its own file.
    std::ifstream in(template_dir / "chat_template.jinja");
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      spec.chat_template = ss.str();
    }
  }
  // Without an explicit add_bos_token, the post-processor template tells whether encode()
  // prepends bos (Llama 3 does it this way).
  if (spec.bos_id >= 0 && !add_bos_known && root.contains("post_processor")) {
    std::vector<const json*> post;
    Flatten(root["post_processor"], &post);
    for (const json* n : post) {
      if (TypeOf(*n) != "TemplateProcessing" || !n->contains("single") || !(*n)["single"].is_array() ||
          (*n)["single"].empty()) {
        continue;
      }
      const json& first = (*n)["single"][0];
      if (first.contains("SpecialToken") && first["SpecialToken"].value("id", "") == spec.tokens[spec.bos_id]) {
        spec.add_bos = true;
      }
    }
  }
  for (const char* t : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                        "<|endoftext|>", "<|end_of_text|>"}) {
    auto it = ids.find(t);
    if (it != ids.end() && it->second != spec.eos_id) spec.eot_ids.push_back(it->second);
  }
  return spec;
}

}  // namespace kvserve
