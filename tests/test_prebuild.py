"""Configurations compiled ahead (nodes/prebuild.py): the queue, what the builtin will write
next, and the compiler node finding a configuration already compiled."""

from __future__ import annotations

import threading

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.nodes.brain import BuiltinBrain
from kernelgraph.nodes.checks import compile_ahead, compile_gate
from kernelgraph.nodes.context import RunContext
from kernelgraph.nodes.prebuild import Prebuilder
from kernelgraph.state.config import RunConfig
from kernelgraph.state.store import RunStore
from kernelgraph.tools.builtin.model import BuiltinModel
from kernelgraph.tools.harness.cache import EvalCache


def test_a_key_is_compiled_once_and_a_failed_build_leaves_the_queue_working():
    prebuilder = Prebuilder(1)
    release, ran = threading.Event(), []

    def slow():
        release.wait(30)
        ran.append("slow")

    def broken():
        raise RuntimeError("a compile check that fails")

    assert prebuilder.submit("a", slow)
    assert not prebuilder.submit("a", slow)  # queued already: not twice
    assert prebuilder.submit("b", broken)
    assert prebuilder.submit("c", lambda: ran.append("c"))
    release.set()
    prebuilder.wait("c", 30)
    assert ran == ["slow", "c"]
    assert not Prebuilder(0).submit("d", slow)  # --prebuild 0


@pytest.fixture
def conv_task(tmp_path):
    return task_file(tmp_path, "torch.relu(self.c(x))", "torch.randn(2, 16, 9, 9)",
                     params="self.c = nn.Conv2d(16, 8, 3)")  # fmt: skip


def test_upcoming_lists_what_code_writes_next_in_order(tmp_path, conv_task):
    """Compiling ahead is only worth it if the guess is right: while no config beats another,
    the builtin writes exactly the files `upcoming` named, in that order."""
    gen = builtin_generator(conv_task, "triton", tmp_path, device="cuda")
    model = BuiltinModel()
    model.generator = lambda context: gen  # noqa: ARG005 - the same program every call
    ahead = model.upcoming({}, [], None, 4)
    written: list[str] = []
    for _ in range(4):
        written.append(model.code({}, written, None))
    assert ahead == written and len(set(written)) == 4
    after = model.upcoming({}, written[:1], written[0], 2)  # once the default verified
    assert after[0] == model.code({}, written[:1], written[0]) and len(set(after)) == 2


@pytest.fixture
def gpu_run(tmp_path, conv_task, monkeypatch):
    """A run context for a GPU, whose compile step is recorded instead of run (this box has
    no GPU); the harness is not involved."""
    compiled: list[str] = []

    def fake_compile(ctx, kernel, target):
        compiled.append(kernel.read_text())
        return {"ok": True, "target": target}

    monkeypatch.setattr("kernelgraph.nodes.checks._compile", fake_compile)
    monkeypatch.setattr("kernelgraph.tools.dsl.base.local_cuda_target", lambda: "sm_90a")
    store = RunStore(tmp_path / "db.sqlite")
    config = RunConfig(task_path=str(conv_task), dsl="triton", device="cuda", prebuild=2)
    run_id = store.create_run("run", str(conv_task), "hash", "triton", "cuda")

    ctx = RunContext(config=config, store=store, run_id=run_id,
                     brain=BuiltinBrain(store, run_id), artifacts=tmp_path / "run",
                     eval_cache=EvalCache(tmp_path / "cache"), prebuilder=Prebuilder(2))  # fmt: skip
    yield ctx, compiled
    store.close()


def test_the_compiler_node_finds_a_configuration_compiled_ahead(gpu_run, conv_task, tmp_path):
    ctx, compiled = gpu_run
    gen = builtin_generator(conv_task, "triton", tmp_path, device="cuda")
    model = BuiltinModel()
    model.generator = lambda context: gen  # noqa: ARG005
    codes = model.upcoming({}, [], None, 2)
    assert compile_ahead(ctx, codes, min_bytes=1 << 20) == 2
    for code in codes:
        candidate = ctx.store.add_candidate(code, "triton", run_id=ctx.run_id)
        assert compile_gate(ctx, candidate) is None
    assert sorted(compiled) == sorted(codes)  # each compiled once, ahead; none again
    assert compile_ahead(ctx, codes, min_bytes=1 << 20) == 0  # their reports are cached


def test_nothing_is_compiled_ahead_where_the_inputs_could_crowd_the_device(gpu_run):
    ctx, compiled = gpu_run
    assert compile_ahead(ctx, ["# big\n"], min_bytes=5 << 30) == 0
    assert compile_ahead(ctx, ["# unknown size\n"], min_bytes=None) == 0
    assert compiled == []
