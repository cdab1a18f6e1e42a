"""Shared test setup.

Every test session gets one kernelgraph cache directory of its own (evaluation verdicts, C++
builds, Triton kernels, measured CPU peaks), so tests never read or write ~/.cache and C++
builds are shared by all the evaluations of a session. `run_case` evaluates a task and a kernel
from tests/cases/ through the harness's Python API.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CASES = Path(__file__).resolve().parent / "cases"


_saved_environ: dict[str, str | None] = {}
_session_cache: Path | None = None
_owns_session_cache = False
SESSION_CACHE_VAR = "KERNELGRAPH_TEST_SESSION_CACHE"


def pytest_configure(config: pytest.Config) -> None:
    """Before collection, so that not even import-time code reaches ~/.cache. Under
    pytest-xdist the workers share the controller's cache, as a machine's runs share theirs."""
    global _session_cache, _owns_session_cache
    inherited = os.environ.get(SESSION_CACHE_VAR) if "PYTEST_XDIST_WORKER" in os.environ else None
    if inherited:
        _session_cache = Path(inherited)
    else:
        _session_cache = Path(tempfile.mkdtemp(prefix="kernelgraph-test-cache-"))
        _owns_session_cache = True
        _export(SESSION_CACHE_VAR, str(_session_cache))
    _export("KERNELGRAPH_CACHE_DIR", str(_session_cache))
    from kernelgraph.tools.harness.cache import shared_build_env

    for name, value in shared_build_env().items():  # build, Triton, inductor caches
        _export(name, value)


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, value in _saved_environ.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved_environ.clear()
    if _session_cache is not None and _owns_session_cache:
        shutil.rmtree(_session_cache, ignore_errors=True)


def _export(name: str, value: str) -> None:
    _saved_environ.setdefault(name, os.environ.get(name))
    os.environ[name] = value


@pytest.fixture(scope="session")
def kernelgraph_cache() -> Path:
    """This session's kernelgraph cache directory (evaluations, builds, CPU peaks)."""
    assert _session_cache is not None
    return _session_cache


@pytest.fixture(scope="session")
def analysed_cache(kernelgraph_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding only the CPU analysis of the agent tests' task (scale_add), for
    runs that need caches of their own (nothing evaluated before): they start from a copy of
    it instead of analysing the task again in a worker (seconds each). No verdict, no build,
    no reference: everything else the run does is done anew in its own cache."""
    from agent_helpers import TASK

    from kernelgraph.tools.analysis import analysis_cache_key, analyze_task
    from kernelgraph.tools.harness.cache import EvalCache
    from kernelgraph.tools.task import TaskSource

    task = TaskSource.read(TASK)
    analyze_task(task, "cpu", cache=EvalCache())  # the session's cache, as the runs' planner
    seed = tmp_path_factory.mktemp("analysed-cache")
    (seed / "evals").mkdir()
    name = f"{analysis_cache_key(task, 'cpu')}.json"
    shutil.copy(kernelgraph_cache / "evals" / name, seed / "evals" / name)
    return seed


@pytest.fixture(scope="session")
def cases() -> Path:
    return CASES


def case_path(kind: str, name: str | Path) -> Path:
    """A case by name ("scale_add") or an explicit path (a file a test wrote)."""
    return name if isinstance(name, Path) else CASES / kind / f"{name}.py"


@pytest.fixture(scope="session")
def run_case(tmp_path_factory: pytest.TempPathFactory):
    """evaluate(task, kernel) with a fresh verdict cache: it always runs (the task's reference
    store is shared by the session, as it is by the runs on a machine).

    Defaults suit this 2-core box: C++ on the CPU, two seeds, no timing. Keyword arguments
    override EvalConfig fields.
    """
    from kernelgraph.tools.harness.cache import EvalCache
    from kernelgraph.tools.harness.config import EvalConfig
    from kernelgraph.tools.harness.evaluate import evaluate

    def run(task: str | Path, kernel: str | Path, **overrides):
        settings = {"dsl": "cpp", "device": "cpu", "seeds": 2, "profile": False, **overrides}
        return evaluate(
            case_path("tasks", task),
            case_path("kernels", kernel),
            EvalConfig(**settings),
            cache=EvalCache(tmp_path_factory.mktemp("evals")),
        )

    return run


@pytest.fixture
def tensor_cores(monkeypatch):
    """The Triton backend as on a GPU, where fp32 products run on tensor cores."""
    from kernelgraph.tools.builtin.triton_backend import TritonBackend

    init = TritonBackend.__init__

    def on_gpu(self, device, precision):
        init(self, device, precision)
        self.k_major_operands = True

    monkeypatch.setattr(TritonBackend, "__init__", on_gpu)
