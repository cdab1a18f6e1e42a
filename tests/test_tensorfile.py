"""Tensor files: what the harness processes pass each other. Values round-trip exactly, and a
file written by a hostile candidate is refused before any of its bytes are trusted."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from tools.harness import tensorfile
from tools.harness.tensorfile import MAGIC, TensorFileError, load_values, save_values


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


def _write(path, header: dict, payload: bytes = b"") -> None:
    head = json.dumps(header).encode()
    path.write_bytes(MAGIC + struct.pack("<Q", len(head)) + head + payload)


@pytest.mark.parametrize(
    "header, match",
    [
        ({"values": {"t": 0}, "tensors": [{"dtype": "object", "shape": [1], "offset": 0,
                                            "nbytes": 8}]}, "dtype"),
        ({"values": {"t": 0}, "tensors": [{"dtype": "float32", "shape": [1 << 40],
                                            "offset": 0, "nbytes": 4 << 40}]}, "past the end"),
        ({"values": {"t": 0}, "tensors": [{"dtype": "float32", "shape": [4], "offset": 0,
                                            "nbytes": 4}]}, "does not match"),
        ({"values": {"t": 3}, "tensors": []}, "out of range"),
        ({"values": {"pickle": "os.system"}, "tensors": []}, "unknown value kind"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_refused(tmp_path, header, match):
    _write(tmp_path / "bad.tf", header, b"\0" * 64)
    with pytest.raises(TensorFileError, match=match):
        load_values(tmp_path / "bad.tf")


def test_a_file_that_is_not_a_tensor_file_is_refused(tmp_path):
    torch.save([torch.ones(2)], tmp_path / "pickled.pt")
    with pytest.raises(TensorFileError, match="not a kernelgraph tensor file"):
        load_values(tmp_path / "pickled.pt")


def test_objects_that_are_not_plain_values_cannot_be_stored(tmp_path):
    with pytest.raises(TypeError, match="only tensors and plain values"):
        save_values([object()], tmp_path / "o.tf")
