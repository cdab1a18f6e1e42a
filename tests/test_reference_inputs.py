"""Inputs are made on the evaluation's device, with a CPU fallback for get_inputs that need it.

The "meta" device stands in for a GPU here: it takes the same path (a torch.device context),
and a get_inputs that needs real host memory fails on it the way a numpy one fails on CUDA.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from kernelgraph.tools.harness import reference as ref


def _task(get_inputs):
    return SimpleNamespace(get_inputs=get_inputs)


def test_inputs_are_made_on_the_device():
    task = _task(lambda: [torch.rand(4, 8), torch.randint(0, 3, (4,))])
    inputs = ref.make_inputs(task, 7, "meta")
    assert [x.device.type for x in inputs] == ["meta", "meta"]
    assert [tuple(x.shape) for x in inputs] == [(4, 8), (4,)]


def test_a_get_inputs_that_needs_the_host_falls_back_to_the_cpu():
    task = _task(lambda: [torch.from_numpy(torch.rand(3, 5).numpy() * np.float32(2.0))])
    inputs = ref.make_inputs(task, 7, "meta")
    assert inputs[0].device.type == "cpu"
    assert torch.equal(inputs[0], ref.make_inputs(task, 7, "cpu")[0])


def test_the_fallback_restarts_the_seed():
    """Values after a fallback are those of a plain CPU call, not of a half-used generator."""
    calls = []

    def get_inputs():
        calls.append(1)
        x = torch.rand(6)
        if x.device.type == "meta":
            raise RuntimeError("needs host memory")
        return [x]

    task = _task(get_inputs)
    fell_back = ref.make_inputs(task, 11, "meta")[0]
    assert len(calls) == 2
    assert torch.equal(fell_back, ref.make_inputs(task, 11, "cpu")[0])


def test_an_error_on_the_cpu_too_is_the_one_raised():
    def get_inputs():
        raise ValueError("broken task")

    with pytest.raises(ValueError, match="broken task"):
        ref.make_inputs(_task(get_inputs), 1, "meta")
