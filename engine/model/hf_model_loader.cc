// LoadHfModel: a Hugging Face folder (config.json, model.safetensors or a sharded set named
// by model.safetensors.index.json, tokenizer.json [+ tokenizer_config.json]) -> Model.
// Linear weights stay in the mmapped files as [out, in] = WeightView [rows, cols]; norm
// gains and biases are widened to F32 because the forward pass reads them as float*.
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/hf_config.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors_file.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

namespace fs = std::filesystem;

// Everything the WeightViews point into: the mappings and the widened small tensors.
// deque, so growing it never moves a buffer that a view already points to.
struct HfStorage {
  std::vector<std::shared_ptr<const SafetensorsFile>> files;
  std::deque<std::vector<float>> f32;
};

class TensorSource {
 public:
  TensorSource(std::string dir, HfStorage* storage) : dir_(std::move(dir)), storage_(storage) {}

  absl::Status Open() {
    const fs::path index = fs::path(dir_) / "model.safetensors.index.json";
    const fs::path single = fs::path(dir_) / "model.safetensors";
    std::error_code ec;
    if (fs::exists(index, ec)) return OpenSharded(index.string());
    if (!fs::exists(single, ec)) {
      return absl::NotFoundError(absl::StrCat("'", dir_,
                                              "' has neither model.safetensors nor model.safetensors.index.json"));
    }
    absl::StatusOr<std::shared_ptr<const SafetensorsFile>> f = SafetensorsFile::Open(single.string());
    if (!f.ok()) return f.status();
    storage_->files.push_back(*f);
    for (const SafetensorsTensor& t : (*f)->tensors()) by_name_[t.name] = &t;
    return absl::OkStatus();
  }

  // A linear weight [rows, cols] in its stored dtype.
  absl::StatusOr<WeightView> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    absl::StatusOr<const SafetensorsTensor*> t = Get(name, {rows, cols});
    if (!t.ok()) return t.status();
    return WeightView{(*t)->dtype, rows, cols, (*t)->data};
  }

  // A norm gain or bias [n], widened to F32 and owned by the storage.
  absl::StatusOr<WeightView> Vector(const std::string& name, int64_t n) {
    absl::StatusOr<const SafetensorsTensor*> t = Get(name, {n});
    if (!t.ok()) return t.status();
    storage_->f32.push_back(TensorToF32(**t));
    return WeightView{DType::kF32, 1, n, storage_->f32.back().data()};
  }

  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }

 private:
  absl::Status OpenSharded(const std::string& index_path) {
    std::ifstream in(index_path);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": expected a JSON object with a 'weight_map' object"));
    }
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map['", it.key(),
                                                       "'] is not a file name: ", it.value().dump()));
      }
      const std::string file = it.value().get<std::string>();
      if (fs::path(file).has_parent_path()) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": shard name '", file, "' must be a plain file name"));
      }
      if (!shards.count(file)) {
        absl::StatusOr<std::shared_ptr<const SafetensorsFile>> f =
            SafetensorsFile::Open((fs::path(dir_) / file).string());
        if (!f.ok()) return f.status();
        shards[file] = *f;
        storage_->files.push_back(*f);
      }
      const SafetensorsTensor* t = shards[file]->Find(it.key());
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor '", it.key(),
                                                       "' is mapped to '", file, "' but not in it"));
      }
      by_name_[it.key()] = t;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<const SafetensorsTensor*> Get(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return absl::NotFoundError(absl::StrCat("'", dir_, "' lacks tensor '", name, "'"));
    }
    if (it->second->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape [",
                                                     absl::StrJoin(it->second->shape, ", "),
                                                     "], config.json implies [", absl::StrJoin(shape, ", "), "]"));
    }
    return it->second;
  }

  std::string dir_;
  HfStorage* storage_;
  std::map<std::string, const SafetensorsTensor*> by_name_;
};

