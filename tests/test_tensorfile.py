"""Tensor files: what the harness processes pass each other. Values round-trip exactly, and a
file written by a hostile candidate is refused before any of its bytes are trusted."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from kernelgraph.tools.harness import tensorfile
from kernelgraph.tools.harness.tensorfile import MAGIC, TensorFileError, load_values, save_values


@pytest.fixture
def small_stage(monkeypatch):
    monkeypatch.setattr(tensorfile, "STAGE_BYTES", 1000)  # many chunks, a ragged last one


def test_tensors_and_plain_values_round_trip(tmp_path, small_stage):
    values = [
        torch.randn(33, 17),
        torch.arange(10, dtype=torch.int64).reshape(2, 5).t(),  # not contiguous
        torch.tensor([True, False]),
        torch.randn(4, dtype=torch.float64).to(torch.bfloat16),
        torch.empty(0, 3),
        torch.tensor(2.5),
        3,
        0.5,
        float("nan"),
        None,
        "mean",
        (1, [2, 3]),
    ]
    save_values(values, tmp_path / "v.tf")
    back = load_values(tmp_path / "v.tf")
    assert len(back) == len(values)
    for got, want in zip(back[:6], values[:6], strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    assert back[6:8] == [3, 0.5] and back[8] != back[8] and back[9:11] == [None, "mean"]
    assert back[11] == (1, [2, 3])


def test_nan_payloads_and_every_byte_survive(tmp_path, small_stage):
    raw = torch.randint(0, 256, (5001,), dtype=torch.uint8)
    save_values([raw.view(torch.uint8)], tmp_path / "b.tf")
    assert torch.equal(load_values(tmp_path / "b.tf")[0], raw)


def _write(path, header: dict, part: bytes = b"") -> None:
    head = json.dumps(header).encode()
    path.write_bytes(MAGIC + struct.pack("<Q", len(head)) + head)
    path.with_name(path.name + ".p0").write_bytes(part)


def _one(dtype="float32", shape=(4,), nbytes=16, stripes=((0, 0, 16),)) -> dict:
    entry = {"dtype": dtype, "shape": list(shape), "nbytes": nbytes,
             "stripes": [list(s) for s in stripes]}  # fmt: skip
    return {"values": {"l": [{"t": 0}]}, "tensors": [entry]}


@pytest.mark.parametrize(
    "header, match",
    [
        (_one(dtype="object"), "dtype"),
        (_one(shape=(1 << 40,), nbytes=4 << 40, stripes=((0, 0, 4 << 40),)), "past the end"),
        (_one(nbytes=4), "does not match"),
        (_one(stripes=((0, 0, 8),)), "does not match"),
        (_one(stripes=((tensorfile.PARTS, 0, 16),)), "bad stripe"),
        (_one(stripes=((0, -4, 16),)), "bad stripe"),
        ({"values": {"t": 3}, "tensors": []}, "out of range"),
        ({"values": {"pickle": "os.system"}, "tensors": []}, "unknown value kind"),
    ],
)
def test_a_malformed_file_is_refused(tmp_path, header, match):
    _write(tmp_path / "bad.tf", header, b"\0" * 64)
    with pytest.raises(TensorFileError, match=match):
        load_values(tmp_path / "bad.tf")


def test_a_well_formed_handmade_file_reads(tmp_path):
    _write(tmp_path / "ok.tf", _one(), struct.pack("<4f", 1, 2, 3, 4))
    (got,) = load_values(tmp_path / "ok.tf")
    assert got.tolist() == [1, 2, 3, 4]


def test_large_tensors_are_striped_over_every_part(tmp_path, small_stage):
    big = torch.arange(10_000, dtype=torch.int32)
    save_values([big], tmp_path / "s.tf")
    parts = sorted(p.name for p in tmp_path.iterdir() if ".tf.p" in p.name)
    assert parts == sorted(f"s.tf.p{k}" for k in range(tensorfile.PARTS))
    assert all((tmp_path / p).stat().st_size > 0 for p in parts)
    assert torch.equal(load_values(tmp_path / "s.tf")[0], big)


def test_a_file_that_is_not_a_tensor_file_is_refused(tmp_path):
    torch.save([torch.ones(2)], tmp_path / "pickled.pt")
    with pytest.raises(TensorFileError, match="not a kernelgraph tensor file"):
        load_values(tmp_path / "pickled.pt")


def test_objects_that_are_not_plain_values_cannot_be_stored(tmp_path):
    with pytest.raises(TypeError, match="only tensors and plain values"):
        save_values([object()], tmp_path / "o.tf")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_tensors_round_trip(tmp_path, small_stage):
    """Many chunks per thread, a tensor computed just before the save, and a load into memory
    the harness fills with NaN when it is allocated: the copies must be ordered after both."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        source = torch.randn(1 << 16, device="cuda")
        value = source * 3 + 1  # queued on the caller's stream, maybe not run yet
        save_values([value], tmp_path / "d.tf")
        (back,) = load_values(tmp_path / "d.tf", "cuda")
        assert back.device.type == "cuda" and torch.equal(back, value)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = False
        torch.use_deterministic_algorithms(False)
