"""The builtin model in a parallel search: lanes from one parent write different files, and an
island with nothing verified starts from its own seeded configuration."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.model import BuiltinModel, NothingToTry, start_config
from kernelgraph.tools.builtin.module import read_config


@pytest.fixture
def model(tmp_path) -> BuiltinModel:
    task = task_file(tmp_path, "torch.relu(self.c(x))", "torch.randn(2, 16, 9, 9)",
                     params="self.c = nn.Conv2d(16, 8, 3)")  # fmt: skip
    gen = builtin_generator(task, "triton", tmp_path, device="cuda")
    built = BuiltinModel()
    built.generator = lambda context: gen  # noqa: ARG005 - the same program every call
    return built


def test_lanes_of_one_parent_take_the_next_files_in_turn(model) -> None:
    default = model.code({}, [], None)
    picks = [model.code({}, [default], default, pick) for pick in range(4)]
    assert picks == model.upcoming({}, [default], default, 4)
    assert len(set(picks)) == 4 and default not in picks
    with pytest.raises(NothingToTry):
        model.code({}, [default], default, 10_000)


def test_an_island_starts_from_its_own_seeded_config(model) -> None:
    default = read_config(model.code({}, [], None))
    island = read_config(model.code({"start": 1001}, [], None))
    assert island == read_config(model.code({"start": 1001}, [], None))  # seeded: reproducible
    starts = {str(read_config(model.code({"start": s}, [], None))) for s in range(1000, 1010)}
    assert len(starts) > 1  # seeds start in different places
    spaces = model.generator({}).tunables()
    for kernel, params in island.items():  # every value is one the space offers
        for param, value in params.items():
            if param in spaces.get(kernel, {}):
                assert value in spaces[kernel][param]
    assert start_config(default, spaces, 3) == start_config(default, spaces, 3)
    for kernel in default:  # precision stays at its default: wrong results are cured by it
        if "DOT" in default[kernel]:
            assert island[kernel]["DOT"] == default[kernel]["DOT"]
