#!/usr/bin/env python3
"""Writes the committed fixtures of tests/io (and the fuzz seeds of tests/fuzz).

Run once on a development machine with the `gguf`, `numpy` and `safetensors`
packages (e.g. /opt/golden/bin/python tests/io/make_fixtures.py [MODEL.gguf]);
CI never runs it. Everything expected is computed by the gguf package, an
independent implementation, so the C++ tests compare against it bit for bit:

  data/dequant.gguf       for each supported type T: tensor "T.q" (raw blocks) and
                          "T.f32" = gguf.quants.dequantize of those bytes
  data/all_types.gguf     metadata of every GGUF value type (nested arrays too),
                          written by gguf.GGUFWriter, plus two small tensors
  data/tiny_model/        config.json + model.safetensors written by `safetensors`
  data/default_model.json tensor checksums and samples of the real default model
  ../fuzz/corpus/<target>/ small seeds for the libFuzzer targets

checksum(t) = sum over i of bits(f32 value i) * (2*i + 1) mod 2^64 (odd weights:
any single changed value changes the sum).
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus")
rng = np.random.default_rng(20261129)

SUPPORTED = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K]
ROWS, COLS = 2, 512  # a multiple of every block size


def sane_f16(n):
    """f16 scales over many magnitudes and both signs (no inf/nan), some zero, some subnormal."""
    mag = 10.0 ** rng.uniform(-6, 1.5, size=n)
    v = (mag * rng.choice([-1.0, 1.0], size=n)).astype(np.float16)
    v[rng.random(n) < 0.05] = 0
    return v


def random_blocks(qtype, n_blocks):
    """Random block bytes whose f16 scale fields hold sane values."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    # Byte offsets of the f16 scale fields in each block layout.
    f16_fields = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
                  Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}[qtype]
    for off in f16_fields:
        b[:, off:off + 2] = sane_f16(n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return b


def quant_bytes(qtype):
    """[ROWS, COLS] elements of `qtype` as raw bytes [ROWS, row_bytes]."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == Q.F32:
        bits = rng.integers(0, 2**32, size=(ROWS, COLS), dtype=np.uint32)
        return bits.view(np.uint8).reshape(ROWS, -1)
    if qtype in (Q.F16, Q.BF16):
        # Every class of 16-bit pattern: random bits cover normals, subnormals, inf and nan.
        bits = rng.integers(0, 2**16, size=(ROWS, COLS), dtype=np.uint16)
        bits[0, :8] = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x03FF, 0x7BFF, 0x7E00]
        return bits.view(np.uint8).reshape(ROWS, -1)
    n_blocks = ROWS * COLS // block_size
    if qtype in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0):
        # Row 0: the gguf package's own quantisation of real-looking data; row 1: random blocks.
        x = (rng.standard_normal((1, COLS)) * 10.0 ** rng.uniform(-3, 1, size=(1, COLS))).astype(np.float32)
        row0 = gguf.quants.quantize(x, qtype).reshape(1, -1)
        row1 = random_blocks(qtype, n_blocks // ROWS).reshape(1, -1)
        return np.concatenate([row0, row1], axis=0)
    return random_blocks(qtype, n_blocks).reshape(ROWS, -1)


def write_dequant_fixture():
    w = gguf.GGUFWriter(os.path.join(DATA, "dequant.gguf"), arch="vosti-test")
    for qtype in SUPPORTED:
        raw = np.ascontiguousarray(quant_bytes(qtype))
        expected = gguf.quants.dequantize(raw, qtype) if qtype != Q.F32 else raw.view(np.float32)
        expected = np.ascontiguousarray(expected, dtype=np.float32).reshape(ROWS, COLS)
        w.add_tensor(f"{qtype.name}.q", raw, raw_dtype=qtype)
        w.add_tensor(f"{qtype.name}.f32", expected)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_all_types(path):
    w = gguf.GGUFWriter(path, arch="vosti-test")
    V = gguf.GGUFValueType
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo \"gguf\"\n")
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", -1.0 / 3.0)
    w.add_array("t.arr_str", ["a", "", "ü"])
    w.add_key_value("t.arr_i32", [1, -2, 3], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("t.arr_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("t.arr_f32", [0.5, -2.0], V.ARRAY, sub_type=V.FLOAT32)
    w.add_array("t.arr_nested", [[1, 2], [3]])
    w.add_array("t.arr_bool", [True, False])
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    w.add_tensor("a", a)
    w.add_tensor("b", np.array([1.5, -1.0, 0.25, 8.0], dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_tiny_model(d):
    os.makedirs(d, exist_ok=True)
    import torch  # safetensors.numpy has no bfloat16
    from safetensors.torch import save_file as save_torch
    tensors = {
        "w32": torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5.5,
        "w16": torch.tensor([[1.0, -2.0], [0.5, 65504.0]], dtype=torch.float16),
        "wbf": torch.tensor([1.0, -3.0, 0.0078125], dtype=torch.bfloat16),
        "scalar": torch.tensor(7.0, dtype=torch.float32),
        "empty": torch.zeros((0, 4), dtype=torch.float32),
    }
    save_torch(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt", "note": "vosti"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 4, "num_hidden_layers": 1}, f, indent=1)


def checksum(x):
    bits = x.reshape(-1).view(np.uint32).astype(np.uint64)
    weights = np.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int((bits * weights).sum(dtype=np.uint64))


def write_default_model_expected(model_path):
    r = gguf.GGUFReader(model_path)
    names = ["token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "blk.7.attn_k.weight",
             "output_norm.weight"]
    out = {"file": os.path.basename(model_path), "tensor_count": len(r.tensors), "tensors": []}
    by_name = {t.name: t for t in r.tensors}
    for name in names:
        t = by_name[name]
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        flat = x.reshape(-1)
        idx = sorted({0, 1, 31, 32, flat.size // 2, flat.size - 1, *rng.integers(0, flat.size, 4).tolist()})
        out["tensors"].append({
            "name": name, "type": t.tensor_type.name, "shape": [int(s) for s in x.shape],
            "checksum": str(checksum(flat)),
            "samples": [[i, int(flat[i:i + 1].view(np.uint32)[0])] for i in idx],
        })
    with open(os.path.join(DATA, "default_model.json"), "w") as f:
        json.dump(out, f, indent=1)


def write_fuzz_seeds():
    for d in ("gguf_fuzz", "safetensors_fuzz"):
        os.makedirs(os.path.join(CORPUS, d), exist_ok=True)
    tmp = os.path.join(CORPUS, "gguf_fuzz", "all_types.gguf")
    write_all_types(tmp)
    data = open(tmp, "rb").read()
    with open(os.path.join(CORPUS, "gguf_fuzz", "truncated.gguf"), "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    # A Q4_K tensor: exercises block geometry checks.
    w = gguf.GGUFWriter(os.path.join(CORPUS, "gguf_fuzz", "q4k.gguf"), arch="fuzz")
    w.add_uint32("general.alignment", 64)
    w.add_tensor("q", random_blocks(Q.Q4_K, 1), raw_dtype=Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file({"x": np.arange(4, dtype=np.float32), "y": np.ones((2, 2), dtype=np.float16)},
              os.path.join(CORPUS, "safetensors_fuzz", "small.safetensors"), metadata={"k": "v"})
    hdr = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    with open(os.path.join(CORPUS, "safetensors_fuzz", "handmade.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + b"\0\0\x80\x3f")


def main():
    os.makedirs(DATA, exist_ok=True)
    write_dequant_fixture()
    write_all_types(os.path.join(DATA, "all_types.gguf"))
    write_tiny_model(os.path.join(DATA, "tiny_model"))
    write_fuzz_seeds()
    model = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("VOSTI_DEFAULT_MODEL", "")
    if model and os.path.exists(model):
        write_default_model_expected(model)
    else:
        print("make_fixtures: no default model given; data/default_model.json left as it is", file=sys.stderr)


if __name__ == "__main__":
    main()
