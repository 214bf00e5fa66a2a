# The memory of the PTX symbolic execution (ptx_exec.py): global buffers, each at its own
# 2^32-aligned base address, byte entries as domains/ptx_dag.py holds them (an input's leaves, zeros,
# or unwritten: reading one is an error), and the parameter space's bytes.
from __future__ import annotations

from ..domains.ptx_dag import ExecError


class Buffer:
    """One global buffer: byte entries at [base, base + size), from `data` (an input's leaves), all
    zero, or unwritten (None: reading one is an error)."""

    def __init__(self, name: str, base: int, size: int, writable: bool = True, zero: bool = False,
                 data: list | None = None) -> None:
        self.name, self.base, self.size = name, base, size
        self.writable = writable
        self.data: list = data if data is not None else [0] * size if zero else [None] * size
        if len(self.data) != size:
            raise ExecError(f"{name}: {len(self.data)} bytes of data for {size}")

    def read(self, off: int, n: int) -> list:
        if off < 0 or off + n > self.size:
            raise ExecError(f"reads {self.name} bytes [{off}, {off + n}) outside its {self.size}")
        sl = self.data[off:off + n]
        if None in sl:
            raise ExecError(f"reads {self.name} bytes [{off}, {off + n}) that nothing wrote")
        return sl

    def write(self, off: int, entries: list) -> None:
        if not self.writable:
            raise ExecError(f"writes the input {self.name}")
        if off < 0 or off + len(entries) > self.size:
            raise ExecError(f"writes {self.name} bytes [{off}, {off + len(entries)}) outside its {self.size}")
        self.data[off:off + len(entries)] = entries


class GlobalMemory:
    """The kernel's global buffers, each at its own 2^32-aligned base address."""

    def __init__(self) -> None:
        self.buffers: dict[int, Buffer] = {}

    def add(self, name: str, size: int, **kw) -> Buffer:
        base = (len(self.buffers) + 1) << 32
        buf = self.buffers[base >> 32] = Buffer(name, base, size, **kw)
        return buf

    def at(self, addr: int) -> tuple[Buffer, int]:
        buf = self.buffers.get(addr >> 32)
        if buf is None:
            raise ExecError(f"global address {addr:#x} is in no buffer")
        return buf, addr - buf.base


def gm_read(gm: GlobalMemory, addr: int, n: int) -> list:
    buf, off = gm.at(addr)
    return buf.read(off, n)


def param_bytes(size: int, fields: dict[int, tuple[int, int]]) -> bytes:
    """A parameter struct of `size` bytes: offset -> (value, bytes), little-endian, the rest 0."""
    out = bytearray(size)
    for off, (v, n) in fields.items():
        out[off:off + n] = (v & ((1 << 8 * n) - 1)).to_bytes(n, "little")
    return bytes(out)
