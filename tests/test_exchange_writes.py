"""Two writers of one cache key (two runs analysing the same task at once) both succeed, and a
reader sees one whole file: each writer renames its own temporary file into place."""

from __future__ import annotations

import threading

from kernelgraph.tools.harness.exchange import read_json, write_json


def test_concurrent_writers_of_one_key_never_fail(tmp_path):
    path = tmp_path / "analysis-key.json"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        start.wait()
        try:
            for i in range(300):
                write_json(path, {"writer": n, "i": i, "pad": "x" * 2000})
        except BaseException as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert read_json(path)["i"] == 299
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