absl::Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t l, LayerWeights* w) {
  const std::string p = absl::StrCat("model.layers.", l, ".");
  const int64_t q_out = c.n_heads * c.head_dim, kv_out = c.n_kv_heads * c.head_dim;
  struct M {
    const char* name;
    int64_t rows, cols;
    WeightView* dst;
  };
  for (M m : {M{"self_attn.q_proj.weight", q_out, c.hidden, &w->wq},
              M{"self_attn.k_proj.weight", kv_out, c.hidden, &w->wk},
              M{"self_attn.v_proj.weight", kv_out, c.hidden, &w->wv},
              M{"self_attn.o_proj.weight", c.hidden, q_out, &w->wo},
              M{"mlp.gate_proj.weight", c.ffn_hidden, c.hidden, &w->w_gate},
              M{"mlp.up_proj.weight", c.ffn_hidden, c.hidden, &w->w_up},
              M{"mlp.down_proj.weight", c.hidden, c.ffn_hidden, &w->w_down}}) {
    absl::StatusOr<WeightView> v = src.Matrix(p + m.name, m.rows, m.cols);
    if (!v.ok()) return v.status();
    *m.dst = *v;
  }
  struct V {
    const char* name;
    int64_t n;
    WeightView* dst;
  };
  std::vector<V> vectors = {V{"input_layernorm.weight", c.hidden, &w->attn_norm},
                            V{"post_attention_layernorm.weight", c.hidden, &w->ffn_norm}};
  if (c.qkv_bias) {
    vectors.push_back(V{"self_attn.q_proj.bias", q_out, &w->bq});
    vectors.push_back(V{"self_attn.k_proj.bias", kv_out, &w->bk});
    vectors.push_back(V{"self_attn.v_proj.bias", kv_out, &w->bv});
  }
  for (V v : vectors) {
    absl::StatusOr<WeightView> view = src.Vector(p + v.name, v.n);
    if (!view.ok()) return view.status();
    *v.dst = *view;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Model> LoadHfModel(const std::string& dir) {
  Model model;
  model.source = dir;
  absl::StatusOr<ModelConfig> config = LoadHfConfig((fs::path(dir) / "config.json").string());
  if (!config.ok()) return config.status();
  model.config = *config;
  const ModelConfig& c = model.config;

  auto storage = std::make_shared<HfStorage>();
  TensorSource src(dir, storage.get());
  if (absl::Status s = src.Open(); !s.ok()) return s;

  absl::StatusOr<WeightView> embd = src.Matrix("model.embed_tokens.weight", c.vocab_size, c.hidden);
  if (!embd.ok()) return embd.status();
  model.weights.token_embd = *embd;
  model.weights.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (absl::Status s = LoadLayer(src, c, l, &model.weights.layers[l]); !s.ok()) return s;
  }
  absl::StatusOr<WeightView> norm = src.Vector("model.norm.weight", c.hidden);
  if (!norm.ok()) return norm.status();
  model.weights.output_norm = *norm;
  if (c.tied_embeddings) {
    // Some tied checkpoints still save lm_head.weight; it equals the embedding, so ignore it.
    model.weights.output = model.weights.token_embd;
  } else {
    absl::StatusOr<WeightView> out = src.Matrix("lm_head.weight", c.vocab_size, c.hidden);
    if (!out.ok()) return out.status();
    model.weights.output = *out;
  }

  const fs::path tok = fs::path(dir) / "tokenizer.json";
  const fs::path tok_cfg = fs::path(dir) / "tokenizer_config.json";
  std::error_code ec;
  absl::StatusOr<TokenizerSpec> spec =
      TokenizerSpecFromHfJson(tok.string(), fs::exists(tok_cfg, ec) ? tok_cfg.string() : "");
  if (!spec.ok()) return spec.status();
  model.tokenizer = std::move(*spec);
  TokenizerSpec& t = model.tokenizer;
  const int64_t n_tok = static_cast<int64_t>(t.tokens.size());
  if (n_tok > c.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(tok.string(), " has ", n_tok,
                                                   " tokens but config.json vocab_size is ", c.vocab_size));
  }
  // Embedding tables are often padded past the tokenizer (Qwen2); name the padding rows.
  for (int64_t i = n_tok; i < c.vocab_size; ++i) {
    t.tokens.push_back(absl::StrCat("<unused_", i, ">"));
    if (!t.types.empty()) t.types.push_back(TokenType::kUnused);
    if (!t.scores.empty()) t.scores.push_back(-1e9f);
  }
  model.storage = std::shared_ptr<const void>(storage, storage.get());
  return model;
}

}  // namespace kvserve
