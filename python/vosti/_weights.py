"""Turns what a user passes to LLM.update_weights into what the extension takes: a path, or
(name, CPU array) pairs that expose DLPack or the buffer protocol (NumPy, PyTorch, ...)."""
from __future__ import annotations

import os
from typing import Any, Iterable, List, Tuple


def is_path(weights: Any) -> bool:
    return isinstance(weights, (str, bytes, os.PathLike))


def _cpu_array(name: str, value: Any) -> Any:
    """A C-contiguous CPU array of `value`, read through DLPack or the buffer protocol.

    PyTorch tensors are detached (DLPack refuses tensors that require grad); a tensor on a GPU
    is copied to the host once (the engine keeps its own copy of the values in any case).
    """
    if hasattr(value, "detach") and hasattr(value, "is_contiguous"):  # a torch.Tensor
        value = value.detach()
        if getattr(value, "device", None) is not None and value.device.type != "cpu":
            value = value.to("cpu")
        if not value.is_contiguous():
            value = value.contiguous()
        return value
    if hasattr(value, "__dlpack__") or hasattr(value, "__array_interface__"):
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy is a dependency
            return value
        if isinstance(value, np.ndarray) and not value.flags["C_CONTIGUOUS"]:
            value = np.ascontiguousarray(value)
        return value
    raise TypeError(f"tensor '{name}': expected a NumPy array or a tensor with __dlpack__, got {type(value).__name__}")


def named_arrays(weights: Any) -> List[Tuple[str, Any]]:
    """(name, array) pairs from a mapping or an iterable of pairs (vLLM's load_weights form)."""
    items: Iterable = weights.items() if hasattr(weights, "items") else weights
    out = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError("weights must be a path, a mapping of name -> array, or (name, array) pairs") from None
        if not isinstance(name, str):
            raise TypeError(f"a tensor name must be a str, got {type(name).__name__}")
        out.append((name, _cpu_array(name, value)))
    return out


_SAFETENSORS_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


def save_safetensors(path: str, tensors: Any) -> None:
    """Writes a mapping (or pairs) name -> NumPy array to one .safetensors file, e.g. for
    LLM.update_weights(path). float32 and float16 arrays (and bfloat16 where the array's dtype
    is named so, e.g. ml_dtypes); little-endian, row-major, tensors in the given order."""
    import json
    import struct

    import numpy as np

    items = list(tensors.items() if hasattr(tensors, "items") else tensors)
    header, blobs, offset = {}, [], 0
    for name, value in items:
        a = np.ascontiguousarray(value)
        dtype = _SAFETENSORS_DTYPES.get(a.dtype.name)
        if dtype is None:
            raise ValueError(f"tensor '{name}': dtype {a.dtype} cannot be written (float32, float16, bfloat16)")
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
