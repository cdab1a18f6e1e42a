"""Values between harness processes: tensors as raw bytes behind a JSON header. Torch only.

Inputs, reference outputs and a candidate's outputs can each be gigabytes. torch.save/torch.load
go through pickle and, with mmap, fault the data in page by page; here a tensor streams between
the file and the device through two pinned staging buffers, so the copy runs near the speed of
memory. The format executes nothing when read, and every field of a header written by an
untrusted process is checked before any byte is trusted.

Layout: MAGIC, an 8-byte little-endian header length, the JSON header, then each tensor's bytes
at a 4096-aligned offset. The header holds the value tree ({"t": i} a tensor, {"v": x} a plain
value, {"l": [...]} a list, {"u": [...]} a tuple) and, per tensor, dtype, shape, offset, nbytes.
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

MAGIC = b"KGTF1\n"
ALIGN = 4096
STAGE_BYTES = 32 << 20
THREADS = 4
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
    entries = [
        {"dtype": _dtype_name(t), "shape": list(t.shape), "nbytes": t.numel() * t.element_size(),
         "offset": 10**15}  # the widest offset, so the real header is no longer than this
        for t in tensors
    ]  # fmt: skip
    header = {"values": tree, "tensors": entries}
    offset = _aligned(len(MAGIC) + 8 + len(json.dumps(header).encode()))
    for entry in entries:
        entry["offset"] = offset
        offset = _aligned(offset + entry["nbytes"])
    head = json.dumps(header).encode()
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(head)) + head)
        f.truncate(offset)
        stage = _Stage()
        for t, entry in zip(tensors, entries, strict=True):
            _write_tensor(f, t, entry["offset"], stage)
    os.replace(tmp, path)


def load_values(path: Path, device: str = "cpu") -> Any:
    """Read a tensor file onto `device`; raises TensorFileError for a malformed one."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        header = _read_header(f, size)
        stage = _Stage()
        tensors = [_read_tensor(f, entry, device, stage) for entry in header["tensors"]]
    return _decode(header["values"], tensors)


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


def _read_header(f, size: int) -> dict:
    start = f.read(len(MAGIC) + 8)
    if len(start) != len(MAGIC) + 8 or not start.startswith(MAGIC):
        raise TensorFileError("not a kernelgraph tensor file")
    (length,) = struct.unpack("<Q", start[len(MAGIC) :])
    if length > MAX_HEADER:
        raise TensorFileError("header too large")
    try:
        header = json.loads(f.read(length))
    except ValueError as exc:
        raise TensorFileError(f"unreadable header: {exc}") from exc
    entries = header.get("tensors") if isinstance(header, dict) else None
    if not isinstance(entries, list):
        raise TensorFileError("header lists no tensors")
    for entry in entries:
        _check_entry(entry, size)
    return header


def _check_entry(entry: Any, size: int) -> None:
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise TensorFileError("unknown tensor dtype")
    shape, offset, nbytes = entry.get("shape"), entry.get("offset"), entry.get("nbytes")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise TensorFileError("bad tensor shape")
    numel = 1
    for n in shape:
        numel *= n
    itemsize = DTYPES[entry["dtype"]].itemsize
    if nbytes != numel * itemsize or not isinstance(offset, int) or offset < 0:
        raise TensorFileError("tensor size does not match its shape")
    if offset + nbytes > size:
        raise TensorFileError("tensor data runs past the end of the file")


class _Stage:
    """Pinned host buffers, filled (or drained) by several threads at once while the device
    copies the previous batch: page-cache reads and writes run at several GB/s per thread."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(THREADS)
        self.done: Any = None  # an event after the last batch's copies

    @functools.cached_property
    def buffers(self) -> list[torch.Tensor]:  # only a device transfer needs them
        return [
            torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True) for _ in range(THREADS)
        ]

    def wait(self) -> None:
        if self.done is not None:
            self.done.synchronize()

    def mark(self) -> None:
        self.done = torch.cuda.Event()
        self.done.record()

    def run(self, io, jobs: list[tuple[memoryview, int]], fd: int) -> None:
        list(self.pool.map(lambda job: io(fd, *job), jobs))


def _batches(total: int) -> list[list[tuple[int, int, int]]]:
    """(buffer index, byte start, length) chunks, in batches of one chunk per buffer."""
    chunks = [(start, min(STAGE_BYTES, total - start)) for start in range(0, total, STAGE_BYTES)]
    return [
        [(k, start, n) for k, (start, n) in enumerate(chunks[i : i + THREADS])]
        for i in range(0, len(chunks), THREADS)
    ]


def _host_jobs(flat: torch.Tensor, offset: int) -> list[tuple[memoryview, int]]:
    view = memoryview(flat.numpy())
    return [(view[s : s + n], offset + s) for batch in _batches(flat.numel()) for _, s, n in batch]


def _write_tensor(f, tensor: torch.Tensor, offset: int, stage: _Stage) -> None:
    flat = _bytes_view(tensor.contiguous())
    if flat.device.type == "cpu":
        stage.run(_pwrite_all, _host_jobs(flat, offset), f.fileno())
        return
    for batch in _batches(flat.numel()):
        for k, start, n in batch:
            stage.buffers[k][:n].copy_(flat[start : start + n], non_blocking=True)
        torch.cuda.current_stream().synchronize()
        jobs = [(memoryview(stage.buffers[k][:n].numpy()), offset + s) for k, s, n in batch]
        stage.run(_pwrite_all, jobs, f.fileno())


def _read_tensor(f, entry: dict, device: str, stage: _Stage) -> torch.Tensor:
    out = torch.empty(entry["shape"], dtype=DTYPES[entry["dtype"]], device=device)
    flat = _bytes_view(out)
    offset = entry["offset"]
    if device == "cpu":
        stage.run(_pread_all, _host_jobs(flat, offset), f.fileno())
        return out
    for batch in _batches(flat.numel()):
        stage.wait()  # the buffers' previous copies to the device are done
        jobs = [(memoryview(stage.buffers[k][:n].numpy()), offset + s) for k, s, n in batch]
        stage.run(_pread_all, jobs, f.fileno())
        for k, start, n in batch:
            flat[start : start + n].copy_(stage.buffers[k][:n], non_blocking=True)
        stage.mark()
    stage.wait()
    return out


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
