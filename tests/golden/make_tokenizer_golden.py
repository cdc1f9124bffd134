#!/usr/bin/env python3
"""Makes the tokenizer golden data the C++ tests compare against.

Reference implementations: llama.cpp (through llama-cpp-python, vocab_only) for token ids
and detokenized text, and jinja2 (configured like transformers' apply_chat_template) for
chat rendering. CI has no Python ML stack, so the C++ tests read only the JSON written here.

Outputs (next to this script):
  tokenizer_smollm2.json  byte-level BPE: SmolLM2-135M-Instruct GGUF, pre "smollm"
  tokenizer_smollm2_pre_variants.json  the same vocabulary re-labelled with the Llama-3
                          ("llama-bpe") and Qwen2 pre-tokenizers, to check those regex chains
  tokenizer_spm_tiny.json SentencePiece BPE: a small hand-built vocabulary written as a
                          vocab-only GGUF so llama.cpp itself produces the expected ids
  chat_templates.json     ChatML / Llama-3 templates rendered by jinja2

Run: /opt/golden-venv/bin/python tests/golden/make_tokenizer_golden.py [model.gguf]
"""
import json
import os
import sys
import tempfile

import gguf
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def corpus():
    """At least 200 strings across scripts, emoji, code, whitespace, digits, specials."""
    s = [
        "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "\t\t", " \t ",
        "a", "A", "Hello", "Hello world", " Hello world", "Hello  world", "Hello   world",
        "Hello world!", "Hello, world! How are you?", "hello\nworld", "hello\n\nworld",
        "hello \n world", "trailing space ", "trailing spaces   ", "   leading spaces",
        "\tindented\ttext", "mixed \t\n whitespace \n\t ", "line1\r\nline2\r\n",
        "The quick brown fox jumps over the lazy dog.",
        "I'm here, you're there, he's gone, we've done, they'll see, I'd go.",
        "I'M HERE, YOU'RE THERE, HE'S GONE, WE'VE, THEY'LL, I'D",
        "don't can't won't shouldn't", "'s 't 're 've 'm 'll 'd", "''quoted''", "it's 'quoted'",
        "0", "1", "12", "123", "1234", "12345", "123456789", "3.14159", "1,000,000",
        "2024-01-15", "+1 (555) 123-4567", "0x1F3A", "1e-10", "v1.2.3", "100%", "$19.99",
        "12345678901234567890123456789012345678901234567890",
        "a1b2c3", "abc123def", "room 101", "٠١٢٣٤٥٦٧٨٩", "१२३४५", "①②③", "½ ¾ ⅓", "Ⅻ",
        # Latin with diacritics
        "café naïve résumé", "Straße über Größe", "Ångström ñandú", "ÀÉÎÕÜ àéîõü",
        "Zażółć gęślą jaźń", "Čeština a Slovenčina", "Türkçe ığüşöç İ", "Tiếng Việt có dấu",
        # Cyrillic, Greek, Armenian, Georgian
        "Привет, мир!", "Съешь же ещё этих мягких французских булок", "Ёлка", "Україна",
        "Γειά σου Κόσμε", "Ελληνικά: αβγδεζηθ", "Բարեւ աշխարհ", "გამარჯობა",
        # CJK
        "你好，世界", "我爱北京天安门。", "中文测试：标点符号！", "こんにちは世界", "カタカナとひらがな",
        "日本語のテキストです。", "안녕하세요 세계", "한국어 문장입니다.", "漢字かな混じり文",
        "繁體中文測試", "𠜎𠜱𠝹𠱓", "全角ＡＢＣ１２３",
        # RTL and Indic, SE Asian
        "مرحبا بالعالم", "اللغة العربية جميلة", "שלום עולם", "עברית", "سلام دنیا",
        "नमस्ते दुनिया", "हिन्दी भाषा", "বাংলা ভাষা", "தமிழ் மொழி", "తెలుగు", "ಕನ್ನಡ", "മലയാളം",
        "ภาษาไทย", "สวัสดีชาวโลก", "ພາສາລາວ", "ភាសាខ្មែរ", "မြန်မာဘာသာ", "አማርኛ", "ᏣᎳᎩ",
        # emoji
        "😀", "😀😃😄", "Hello 👋 world 🌍", "👍🏽", "👨‍👩‍👧‍👦", "👩‍💻 coding", "🏳️‍🌈", "🇺🇸🇯🇵",
        "❤️", "✨🎉🎊", "1️⃣ 2️⃣", "🧑🏿‍🚀", "emoji at end 🚀", "🚀emoji at start",
        # symbols, punctuation
        "!@#$%^&*()_+-=[]{}|;':\",./<>?", "...", "—", "– — ―", "“quotes” ‘single’", "«guillemets»",
        "™ © ®", "→ ← ↑ ↓", "∑∫∂√∞≠≤≥", "α+β=γ", "x² + y² = z²", "°C °F", "€100 £50 ¥1000",
        "\u00a0non\u00a0breaking", "zero\u200bwidth", "soft\u00adhyphen", "\u3000ideographic space",
        "tab\there", "\x00", "bell\x07", "\u2028line sep", "\ufeffBOM",
        # code
        "def foo(x):\n    return x + 1\n",
        "int main() {\n\treturn 0;\n}\n",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "if x == 1:\n    print('one')\nelif x == 2:\n    print(\"two\")\n",
        "<html><body><p>Hello</p></body></html>",
        "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null}}",
        "SELECT * FROM users WHERE id = 42;",
        "#include <stdio.h>\n#define MAX 100\n",
        "console.log(`template ${literal}`);",
        "fn main() -> Result<(), Box<dyn Error>> {}",
        "    four spaces", "        eight spaces", "\t\ttwo tabs", "x=1;y=2;z=x+y",
        "https://example.com/path?query=1&b=2#frag", "user@example.com",
        "C:\\Windows\\System32", "/usr/local/bin/python3", "snake_case_name camelCaseName",
        "ALLCAPS", "MiXeD CaSe", "__init__", "a.b.c.d", "#!/bin/bash",
        "$ echo \"hi\" | grep h > out.txt 2>&1",
        # special-token text
        "<|im_start|>", "<|im_end|>", "<|endoftext|>",
        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n",
        "text<|im_end|>more text", "<|im_start|><|im_end|>", "<|im_start|> spaced <|im_end|>",
        "<|im_start", "im_start|>", "< |im_start| >", "<|IM_START|>",
        "<repo_name>kvserve<file_sep>main.cc", "<filename>a.py\n<jupyter_code>x=1",
        "before<|endoftext|>after", "<|endoftext|><|endoftext|>", " <|im_end|> ",
        "<|im_start|>user\n你好<|im_end|>", "<|im_end|>\n\n",
        # whitespace runs in depth
        " a", "  a", "   a", "a ", "a  ", "a  b", "a   b", "a\n b", "a \nb", "a\t b",
        "\n\n\n", "\n \n \n", "  \n  \n", " \t\n\r", "\r", "\r\r\n\n", "\u00a0", "\u00a0\u00a0 x",
        "word\n\n\n\nword", "tabs\t\t\tand spaces   mix",
        # mixed scripts
        "English и русский", "中文 and English mixed", "日本語English混在", "Emoji😀inside",
        "数字123和456", "Ελληνικά123", "abc中def", "مرحبا123",
        # long-ish
        "a" * 100, "ab" * 60, " " * 50, "\n" * 30, "9" * 80, "😀" * 20, "中" * 40,
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
        "incididunt ut labore et dolore magna aliqua.",
        "supercalifragilisticexpialidocious", "antidisestablishmentarianism",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
    ]
    # Generated: numbers of every length, spacing patterns, digits next to letters.
    for n in range(1, 16):
        s.append("".join(str((i * 7 + 3) % 10) for i in range(n)))
    for k in range(1, 7):
        s.append("x" + " " * k + "y")
        s.append("x" + "\n" * k + "y")
        s.append(" " * k + "\n")
    for w in ["the", "The", "THE", "word", "tokenization", "über", "мир"]:
        s.append(w)
        s.append(" " + w)
        s.append(w + "s " + w + "'s")
    return s


