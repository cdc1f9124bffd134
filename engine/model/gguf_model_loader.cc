// LoadGgufModel: turns a parsed GGUF file into a Model — config from `<arch>.*` metadata,
// tokenizer from `tokenizer.*`, and weight views straight into the mmap (no copies), with
// every tensor's shape checked against the config so a mismatched file fails at load.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_loader.h"

namespace kvserve {
namespace {

// Pass a Status up, or bind a StatusOr's value.
#define KV_RETURN_IF_ERROR(expr)              \
  do {                                        \
    if (absl::Status _s = (expr); !_s.ok()) { \
      return _s;                              \
    }                                         \
  } while (0)
#define KV_CONCAT_INNER(a, b) a##b
#define KV_CONCAT(a, b) KV_CONCAT_INNER(a, b)
#define KV_ASSIGN_OR_RETURN(lhs, expr) KV_ASSIGN_OR_RETURN_IMPL(KV_CONCAT(_so_, __LINE__), lhs, expr)
#define KV_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(*tmp)

// Optional metadata: the default when absent, an error when present but mistyped.
absl::StatusOr<int64_t> IntOr(const GgufFile& f, const std::string& key, int64_t def) {
  return f.Has(key) ? f.GetInt(key) : absl::StatusOr<int64_t>(def);
}
absl::StatusOr<double> FloatOr(const GgufFile& f, const std::string& key, double def) {
  return f.Has(key) ? f.GetFloat(key) : absl::StatusOr<double>(def);
}
absl::StatusOr<bool> BoolOr(const GgufFile& f, const std::string& key, bool def) {
  return f.Has(key) ? f.GetBool(key) : absl::StatusOr<bool>(def);
}

absl::Status Positive(const std::string& key, int64_t v) {
  if (v <= 0) return absl::InvalidArgumentError(absl::StrCat("GGUF metadata '", key, "' = ", v, " must be > 0"));
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ReadConfig(const GgufFile& f) {
  ModelConfig c;
  KV_ASSIGN_OR_RETURN(c.architecture, f.GetString("general.architecture"));
  const std::string& a = c.architecture;
  if (a != "llama" && a != "qwen2" && a != "mistral") {
    return absl::UnimplementedError(absl::StrCat("unsupported GGUF architecture '", a,
                                                 "'; kvserve runs llama, qwen2 and mistral"));
  }
  const std::string p = a + ".";
  KV_ASSIGN_OR_RETURN(c.n_layers, f.GetInt(p + "block_count"));
  KV_ASSIGN_OR_RETURN(c.hidden, f.GetInt(p + "embedding_length"));
  KV_ASSIGN_OR_RETURN(c.ffn_hidden, f.GetInt(p + "feed_forward_length"));
  KV_ASSIGN_OR_RETURN(c.n_heads, f.GetInt(p + "attention.head_count"));
  KV_RETURN_IF_ERROR(Positive(p + "block_count", c.n_layers));
  KV_RETURN_IF_ERROR(Positive(p + "embedding_length", c.hidden));
  KV_RETURN_IF_ERROR(Positive(p + "feed_forward_length", c.ffn_hidden));
  KV_RETURN_IF_ERROR(Positive(p + "attention.head_count", c.n_heads));
  KV_ASSIGN_OR_RETURN(c.n_kv_heads, IntOr(f, p + "attention.head_count_kv", c.n_heads));
  KV_RETURN_IF_ERROR(Positive(p + "attention.head_count_kv", c.n_kv_heads));
  if (c.n_heads % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_count ", c.n_heads,
                                                   " is not a multiple of head_count_kv ",
                                                   c.n_kv_heads));
  }
  if (f.Has(p + "attention.key_length")) {
    KV_ASSIGN_OR_RETURN(c.head_dim, f.GetInt(p + "attention.key_length"));
    KV_RETURN_IF_ERROR(Positive(p + "attention.key_length", c.head_dim));
    KV_ASSIGN_OR_RETURN(int64_t v_len, IntOr(f, p + "attention.value_length", c.head_dim));
    if (v_len != c.head_dim) {
      return absl::UnimplementedError(absl::StrCat("attention.value_length ", v_len,
                                                   " != key_length ", c.head_dim));
    }
  } else {
    if (c.hidden % c.n_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat("embedding_length ", c.hidden,
                                                     " is not a multiple of head_count ",
                                                     c.n_heads));
    }
    c.head_dim = c.hidden / c.n_heads;
  }
  KV_ASSIGN_OR_RETURN(c.max_context, IntOr(f, p + "context_length", 0));
  KV_ASSIGN_OR_RETURN(double eps, FloatOr(f, p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rms_eps = static_cast<float>(eps);
  KV_ASSIGN_OR_RETURN(double theta, FloatOr(f, p + "rope.freq_base", 10000.0));
  c.rope_theta = static_cast<float>(theta);
  KV_ASSIGN_OR_RETURN(c.rope_dim, IntOr(f, p + "rope.dimension_count", c.head_dim));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rope.dimension_count ", c.rope_dim,
                                                   " must be even and in (0, head_dim = ",
                                                   c.head_dim, "]"));
  }
  // GGUF llama/mistral store Q/K rows permuted for adjacent-pair rotation; qwen2 does not.
  c.rope_neox = (a == "qwen2");
  c.qkv_bias = (a == "qwen2");

  // RoPE scaling. Llama-3.1-style scaling arrives as rope_freqs.weight, not as a type here.
  std::string scaling = "none";
  if (f.Has(p + "rope.scaling.type")) {
    KV_ASSIGN_OR_RETURN(scaling, f.GetString(p + "rope.scaling.type"));
  }
  KV_ASSIGN_OR_RETURN(double factor, FloatOr(f, p + "rope.scaling.factor", 1.0));
  if (!f.Has(p + "rope.scaling.type") && f.Has(p + "rope.scale_linear")) {
    // Older converters wrote only the linear factor.
    scaling = "linear";
    KV_ASSIGN_OR_RETURN(factor, f.GetFloat(p + "rope.scale_linear"));
  }
  if (scaling == "linear") {
    if (!(factor > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("rope scaling factor ", factor, " must be > 0"));
    }
    c.rope_scaling.type = factor == 1.0 ? RopeScaling::Type::kNone : RopeScaling::Type::kLinear;
    c.rope_scaling.factor = static_cast<float>(factor);
  } else if (scaling != "none") {
    return absl::UnimplementedError(absl::StrCat("unsupported RoPE scaling type '", scaling,
                                                 "' (", p, "rope.scaling.type); kvserve supports "
                                                 "none and linear"));
  }
  return c;
}

