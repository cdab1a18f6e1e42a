"""The run config's harness settings: stored with the run, given to every evaluation, changed
by `branch --config`, and old stored configs still load."""

from __future__ import annotations

import pytest

from kernelgraph.state.config import RunConfig

OLD_STORED = {  # a config stored before max_host_gb, share_weights and no_cache existed
    "task_path": "task.py",
    "sets": {},
    "dsl": "cpp",
    "device": "cpu",
    "seeds": 3,
    "precision": "fp32",
    "policy": "strict",
    "timeout_s": 300.0,
    "threads": 0,
    "baseline_compile": False,
    "approve": False,
    "model": {"name": "builtin"},
    "limits": {"max_iterations": 12},
}


def test_new_fields_round_trip_through_the_stored_json() -> None:
    config = RunConfig(
        task_path="task.py", dsl="cpp", max_host_gb=6.5, share_weights=True, no_cache=True
    )
    again = RunConfig.model_validate(config.model_dump(mode="json"))
    assert again == config
    assert (again.max_host_gb, again.share_weights, again.no_cache) == (6.5, True, True)


def test_an_old_stored_config_loads_with_the_defaults() -> None:
    config = RunConfig.model_validate(OLD_STORED)
    assert (config.max_host_gb, config.share_weights, config.no_cache) == (None, False, False)


@pytest.mark.parametrize("profile", [True, False])
def test_every_evaluation_gets_the_memory_limit_and_weight_sharing(profile: bool) -> None:
    config = RunConfig(task_path="task.py", dsl="cpp", max_host_gb=4.0, share_weights=True)
    eval_config = config.eval_config(profile=profile)
    assert (eval_config.max_host_gb, eval_config.share_weights) == (4.0, True)


def test_branch_config_keys_change_the_new_settings() -> None:
    config = RunConfig.model_validate(OLD_STORED)
    changed = config.with_changes({"max_host_gb": 8, "share_weights": True, "no_cache": True})
    assert (changed.max_host_gb, changed.share_weights, changed.no_cache) == (8.0, True, True)


def test_a_memory_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_host_gb"):
        RunConfig(task_path="task.py", dsl="cpp", max_host_gb=0)
