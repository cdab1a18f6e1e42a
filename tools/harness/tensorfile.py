"""Values between harness processes: tensors as raw bytes behind a JSON header. Torch only.

Inputs, reference outputs and a candidate's outputs can each be gigabytes. torch.save/torch.load
go through pickle and, with mmap, fault the data in page by page; here each tensor is cut into
stripes, one per part file, which threads write and read in parallel (writes to one file are
serialised by the kernel, writes to several are not), each through its own pinned buffer to or
from the device. Reading executes nothing, and every field of a header that an untrusted
process wrote is checked before any byte is trusted.

Layout: PATH holds MAGIC, an 8-byte little-endian header length and the JSON header; PATH.p0,
PATH.p1, ... hold the stripes. The header holds the value tree ({"t": i} a tensor, {"v": x} a
plain value, {"l": [...]} a list, {"u": [...]} a tuple) and, per tensor, its dtype, shape, nbytes
and stripes [part, offset, nbytes]. Parts are written before PATH appears (atomically), so a
reader that finds PATH finds them complete.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

MAGIC = b"KGTF2\n"
ALIGN = 4096
STAGE_BYTES = 32 << 20  # per thread: the pinned buffer a stripe streams through
PARTS = 16  # threads per file: the fastest of 4, 8 and 16 on an H100 box (tensorfile_io.py)
MAX_HEADER = 16 << 20
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64,
        torch.complex128, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
        torch.bool,
    )
}  # fmt: skip
PLAIN = (int, float, bool, str, type(None))


class TensorFileError(ValueError):
    """A file that is not a well-formed tensor file (e.g. a hostile candidate's)."""


def save_values(values: Any, path: Path) -> None:
    """Write a tree of tensors (on any device) and plain values, atomically."""
    tensors: list[torch.Tensor] = []
    tree = _encode(values, tensors)
    flats = [_bytes_view(t.contiguous()) for t in tensors]
    ends = [0] * PARTS
    entries, jobs = [], [[] for _ in range(PARTS)]
    for t, flat in zip(tensors, flats, strict=True):
        stripes = []
        for part, (start, n) in enumerate(_stripes(flat.numel())):
            stripes.append([part, ends[part], n])
            jobs[part].append((flat, start, n, ends[part]))
            ends[part] = _aligned(ends[part] + n)
        entries.append({"dtype": _dtype_name(t), "shape": list(t.shape),
                        "nbytes": flat.numel(), "stripes": stripes})  # fmt: skip
    _in_parallel(lambda part: _write_part(_part(path, part), jobs[part], ends[part]))
    head = json.dumps({"values": tree, "tensors": entries}).encode()
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(MAGIC + struct.pack("<Q", len(head)) + head)
    os.replace(tmp, path)


def load_values(path: Path, device: str = "cpu") -> Any:
    """Read a tensor file onto `device`; raises TensorFileError for a malformed one."""
    header = _read_header(path)
    sizes = [_size(_part(path, part)) for part in range(PARTS)]
    outs, jobs = [], [[] for _ in range(PARTS)]
    for entry in header["tensors"]:
        _check_entry(entry, sizes)
        out = torch.empty(entry["shape"], dtype=DTYPES[entry["dtype"]], device=device)
        flat, start = _bytes_view(out), 0
        for part, offset, n in entry["stripes"]:
            jobs[part].append((flat, start, n, offset))
            start += n
        outs.append(out)
    _in_parallel(lambda part: _read_part(_part(path, part), jobs[part]))
    return _decode(header["values"], outs)


def _stripes(nbytes: int) -> list[tuple[int, int]]:
    """(start, length) of each stripe: one per part, or fewer for a small tensor."""
    count = max(1, min(PARTS, -(-nbytes // STAGE_BYTES)))
    bounds = [nbytes * i // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1] - bounds[i]) for i in range(count)]


def _write_part(path: Path, jobs: list, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
        fd, buffer = f.fileno(), None
        for flat, start, n, offset in jobs:
            for done in range(0, n, STAGE_BYTES):
                chunk = flat[start + done : start + min(n, done + STAGE_BYTES)]
                if chunk.device.type != "cpu":
                    buffer = buffer if buffer is not None else _pinned()
                    chunk = buffer[: chunk.numel()].copy_(chunk)
                _pwrite_all(fd, memoryview(chunk.numpy()), offset + done)


def _read_part(path: Path, jobs: list) -> None:
    if not jobs:
        return
    with open(path, "rb") as f:
        fd, buffer = f.fileno(), None
        for flat, start, n, offset in jobs:
            for done in range(0, n, STAGE_BYTES):
                target = flat[start + done : start + min(n, done + STAGE_BYTES)]
                if target.device.type == "cpu":
                    _pread_all(fd, memoryview(target.numpy()), offset + done)
                    continue
                buffer = buffer if buffer is not None else _pinned()
                staged = buffer[: target.numel()]
                _pread_all(fd, memoryview(staged.numpy()), offset + done)
                target.copy_(staged)


def _pinned() -> torch.Tensor:
    return torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True)


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(PARTS, thread_name_prefix="tensorfile")


def _in_parallel(job) -> None:
    list(_pool().map(job, range(PARTS)))


def _part(path: Path, part: int) -> Path:
    return path.with_name(f"{path.name}.p{part}")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _encode(value: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        tensors.append(value.detach())
        return {"t": len(tensors) - 1}
    if isinstance(value, list | tuple):
        return {"l" if isinstance(value, list) else "u": [_encode(v, tensors) for v in value]}
    if isinstance(value, PLAIN) and not (isinstance(value, float) and value != value):
        return {"v": value}
    if isinstance(value, float):  # NaN: JSON has no literal for it
        return {"f": repr(value)}
    raise TypeError(f"cannot store a {type(value).__name__}: only tensors and plain values")


def _decode(node: Any, tensors: list[torch.Tensor]) -> Any:
    if not isinstance(node, dict) or len(node) != 1:
        raise TensorFileError("malformed value tree")
    ((kind, body),) = node.items()
    if kind == "t":
        if not isinstance(body, int) or not 0 <= body < len(tensors):
            raise TensorFileError("tensor index out of range")
        return tensors[body]
    if kind in ("l", "u") and isinstance(body, list):
        items = [_decode(v, tensors) for v in body]
        return items if kind == "l" else tuple(items)
    if kind == "v" and isinstance(body, PLAIN):
        return body
    if kind == "f" and body in ("nan", "inf", "-inf"):
        return float(body)
    raise TensorFileError(f"unknown value kind {kind!r}")


def _read_header(path: Path) -> dict:
    with open(path, "rb") as f:
        start = f.read(len(MAGIC) + 8)
        if len(start) != len(MAGIC) + 8 or not start.startswith(MAGIC):
            raise TensorFileError("not a kernelgraph tensor file")
        (length,) = struct.unpack("<Q", start[len(MAGIC) :])
        if length > MAX_HEADER:
            raise TensorFileError("header too large")
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise TensorFileError(f"unreadable header: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise TensorFileError("header lists no tensors")
    return header


def _check_entry(entry: Any, sizes: list[int]) -> None:
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise TensorFileError("unknown tensor dtype")
    shape, nbytes, stripes = entry.get("shape"), entry.get("nbytes"), entry.get("stripes")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise TensorFileError("bad tensor shape")
    numel = 1
    for n in shape:
        numel *= n
    if nbytes != numel * DTYPES[entry["dtype"]].itemsize or not isinstance(stripes, list):
        raise TensorFileError("tensor size does not match its shape")
    total = 0
    for stripe in stripes:
        ok = isinstance(stripe, list) and len(stripe) == 3
        ok = ok and all(isinstance(v, int) and v >= 0 for v in stripe)
        if not ok or stripe[0] >= PARTS:
            raise TensorFileError("bad stripe")
        part, offset, n = stripe
        if offset + n > sizes[part]:
            raise TensorFileError("tensor data runs past the end of its part file")
        total += n
    if total != nbytes:
        raise TensorFileError("tensor size does not match its shape")


def _pread_all(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if not got:
            raise TensorFileError("tensor data ends early")
        done += got


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        done += os.pwritev(fd, [view[done:]], offset + done)


def _bytes_view(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


def _dtype_name(t: torch.Tensor) -> str:
    name = str(t.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise TypeError(f"cannot store a tensor of dtype {name}")
    return name


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