def read_array(reader, key):
    f = reader.fields[key]
    return [f.parts[i] for i in f.data]


def write_vocab_gguf(path, tokens, types, extra):
    """A vocab-only GGUF llama.cpp will load: a 1-layer llama header plus tokenizer KVs."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(8)
    w.add_token_list(tokens)
    w.add_token_types(types)
    extra(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def pre_variants_golden(model_path, tmpdir):
    """SmolLM2's vocabulary and merges, tokenized by llama.cpp under other pre-tokenizers."""
    r = gguf.GGUFReader(model_path)
    tokens = [bytes(p).decode("utf-8") for p in read_array(r, "tokenizer.ggml.tokens")]
    types = [int(p[0]) for p in read_array(r, "tokenizer.ggml.token_type")]
    merges = [bytes(p).decode("utf-8") for p in read_array(r, "tokenizer.ggml.merges")]
    out = {"reference": "llama.cpp via llama-cpp-python; SmolLM2 vocab with tokenizer.ggml.pre "
                        "replaced", "variants": []}
    for pre in ("llama-bpe", "qwen2"):
        path = os.path.join(tmpdir, "smollm2_%s.gguf" % pre)

        def extra(w, pre=pre):
            w.add_tokenizer_model("gpt2")
            w.add_tokenizer_pre(pre)
            w.add_token_merges(merges)
            w.add_bos_token_id(1)
            w.add_eos_token_id(2)
            w.add_add_bos_token(False)

        write_vocab_gguf(path, tokens, types, extra)
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        cases = []
        for text in corpus():
            b = text.encode("utf-8")
            cases.append({"text": text,
                          "ids_parse_special": llm.tokenize(b, add_bos=False, special=True),
                          "ids_no_special": llm.tokenize(b, add_bos=False, special=False)})
        out["variants"].append({"pre": pre, "cases": cases})
    return out


