"""The bench's warning when several big problems would write their references to a disk at
once (graph/bench/store_note.py): a level-1 bench stalled so on a 4-GPU box."""

from __future__ import annotations

import pytest

from kernelgraph.graph.bench import store_note

MOUNTS = """\
/dev/vda / ext4 rw 0 0
tmpfs /dev/shm tmpfs rw 0 0
/dev/vdb /data/big xfs rw 0 0
/dev/vdc /mnt/with\\040space ext4 rw 0 0
"""


@pytest.fixture
def mounts(tmp_path):
    path = tmp_path / "mounts"
    path.write_text(MOUNTS)
    return str(path)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/dev/shm/kernelgraph/refs", "tmpfs"),
        ("/data/big/cache", "xfs"),
        ("/data/bigger/cache", "ext4"),  # a mount point is a whole path component
        ("/mnt/with space/refs", "ext4"),
        ("/root/.cache/kernelgraph", "ext4"),
    ],
)
def test_filesystem_type_is_the_longest_mount_above_the_path(mounts, path, kind):
    assert store_note.filesystem_type(path, mounts) == kind


BIG = store_note.BIG_PEAK_BYTES


@pytest.mark.parametrize(
    ("peaks", "runs", "kind", "warned"),
    [
        ([BIG, BIG, 1 << 30], 8, "ext4", True),
        ([BIG, BIG], 4, None, True),  # unknown filesystem: say so
        ([BIG, BIG], 8, "tmpfs", False),  # the store is in memory
        ([BIG, 1 << 30, None], 8, "ext4", False),  # one big problem
        ([BIG, BIG, BIG], 3, "ext4", False),  # three runs at once
    ],
)
def test_the_note_names_the_store_and_the_fix(monkeypatch, tmp_path, peaks, runs, kind, warned):
    monkeypatch.setenv("KERNELGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(store_note, "filesystem_type", lambda path: kind)
    note = store_note.reference_store_note(peaks, runs)
    assert (note is not None) == warned
    if warned:
        assert str(tmp_path / "refs") in note and "KERNELGRAPH_CACHE_DIR" in note
