"""The timing slot is per physical GPU: bench workers on different GPUs never wait for each
other, processes on the same GPU always do."""

from __future__ import annotations

import fcntl

import pytest

from kernelgraph.tools.device_slot import device_slot, physical_device


@pytest.mark.parametrize(
    ("device", "visible", "expected"),
    [
        ("cpu", "1", "cpu"),
        ("cuda", None, "cuda-0"),
        ("cuda:0", None, "cuda-0"),
        ("cuda:1", None, "cuda-1"),
        ("cuda", "1", "cuda-1"),
        ("cuda:0", "3,2", "cuda-3"),
        ("cuda:1", "3, 2", "cuda-2"),
        ("cuda:0", "GPU-8e1f", "cuda-GPU-8e1f"),
    ],
)
def test_the_slot_is_named_after_the_physical_gpu(monkeypatch, device, visible, expected):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert physical_device(device) == expected


def _lock_is_free(path) -> bool:
    with open(path, "a+") as other:  # a second open file description, as another process has
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other, fcntl.LOCK_UN)
        return True


def test_workers_on_two_gpus_hold_two_slots(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with device_slot("cuda:0", exclusive=True):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        assert _lock_is_free(tmp_path / "slots" / "cuda-1.lock")
        assert not _lock_is_free(tmp_path / "slots" / "cuda-0.lock")