def smollm2_golden(model_path):
    llm = Llama(model_path=model_path, vocab_only=True, verbose=False)
    cases = []
    for text in corpus():
        b = text.encode("utf-8")
        ids_special = llm.tokenize(b, add_bos=False, special=True)
        ids_plain = llm.tokenize(b, add_bos=False, special=False)
        detok = llm.detokenize(ids_plain, special=True)
        cases.append({
            "text": text,
            "ids_parse_special": ids_special,
            "ids_no_special": ids_plain,
            "decoded": detok.decode("utf-8", errors="replace"),
            "round_trips": detok == b,
        })
    return {
        "reference": "llama.cpp via llama-cpp-python, Llama(vocab_only=True).tokenize(add_bos=False)",
        "model": os.path.basename(model_path),
        "cases": cases,
    }


# ---------------------------------------------------------------------------------------------
# SentencePiece BPE: a small vocabulary, scores decide merges, bytes fall back to <0xNN>.

SPM_PIECES = [
    # (piece, score); higher score merges first
    ("▁", -1.0), ("e", -2.0), ("t", -2.1), ("a", -2.2), ("o", -2.3), ("h", -2.4), ("l", -2.5),
    ("n", -2.6), ("s", -2.7), ("r", -2.8), ("d", -2.9), ("w", -3.0), ("i", -3.1), ("c", -3.2),
    ("k", -3.3), ("u", -3.4), ("H", -3.5), ("W", -3.6), ("T", -3.7), (",", -3.8), ("!", -3.9),
    (".", -4.0), ("1", -4.1), ("2", -4.2), ("3", -4.3), ("你", -4.4), ("é", -4.5),
    ("▁t", -5.0), ("he", -5.1), ("▁the", -5.2), ("▁a", -5.3), ("ll", -5.4), ("llo", -5.5),
    ("▁he", -5.6), ("▁hello", -5.7), ("▁w", -5.8), ("or", -5.9), ("▁wor", -6.0),
    ("▁world", -6.1), ("ld", -6.2), ("in", -6.3), ("an", -6.4), ("▁an", -6.5), ("▁and", -6.6),
    ("er", -6.7), ("st", -6.8), ("▁H", -6.9), ("▁Hello", -7.0), ("el", -7.1), ("ello", -7.2),
    ("▁▁", -7.3), ("▁▁▁▁", -7.4), ("12", -7.5), ("▁c", -7.6), ("af", -7.7), ("▁caf", -7.8),
    ("▁café", -7.9), ("ra", -8.0), ("ck", -8.1), ("cr", -8.2), ("ack", -8.3), ("▁cr", -8.4),
    ("▁crack", -8.5), ("ed", -8.6), ("ne", -8.7), ("wn", -8.8), ("own", -8.9), ("▁own", -9.0),
    ("he▁", -9.1), ("ta", -9.2), ("at", -9.3), ("▁at", -9.4), ("▁tat", -9.5),
]
SPM_SPECIAL_USER = ["<tool>", "</tool>"]