// Shapes are reported as [rows, cols] = [ne1, ne0], the WeightView convention.
std::string ShapeString(const GgufTensor& t) {
  std::vector<int64_t> rev(t.shape.rbegin(), t.shape.rend());
  return absl::StrCat("[", absl::StrJoin(rev, ", "), "]");
}

class WeightMapper {
 public:
  explicit WeightMapper(const GgufFile& f) : f_(f) {}

  // A matrix [rows, cols]; a vector is rows == 1 and a 1-D tensor of cols elements.
  absl::StatusOr<WeightView> Get(const std::string& name, int64_t rows, int64_t cols,
                                 bool f32_only) const {
    const GgufTensor* t = f_.FindTensor(name);
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("GGUF tensor '", name, "' is missing"));
    const int64_t ne1 = t->shape.size() > 1 ? t->shape[1] : 1;
    const bool extra_dims = t->shape.size() > 2 && t->elements() != t->shape[0] * ne1;
    if (t->shape[0] != cols || ne1 != rows || extra_dims) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ",
                                                     ShapeString(*t), ", expected [", rows, ", ",
                                                     cols, "]"));
    }
    if (f32_only && t->dtype != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is ",
                                                     std::string(DTypeName(t->dtype)), ", expected F32"));
    }
    return WeightView{t->dtype, rows, cols, t->data};
  }

 private:
  const GgufFile& f_;
};

