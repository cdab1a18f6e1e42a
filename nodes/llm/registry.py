"""Which chat model answers a model name: one table of name prefixes, the rest are endpoints.

    script:FILE   replies from a JSON script (nodes/llm/script.py)
    replay:RUN    answers recorded by another run in the same store (nodes/llm/replay.py)
    anything else a model name on an OpenAI-compatible endpoint (nodes/llm/openai_chat.py)

"builtin" is not a chat model: the caller handles it before asking here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from kernelgraph.nodes.llm.chat import ChatModel
from kernelgraph.nodes.llm.errors import ModelConfigError
from kernelgraph.nodes.llm.openai_chat import BASE_URL_VAR, OpenAIChat
from kernelgraph.nodes.llm.replay import ReplayChat
from kernelgraph.nodes.llm.script import ScriptChat
from kernelgraph.state.config import ModelConfig
from kernelgraph.state.store import RunStore


@dataclass(frozen=True)
class Setup:
    """What a factory may need: the full model name, its endpoint, the run."""

    name: str
    base_url: str | None
    model: ModelConfig
    store: RunStore
    run_id: str


def _script(arg: str, setup: Setup) -> ChatModel:
    if not arg:
        raise ModelConfigError("--model script:FILE needs the script's path after 'script:'.")
    return ScriptChat(setup.name, arg)


def _replay(arg: str, setup: Setup) -> ChatModel:
    return ReplayChat(setup.name, arg, setup.store, setup.run_id)


def _endpoint(name: str, setup: Setup) -> ChatModel:
    env = os.environ.get(BASE_URL_VAR) or os.environ.get("OPENAI_BASE_URL")  # the client's own
    return OpenAIChat(name, setup.base_url or env or None, setup.model)


PREFIXES: dict[str, Callable[[str, Setup], ChatModel]] = {
    "script:": _script,
    "replay:": _replay,
}


def make_chat(
    name: str, base_url: str | None, model: ModelConfig, store: RunStore, run_id: str
) -> ChatModel:
    setup = Setup(name, base_url, model, store, run_id)
    for prefix, factory in PREFIXES.items():
        if name.startswith(prefix):
            return factory(name[len(prefix) :], setup)
    return _endpoint(name, setup)