def build_spm_vocab():
    tokens, scores, types = [], [], []

    def add(t, score, ty):
        tokens.append(t)
        scores.append(score)
        types.append(ty)

    add("<unk>", 0.0, 2)
    add("<s>", 0.0, 3)
    add("</s>", 0.0, 3)
    for b in range(256):
        add("<0x%02X>" % b, 0.0, 6)
    for p, sc in SPM_PIECES:
        add(p, sc, 1)
    for u in SPM_SPECIAL_USER:
        add(u, 0.0, 4)
    return tokens, scores, types


def spm_corpus():
    return [
        "", " ", "hello", "Hello", "hello world", "Hello, world!", "the hello and the world",
        "  hello", "hello  world", "hello    world", "a", "at tat", "tat", "cracked own",
        "café", "你好", "你", "好", "😀", "x", "XYZ", "123", "1212", "hello\nworld", "\t",
        "he", "the", "thee", "ello", "crack ed", "<tool>hello</tool>", "a<tool>b", "<s>hello",
        "hello</s>", "wow", "ünïcödé", "ta ta ta", "hello world hello world",
        "▁already", "e" * 40, "hello " * 10,
    ]


def spm_golden(tmpdir):
    tokens, scores, types = build_spm_vocab()
    path = os.path.join(tmpdir, "spm_tiny.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(8)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    cases = []
    for text in spm_corpus():
        b = text.encode("utf-8")
        ids_special = llm.tokenize(b, add_bos=True, special=True)
        ids_plain = llm.tokenize(b, add_bos=False, special=False)
        detok = llm.detokenize(ids_plain, special=True)
        cases.append({
            "text": text,
            "ids_parse_special_bos": ids_special,
            "ids_no_special": ids_plain,
            "decoded": detok.decode("utf-8", errors="replace"),
        })
    return {
        "reference": "llama.cpp via llama-cpp-python on a vocab-only GGUF built from this vocab",
        "vocab": {"tokens": tokens, "scores": scores, "types": types, "bos_id": 1, "eos_id": 2,
                  "unk_id": 0, "add_bos": True, "add_space_prefix": True},
        "cases": cases,
    }


# ---------------------------------------------------------------------------------------------
# Chat templates, rendered the way transformers' apply_chat_template does.

CHATML_NO_DEFAULT = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n'"
    " }}{% endif %}")

QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# Qwen2.5 without the tool-calling branches (no tools are passed, so they never render).
QWEN25_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim"
    " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

# Llama-3.1 without the tool branches: the system block always carries the knowledge/date lines.
LLAMA31_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "system", "content": "  padded system  "},
     {"role": "user", "content": "\n  padded user \n"},
     {"role": "assistant", "content": " padded answer\t"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "Unicode: 你好 😀 Привет\nsecond line"}],
    [{"role": "user", "content": "literal <|im_start|> and <|eot_id|> text"}],
    [{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "ok"}],
    [{"role": "system", "content": "sys"}, {"role": "user", "content": "u1"},
     {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
     {"role": "assistant", "content": "a2"}, {"role": "user", "content": "u3"}],
]


def chat_golden(smollm2_template):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    templates = [
        ("smollm2", smollm2_template, "<|im_start|>"),
        ("chatml_plain", CHATML_NO_DEFAULT, "<|im_start|>"),
        ("qwen2", QWEN2_TEMPLATE, "<|im_start|>"),
        ("qwen2.5", QWEN25_TEMPLATE, "<|im_start|>"),
        ("llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>"),
        ("llama3.1", LLAMA31_TEMPLATE, "<|begin_of_text|>"),
    ]
    out = []
    for name, src, bos in templates:
        tpl = env.from_string(src)
        cases = []
        for conv in CONVERSATIONS:
            for agp in (False, True):
                cases.append({
                    "messages": conv,
                    "add_generation_prompt": agp,
                    "expected": tpl.render(messages=conv, add_generation_prompt=agp,
                                           bos_token=bos, eos_token=""),
                })
        out.append({"name": name, "template": src, "bos_token": bos, "cases": cases})
    return {"reference": "jinja2 ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks)",
            "templates": out}


def gguf_chat_template(path):
    r = gguf.GGUFReader(path)
    f = r.fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def write(name, obj):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    write("tokenizer_smollm2.json", smollm2_golden(model))
    with tempfile.TemporaryDirectory() as d:
        write("tokenizer_spm_tiny.json", spm_golden(d))
        write("tokenizer_smollm2_pre_variants.json", pre_variants_golden(model, d))
    write("chat_templates.json", chat_golden(gguf_chat_template(model)))


if __name__ == "__main__":
    main()
