"""The run summary: the one JSON object `--json` prints for run, resume, branch and review."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Status = Literal["verified", "no_verified_kernel", "task_error", "awaiting_approval", "interrupted"]
# 2: the task cannot be used (nothing to resume); 3: a resumable stop
EXIT_CODES = {
    "verified": 0,
    "no_verified_kernel": 1,
    "task_error": 2,
    "awaiting_approval": 3,
    "interrupted": 3,
}
FINISHED = ("verified", "no_verified_kernel", "task_error")  # resume refuses these


class BestKernel(BaseModel):
    candidate_id: str
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    sol_pct: float | None = None
    path: str | None = None


class Spend(BaseModel):
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float | None = 0.0


class RunSummary(BaseModel):
    run_id: str
    status: Status
    stop_reason: str | None = None
    best: BestKernel | None = None
    spend: Spend = Spend()
    message: str = ""  # what happened and what to do next, for people
    exit_code: int | None = None  # overrides the status's code (e.g. 2 for a bad key)

    def code(self) -> int:
        return self.exit_code if self.exit_code is not None else EXIT_CODES[self.status]

    def contract(self) -> dict:
        """Exactly the documented fields (plus `message`)."""
        return self.model_dump(exclude={"exit_code"})


STOP_MESSAGES = {
    "near_sol": "the best kernel is near the speed of light",
    "plateau": "refinement stopped improving",
    "max_iterations": "the iteration limit was reached",
    "retries_exhausted": "candidates kept failing after every new sketch",
    "budget_usd": "the USD budget is spent",
    "max_llm_calls": "the LLM call budget is spent",
    "max_minutes": "the time budget is spent",
    "bad_reply": "the model's replies could not be used",
    "tuned": "every tuning configuration next to the best kernel was tried",
    "builtin_unsupported": "the builtin model cannot write this task",
}


def sentences(*parts: str) -> str:
    """Parts joined into one message with one full stop between them (an error's own text may
    end with one already); the last part keeps its end, so a command there copies cleanly."""
    texts = [p.strip() for p in parts if p and p.strip()]
    ended = [t if t.endswith((".", "!", "?")) else t + "." for t in texts[:-1]]
    return " ".join([*ended, *texts[-1:]])
