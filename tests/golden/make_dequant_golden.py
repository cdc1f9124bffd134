#!/usr/bin/env python3
"""Writes the golden files for tests/kernels/dequantize_test.cc and the SmolLM2 loader test.

Run with the python that has the `gguf` and `numpy` packages:
    /opt/golden-venv/bin/python tests/golden/make_dequant_golden.py [path/to/SmolLM2.gguf]

Expected values come from gguf-py's numpy dequantizers (an implementation independent of
ours). Block bytes are random with fp16 scales forced to sane finite values, so every bit
of every block field is exercised. Deterministic: fixed seed.

File format (little endian), one file per type in tests/golden/dequant/<TYPE>.bin:
    uint32 n_elements, uint32 n_bytes, uint8 bytes[n_bytes], float32 expected[n_elements]
half.bin: uint32 n, float32 inputs[n], uint16 fp16[n], uint16 bf16[n].
smollm2_token_embd.bin: same layout as a type file with n_bytes = 0: rows 0 and 1000,
first 64 values each (128 floats).
"""
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = Path(__file__).resolve().parent / "dequant"
rng = np.random.default_rng(1234)


def fp16_bytes(values):
    return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint8)


def random_blocks(qtype, n_blocks, scale_offsets):
    """Random block bytes; the fp16 fields at scale_offsets get finite values ~1e-3..1."""
    block_size, type_size = quants.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in scale_offsets:
        mag = 10.0 ** rng.uniform(-3, 0, size=n_blocks)
        sign = np.where(rng.random(n_blocks) < 0.2, -1.0, 1.0)
        raw[:, off:off + 2] = fp16_bytes(mag * sign).reshape(n_blocks, 2)
    return raw, n_blocks * block_size


def write_case(name, raw, n, expected):
    expected = np.asarray(expected, dtype=np.float32).reshape(-1)
    assert expected.size == n, (name, expected.size, n)
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    with open(OUT / f"{name}.bin", "wb") as f:
        f.write(struct.pack("<II", n, raw.size))
        f.write(raw.tobytes())
        f.write(expected.astype("<f4").tobytes())


def special_floats():
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, 65504.0, -65504.0, 65519.0, 65520.0, 1e-8,
                2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -14, 6.1e-5, 1e30, -1e30,
                np.inf, -np.inf, np.nan, 1.00048828125, 1.001953125, 3.14159265,
                1 + 2.0 ** -8, 1 + 3 * 2.0 ** -9, 1 + 2.0 ** -9]
    rand = rng.normal(0, 1, 96) * 10.0 ** rng.uniform(-8, 5, 96)
    return np.array(specials + list(rand), dtype=np.float32)


def main():
    np.seterr(over="ignore")  # fp16 overflow to inf is one of the cases we want
    OUT.mkdir(parents=True, exist_ok=True)

    # Plain float types: the stored bytes are conversions of interesting fp32 values.
    x = special_floats()[:128]
    x = np.concatenate([x, rng.normal(0, 1, 128 - x.size).astype(np.float32)])
    write_case("F32", x.view(np.uint8), x.size, x)
    h = x.astype(np.float16)
    write_case("F16", h.view(np.uint8), h.size, h.astype(np.float32))
    bf = quants.quantize(x.reshape(1, -1), T.BF16).reshape(-1)
    write_case("BF16", bf, x.size, quants.dequantize(bf.reshape(1, -1), T.BF16))

    # Block types: (type, number of blocks, byte offsets of fp16 scale fields).
    layouts = [
        (T.Q4_0, 8, [0]),
        (T.Q4_1, 8, [0, 2]),
        (T.Q8_0, 8, [0]),
        (T.Q4_K, 4, [0, 2]),
        (T.Q5_K, 4, [0, 2]),
        (T.Q6_K, 4, [208]),
    ]
    for qtype, n_blocks, offs in layouts:
        raw, n = random_blocks(qtype, n_blocks, offs)
        expected = quants.dequantize(raw.reshape(1, -1), qtype)
        write_case(qtype.name, raw, n, expected)

    # fp32 -> fp16 / bf16 conversions (round to nearest even) on the same inputs.
    xs = special_floats()
    with open(OUT / "half.bin", "wb") as f:
        f.write(struct.pack("<I", xs.size))
        f.write(xs.astype("<f4").tobytes())
        f.write(xs.astype(np.float16).view("<u2").tobytes())
        f.write(quants.quantize(xs.reshape(1, -1), T.BF16).view("<u2").tobytes())

    if len(sys.argv) > 1:
        from gguf import GGUFReader
        r = GGUFReader(sys.argv[1])
        t = next(t for t in r.tensors if t.name == "token_embd.weight")
        rows = quants.dequantize(t.data[[0, 1000]], t.tensor_type)
        vals = rows[:, :64].astype(np.float32).reshape(-1)
        with open(OUT / "smollm2_token_embd.bin", "wb") as f:
            f.write(struct.pack("<II", vals.size, 0))
            f.write(vals.astype("<f4").tobytes())


if __name__ == "__main__":
    main()
