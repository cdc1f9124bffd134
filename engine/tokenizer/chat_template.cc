// Family detection and hand-written renderers equivalent to the Jinja templates; see
// chat_template.h. We do not embed a Jinja engine: the served families are few and fixed,
// and a renderer per family is simpler to audit than a template language.
#include "engine/tokenizer/chat_template.h"

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace kvserve {
namespace {

// Python's str.isspace() set, which Jinja's `trim` filter (str.strip) uses.
bool IsPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
         cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view JinjaTrim(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t p = begin;
    if (!IsPythonSpace(utf8::NextCodepoint(s, &p))) break;
    begin = p;
  }
  size_t end = begin;  // end of the last non-space character
  for (size_t p = begin; p < s.size();) {
    if (!IsPythonSpace(utf8::NextCodepoint(s, &p))) end = p;
  }
  return s.substr(begin, end - begin);
}

// Undoes Jinja/Python string-literal escapes in a literal copied out of the template.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      default: out.push_back(c); break;  // \\ \' \" and anything else: the char itself
    }
  }
  return out;
}

// The built-in system prompt of a ChatML template: a literal
// '<|im_start|>system\n<text><|im_end|>' inside a string, i.e. <text> has no quote (a quote
// would mean the literal ends and message content is concatenated, as in Qwen2.5's branch
// for a user-given system message).
std::optional<std::string> ChatMlDefaultSystem(std::string_view tpl) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  constexpr std::string_view kEnd = "<|im_end|>";
  for (size_t at = tpl.find(kOpen); at != std::string_view::npos;
       at = tpl.find(kOpen, at + 1)) {
    size_t p = at + kOpen.size();
    if (tpl.substr(p, 1) == "\n") {
      p += 1;
    } else if (tpl.substr(p, 2) == "\\n") {
      p += 2;
    } else {
      continue;
    }
    const size_t end = tpl.find(kEnd, p);
    if (end == std::string_view::npos) continue;
    const std::string_view body = tpl.substr(p, end - p);
    if (body.find_first_of("'\"") != std::string_view::npos) continue;
    return Unescape(body);
  }
  return std::nullopt;
}

std::string RenderChatMl(std::string_view tpl, absl::Span<const ChatMessage> messages,
                         bool add_generation_prompt) {
  std::string out;
  if (!messages.empty() && messages[0].role != "system") {
    if (std::optional<std::string> sys = ChatMlDefaultSystem(tpl)) {
      absl::StrAppend(&out, "<|im_start|>system\n", *sys, "<|im_end|>\n");
    }
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// The first double- or single-quoted literal after `key` in `tpl`, unescaped.
std::optional<std::string> LiteralAfter(std::string_view tpl, std::string_view key) {
  const size_t at = tpl.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t q = tpl.find_first_of("'\"", at + key.size());
  if (q == std::string_view::npos) return std::nullopt;
  const size_t close = tpl.find(tpl[q], q + 1);
  if (close == std::string_view::npos) return std::nullopt;
  return Unescape(tpl.substr(q + 1, close - q - 1));
}

void AppendLlama3Turn(std::string& out, std::string_view role, std::string_view content) {
  absl::StrAppend(&out, "<|start_header_id|>", std::string(role), "<|end_header_id|>\n\n",
                  std::string(JinjaTrim(content)), "<|eot_id|>");
}

absl::StatusOr<std::string> RenderLlama3(std::string_view tpl, const std::string& bos,
                                         absl::Span<const ChatMessage> messages,
                                         bool add_generation_prompt) {
  std::string out;
  constexpr std::string_view kKnowledge = "Cutting Knowledge Date: ";
  if (tpl.find(kKnowledge) == std::string_view::npos) {
    // Llama-3.0: every message is a header turn; bos_token opens the first one.
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i == 0) out += bos;
      AppendLlama3Turn(out, messages[i].role, messages[i].content);
    }
  } else {
    // Llama-3.1+: a system turn always comes first and carries the knowledge cutoff and the
    // date (the template's own default date_string), then the user's system text if any.
    const size_t k = tpl.find(kKnowledge) + kKnowledge.size();
    const size_t k_end = tpl.find_first_of("\\\n\"'", k);
    const std::string knowledge(tpl.substr(k, k_end - k));
    std::optional<std::string> date = LiteralAfter(tpl, "set date_string =");
    if (!date) {
      return absl::InvalidArgumentError(
          "Llama-3.1-style chat template has no default date_string literal");
    }
    out += bos;
    size_t first = 0;
    std::string_view system;
    if (!messages.empty() && messages[0].role == "system") {
      system = JinjaTrim(messages[0].content);
      first = 1;
    }
    absl::StrAppend(&out, "<|start_header_id|>system<|end_header_id|>\n\n",
                    "Cutting Knowledge Date: ", knowledge, "\nToday Date: ", *date, "\n\n",
                    std::string(system), "<|eot_id|>");
    for (size_t i = first; i < messages.size(); ++i) {
      AppendLlama3Turn(out, messages[i].role, messages[i].content);
    }
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

absl::StatusOr<ChatTemplateFamily> DetectChatTemplate(const std::string& chat_template) {
  if (chat_template.empty()) {
    return absl::FailedPreconditionError("the model has no chat template");
  }
  if (chat_template.find("<|im_start|>") != std::string::npos) return ChatTemplateFamily::kChatMl;
  if (chat_template.find("<|start_header_id|>") != std::string::npos) {
    return ChatTemplateFamily::kLlama3;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unrecognized chat template (supported: ChatML with <|im_start|>, Llama-3 with "
      "<|start_header_id|>); it begins: '",
      utf8::Sanitize(std::string_view(chat_template).substr(0, 80)), "'"));
}

absl::StatusOr<std::string> RenderChat(const TokenizerSpec& spec,
                                       absl::Span<const ChatMessage> messages,
                                       bool add_generation_prompt) {
  absl::StatusOr<ChatTemplateFamily> family = DetectChatTemplate(spec.chat_template);
  if (!family.ok()) return family.status();
  switch (*family) {
    case ChatTemplateFamily::kChatMl:
      return RenderChatMl(spec.chat_template, messages, add_generation_prompt);
    case ChatTemplateFamily::kLlama3: {
      const bool has_bos =
          spec.bos_id >= 0 && spec.bos_id < static_cast<int32_t>(spec.tokens.size());
      return RenderLlama3(spec.chat_template, has_bos ? spec.tokens[spec.bos_id] : "",
                          messages, add_generation_prompt);
    }
  }
  return absl::InternalError("unhandled chat template family");
}

}  // namespace kvserve
