#!/usr/bin/env python3
"""Makes the Hugging Face golden checkpoints and logits under tests/golden/hf/.

Each model is a tiny random-weight transformers checkpoint (fixed seeds) saved with
save_pretrained, plus a tiny trained BPE tokenizer, plus the reference logits of a fixed
token sequence at every position, computed by transformers itself in float64 and stored as
raw little-endian float32 (logits.bin, [n_tokens, vocab] row-major) with logits.json
describing it. tests/engine/model/hf_logits_test.cc compares our forward pass to these.

  llama/    LlamaForCausalLM, 3 layers, llama3 rope scaling, theta 500000, untied, F32,
            Llama-3-style byte-level tokenizer (digits in groups of 3)
  qwen2/    Qwen2ForCausalLM, 2 layers, q/k/v biases, tied, F32, sharded
            (model.safetensors.index.json), Qwen2-style byte-level tokenizer
  mistral/  MistralForCausalLM, 2 layers, head_dim 32 != hidden/heads, BF16 weights,
            SentencePiece-style tokenizer (Metaspace + byte_fallback)

Run:  /opt/hf-venv/bin/python tests/golden/make_hf_golden.py   (pip: torch transformers
safetensors tokenizers). Re-running rewrites the folders.
"""
import json
import math
import os
import shutil
import sys

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf")
VOCAB = 320
# 16 ids spread over the vocabulary, including bos-like low ids and the top id.
TOKENS = [1, 72, 101, 108, 108, 111, 32, 300, 7, 255, 256, 199, 64, 319, 33, 150]
PROBE_TEXT = "Hello world! 12345 caches\n  are   fun."
CORPUS = ("The quick brown fox jumps over the lazy dog. Hello world! Caches are fun; "
          "key value caches keep 12345 entries, 678 pages and 90 layers. ") * 20

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def byte_level_tokenizer(split_regex):
    """Byte-level BPE: Split(regex) + ByteLevel, trained to VOCAB tokens on CORPUS."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS], trainer)
    return tok


def with_bos(tok, bos):
    """Llama 3 style: encode() prepends bos through the post-processor."""
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def sentencepiece_tokenizer():
    """SentencePiece-style BPE: Metaspace, byte_fallback, <0xXX> byte pieces in the vocab."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"] + byte_pieces,
                                  show_progress=False)
    tok.train_from_iterator([CORPUS], trainer)
    # Byte pieces are ordinary vocab entries in real Llama 2 / Mistral files, not added tokens.
    j = json.loads(tok.to_str())
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in ("<unk>", "<s>", "</s>")]
    return Tokenizer.from_str(json.dumps(j))


@torch.no_grad()
def randomize(model, seed):
    """Weights big enough that the logits are far from uniform, so errors show."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
        elif name.endswith(".bias"):
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
        elif "embed_tokens" in name:
            p.copy_(torch.randn(p.shape, generator=g))
        else:
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def save(name, model, tokenizer, tok_kwargs, save_dtype, max_shard_size=None):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model.eval()
    if save_dtype == torch.bfloat16:
        # The reference runs on exactly the weights the file holds.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    ref = model.to(torch.float64)
    with torch.no_grad():
        logits = ref(torch.tensor([TOKENS])).logits[0].to(torch.float32).contiguous()
    kwargs = {"safe_serialization": True}
    if max_shard_size:
        kwargs["max_shard_size"] = max_shard_size
    model.to(save_dtype).save_pretrained(d, **kwargs)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, **tok_kwargs)
    fast.save_pretrained(d)
    with open(os.path.join(d, "logits.bin"), "wb") as f:
        f.write(logits.numpy().astype("<f4").tobytes())
    meta = {
        "tokens": TOKENS,
        "n_tokens": len(TOKENS),
        "vocab": logits.shape[1],
        "logits_file": "logits.bin",
        "logits_layout": "float32 little-endian [n_tokens, vocab], row-major",
        "reference": "transformers forward in float64, attn_implementation=eager",
        "weights_dtype": str(save_dtype).replace("torch.", ""),
        "probe_text": PROBE_TEXT,
        "probe_ids": tokenizer.encode(PROBE_TEXT, add_special_tokens=False).ids,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    with open(os.path.join(d, "logits.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(name, "max|logit| =", float(logits.abs().max()), "files:", sorted(os.listdir(d)))


def main():
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  num_key_value_heads=2, attn_implementation="eager")

    torch.manual_seed(1)
    llama = LlamaForCausalLM(LlamaConfig(
        num_hidden_layers=3, rope_theta=500000.0, max_position_embeddings=131072, rms_norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, **common))
    randomize(llama, 101)
    save("llama", llama, with_bos(byte_level_tokenizer(LLAMA3_SPLIT), "<|begin_of_text|>"),
         dict(bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>"), torch.float32)

    torch.manual_seed(2)
    qwen = Qwen2ForCausalLM(Qwen2Config(
        num_hidden_layers=2, rope_theta=1000000.0, max_position_embeddings=32768, rms_norm_eps=1e-6,
        tie_word_embeddings=True, **common))
    randomize(qwen, 202)
    save("qwen2", qwen, byte_level_tokenizer(QWEN2_SPLIT),
         dict(eos_token="<|im_end|>", pad_token="<|end_of_text|>", chat_template=CHAT_TEMPLATE),
         torch.float32, max_shard_size="100KB")

    torch.manual_seed(3)
    mistral = MistralForCausalLM(MistralConfig(
        num_hidden_layers=2, head_dim=32, rope_theta=1000000.0, max_position_embeddings=32768,
        sliding_window=4096, rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1,
        eos_token_id=2, **common))
    randomize(mistral, 303)
    save("mistral", mistral, sentencepiece_tokenizer(),
         dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", add_bos_token=True), torch.bfloat16)


if __name__ == "__main__":
    sys.exit(main())
