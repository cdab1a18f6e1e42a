"""`--model replay:RUN` (`--replay RUN`): answers from another run's recorded exchanges.

Answers are keyed by prompt hash: the k-th time this run asks a prompt it gets the k-th reply
the recorded run got to it (the last one when it got fewer). A recorded branch also answers
from the runs it was branched from (its first calls were made there). No endpoint is
contacted; timings and evaluations are measured afresh. The recorded run must have run with
`--record`.
"""

from __future__ import annotations

from pydantic import BaseModel

from kernelgraph.nodes.llm.chat import CallInfo, ChatReply, Message, Method
from kernelgraph.nodes.llm.errors import ModelConfigError, ReplayMissing
from kernelgraph.state.llm_calls import count_replied, has_recorded_calls, recorded_replies
from kernelgraph.state.store import RunStore

MAX_LINEAGE = 32


def lineage(store: RunStore, run_id: str) -> list[str]:
    """The run, then the run it was branched from, and so on."""
    runs = [run_id]
    row = store.get_run(run_id)
    while row and row.get("parent_run_id") and len(runs) < MAX_LINEAGE:
        if row["parent_run_id"] in runs:
            break
        runs.append(row["parent_run_id"])
        row = store.get_run(row["parent_run_id"])
    return runs


class ReplayChat:
    free = True
    simulated = True
    structured_methods: tuple[Method, ...] = ()

    def __init__(self, name: str, source: str, store: RunStore, run_id: str) -> None:
        self.name = name
        self.source = source
        self.store = store
        self.run_id = run_id
        if not source:
            raise ModelConfigError(
                "--replay needs the id of a recorded run (see kernelgraph runs)."
            )
        if source == run_id:
            raise ModelConfigError(f"run {run_id} cannot replay itself; replay it from a new run.")
        if store.get_run(source) is None:
            raise ModelConfigError(
                f"there is no run {source} to replay in {store.path} (see kernelgraph runs)."
            )
        if not has_recorded_calls(store, source):
            raise ModelConfigError(
                f"run {source} did not record its LLM exchanges, so it cannot be replayed: "
                "record a run with --record first."
            )
        self.answers: dict[str, list[dict]] = {}
        for run in reversed(lineage(store, source)):  # a branch's ancestors answered first
            for sha, rows in recorded_replies(store, run).items():
                self.answers.setdefault(sha, []).extend(rows)

    def describe(self) -> str:
        return f"replay of {self.source}"

    def complete(
        self,
        messages: list[Message],
        call: CallInfo,
        schema: type[BaseModel] | None = None,
        method: Method = "text",
    ) -> ChatReply:
        rows = self.answers.get(call.prompt_sha)
        if not rows:
            raise ReplayMissing(
                f"{call.node}: the recording of {self.source} has no answer for this prompt "
                f"(hash {call.prompt_sha[:12]}): the prompts changed since {self.source} was "
                "recorded. Run with a model instead, or record a new run."
            )
        k = count_replied(self.store, self.run_id, call.prompt_sha)
        row = rows[min(k, len(rows) - 1)]
        text = self.store.get_blob(row["reply_sha"])
        if text is None:
            raise ReplayMissing(
                f"{call.node}: the reply recorded by {self.source} for prompt "
                f"{call.prompt_sha[:12]} is missing from the store."
            )
        finish = "length" if (row.get("error") or "").startswith("truncated") else "stop"
        return ChatReply(text, finish, row.get("tokens_in"), row.get("tokens_out"))