absl::StatusOr<ModelWeights> ReadWeights(const GgufFile& f, ModelConfig& c) {
  ModelWeights w;
  const WeightMapper m(f);
  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return absl::NotFoundError("GGUF tensor 'token_embd.weight' is missing");
  // The vocabulary is the embedding's row count; a vocab_size key, if any, must agree.
  c.vocab_size = embd->shape.size() > 1 ? embd->shape[1] : 1;
  const std::string vkey = c.architecture + ".vocab_size";
  if (f.Has(vkey)) {
    KV_ASSIGN_OR_RETURN(int64_t v, f.GetInt(vkey));
    if (v != c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(vkey, " = ", v, " but token_embd.weight has ",
                                                     c.vocab_size, " rows"));
    }
  }
  const int64_t h = c.hidden, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  KV_ASSIGN_OR_RETURN(w.token_embd, m.Get("token_embd.weight", c.vocab_size, h, false));
  KV_ASSIGN_OR_RETURN(w.output_norm, m.Get("output_norm.weight", 1, h, true));
  if (f.FindTensor("output.weight") != nullptr) {
    KV_ASSIGN_OR_RETURN(w.output, m.Get("output.weight", c.vocab_size, h, false));
    c.tied_embeddings = false;
  } else {
    w.output = w.token_embd;
    c.tied_embeddings = true;
  }
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    KV_ASSIGN_OR_RETURN(w.rope_freq_factors, m.Get("rope_freqs.weight", 1, c.rope_dim / 2, true));
  }
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string b = absl::StrCat("blk.", i, ".");
    KV_ASSIGN_OR_RETURN(l.attn_norm, m.Get(b + "attn_norm.weight", 1, h, true));
    KV_ASSIGN_OR_RETURN(l.wq, m.Get(b + "attn_q.weight", q, h, false));
    KV_ASSIGN_OR_RETURN(l.wk, m.Get(b + "attn_k.weight", kv, h, false));
    KV_ASSIGN_OR_RETURN(l.wv, m.Get(b + "attn_v.weight", kv, h, false));
    KV_ASSIGN_OR_RETURN(l.wo, m.Get(b + "attn_output.weight", h, q, false));
    if (c.qkv_bias) {
      KV_ASSIGN_OR_RETURN(l.bq, m.Get(b + "attn_q.bias", 1, q, true));
      KV_ASSIGN_OR_RETURN(l.bk, m.Get(b + "attn_k.bias", 1, kv, true));
      KV_ASSIGN_OR_RETURN(l.bv, m.Get(b + "attn_v.bias", 1, kv, true));
    }
    KV_ASSIGN_OR_RETURN(l.ffn_norm, m.Get(b + "ffn_norm.weight", 1, h, true));
    KV_ASSIGN_OR_RETURN(l.w_gate, m.Get(b + "ffn_gate.weight", c.ffn_hidden, h, false));
    KV_ASSIGN_OR_RETURN(l.w_up, m.Get(b + "ffn_up.weight", c.ffn_hidden, h, false));
    KV_ASSIGN_OR_RETURN(l.w_down, m.Get(b + "ffn_down.weight", h, c.ffn_hidden, false));
  }
  return w;
}

// A token id from metadata: -1 when absent, an error when outside the vocabulary.
absl::Status ReadTokenId(const GgufFile& f, const std::string& key, size_t n_tokens, int32_t* out) {
  if (!f.Has(key)) return absl::OkStatus();
  KV_ASSIGN_OR_RETURN(int64_t id, f.GetInt(key));
  if (id < 0 || static_cast<uint64_t>(id) >= n_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF metadata '", key, "' = ", id, " is outside the ", n_tokens, " tokens"));
  }
  *out = static_cast<int32_t>(id);
  return absl::OkStatus();
}

