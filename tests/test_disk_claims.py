"""Disk claims (tools/harness/disk_claims.py): reference builds running at once on one machine
count the disk the others will still write, so they cannot all pass the same free-space check."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from kernelgraph.tools.harness.disk_claims import check_and_claim, pending_bytes
from kernelgraph.tools.harness.memory import DeviceBusy, check_disk


@pytest.fixture
def store(tmp_path):
    for folder in ("inputs/a", "inputs/b", "expected/a", "expected/b"):
        (tmp_path / folder).mkdir(parents=True)
    return tmp_path


def _free(path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def _claim_by_another_build(store, key: str, claimed: int):
    """A claim as another live build holds it: the file, with its lock held."""
    (store / "claims").mkdir(exist_ok=True)
    handle = open(store / "claims" / f"{key}.json", "w")  # noqa: SIM115
    fcntl.flock(handle, fcntl.LOCK_EX)
    handle.write(json.dumps({"bytes": claimed}))
    handle.flush()
    return handle


def test_another_builds_unwritten_claim_counts_as_used_until_it_ends(store):
    free = _free(store)
    meta = {"input_bytes": free // 4, "output_bytes": 0}  # fits the disk by itself
    other = _claim_by_another_build(store, "b", free - free // 8)
    (store / "inputs" / "b" / "part").write_bytes(b"x" * 4096)  # what it wrote so far
    assert pending_bytes(store, exclude="a") == free - free // 8 - 4096
    with pytest.raises(DeviceBusy, match="other jobs' reference builds"):
        check_disk(meta, 1, [store / "inputs" / "a"])
    other.close()  # that build ended (or died): its claim holds no lock and counts nothing
    check_disk(meta, 1, [store / "inputs" / "a"])
    claim = store / "claims" / "a.json"
    assert json.loads(claim.read_text())["bytes"] >= free // 4
    assert pending_bytes(store, exclude="b") >= free // 4  # a's own claim now counts for others
    assert not (store / "claims" / "b.json").exists()  # the dead claim was cleared


def test_a_folder_outside_a_store_is_checked_against_the_free_disk_alone(tmp_path):
    seen = []
    check_and_claim(tmp_path, 10, seen.append)
    assert seen == [_free(tmp_path)] or abs(seen[0] - _free(tmp_path)) < 1 << 24
    assert not (tmp_path.parent / "claims").exists()