// Tokenizer data is optional (a weights-only file loads with an empty spec), but whatever
// is present must be consistent.
absl::StatusOr<TokenizerSpec> ReadTokenizer(const GgufFile& f, int64_t vocab_size) {
  TokenizerSpec t;
  if (f.Has("tokenizer.chat_template")) {
    KV_ASSIGN_OR_RETURN(t.chat_template, f.GetString("tokenizer.chat_template"));
  }
  if (!f.Has("tokenizer.ggml.tokens")) return t;
  KV_ASSIGN_OR_RETURN(t.model, f.GetString("tokenizer.ggml.model"));
  if (f.Has("tokenizer.ggml.pre")) {
    KV_ASSIGN_OR_RETURN(t.pre, f.GetString("tokenizer.ggml.pre"));
  }
  KV_ASSIGN_OR_RETURN(t.tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = t.tokens.size();
  if (static_cast<int64_t>(n) > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer has ", n, " tokens but the model's ",
                                                   "vocabulary (token_embd rows) is ", vocab_size));
  }
  if (f.Has("tokenizer.ggml.scores")) {
    KV_ASSIGN_OR_RETURN(std::vector<double> scores, f.GetFloatArray("tokenizer.ggml.scores"));
    if (scores.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.scores has ", scores.size(),
                                                     " entries for ", n, " tokens"));
    }
    t.scores.assign(scores.begin(), scores.end());
  }
  if (f.Has("tokenizer.ggml.token_type")) {
    KV_ASSIGN_OR_RETURN(std::vector<int64_t> types, f.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.token_type has ",
                                                     types.size(), " entries for ", n, " tokens"));
    }
    t.types.reserve(n);
    for (int64_t v : types) t.types.push_back(static_cast<TokenType>(v));
  }
  if (f.Has("tokenizer.ggml.merges")) {
    KV_ASSIGN_OR_RETURN(t.merges, f.GetStringArray("tokenizer.ggml.merges"));
  }
  KV_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.bos_token_id", n, &t.bos_id));
  KV_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.eos_token_id", n, &t.eos_id));
  KV_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.unknown_token_id", n, &t.unk_id));
  KV_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.padding_token_id", n, &t.pad_id));
  // SentencePiece ("llama") vocabularies add BOS and a space prefix unless told otherwise;
  // byte-level BPE ones do neither.
  const bool spm = t.model == "llama";
  KV_ASSIGN_OR_RETURN(t.add_bos, BoolOr(f, "tokenizer.ggml.add_bos_token", spm));
  KV_ASSIGN_OR_RETURN(t.add_space_prefix, BoolOr(f, "tokenizer.ggml.add_space_prefix", spm));

  auto add_eot = [&t](int32_t id) {
    if (id >= 0 && std::find(t.eot_ids.begin(), t.eot_ids.end(), id) == t.eot_ids.end()) {
      t.eot_ids.push_back(id);
    }
  };
  int32_t eot = -1;
  KV_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.eot_token_id", n, &eot));
  add_eot(eot);
  // Chat models end a turn with one of these control tokens even when the file names a
  // different eos; stopping on them avoids generating the next turn.
  for (const char* text : {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>"}) {
    for (size_t id = 0; id < n; ++id) {
      if (t.tokens[id] != text) continue;
      if (!t.types.empty() && t.types[id] != TokenType::kControl) continue;
      add_eot(static_cast<int32_t>(id));
    }
  }
  return t;
}

}  // namespace

absl::StatusOr<Model> LoadGgufModel(const std::string& path) {
  KV_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  auto annotate = [&path](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  };
  Model model;
  absl::StatusOr<ModelConfig> config = ReadConfig(f);
  if (!config.ok()) return annotate(config.status());
  model.config = std::move(*config);
  absl::StatusOr<ModelWeights> weights = ReadWeights(f, model.config);
  if (!weights.ok()) return annotate(weights.status());
  model.weights = std::move(*weights);
  absl::StatusOr<TokenizerSpec> tok = ReadTokenizer(f, model.config.vocab_size);
  if (!tok.ok()) return annotate(tok.status());
  model.tokenizer = std::move(*tok);
  model.source = path;
  model.storage = f.storage();
  return model;
}

}  // namespace kvserve
