"""Taking code and JSON out of model replies: fences, prose, truncation, edits."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kernelgraph.nodes.llm.extract import (
    Edit,
    ReplyProblem,
    apply_edits,
    code_answer,
    extract_code,
    fenced_blocks,
    parse_edits,
)
from kernelgraph.nodes.llm.structured import first_json_object, parse_json, with_instruction

MODEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
HELPER = "def helper(x):\n    return x + 1\n"


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def problem_kind(fn, *args) -> str:
    with pytest.raises(ReplyProblem) as info:
        fn(*args)
    assert info.value.feedback  # always something to tell the model
    return info.value.kind


# --- whole files -------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["python", "py", "", "Python", "python3"])
def test_fenced_block_of_any_python_label(lang: str) -> None:
    assert extract_code(f"Here it is:\n{fence(MODEL, lang)}\nDone.") == MODEL


def test_block_defining_model_new_wins_over_a_longer_one() -> None:
    long_other = HELPER * 20
    reply = f"{fence(long_other)}\n\nand the answer:\n{fence(MODEL)}\n{fence('x = 1')}"
    assert extract_code(reply) == MODEL


def test_the_longest_of_several_model_new_blocks() -> None:
    bigger = MODEL + "\n\nBLOCK = 1024\n"
    reply = f"Draft:\n{fence(MODEL)}\nFinal:\n{fence(bigger)}"
    assert extract_code(reply) == bigger


def test_model_new_in_a_block_labelled_otherwise() -> None:
    assert extract_code(fence(MODEL, "cpp")) == MODEL


def test_reply_that_is_only_code() -> None:
    assert extract_code(MODEL) == MODEL


def test_unfenced_code_with_prose_around_it() -> None:
    reply = f"Sure! Here is a faster version.\n\n{MODEL}\nThis fuses the two ops into one pass."
    assert extract_code(reply) == MODEL


def test_unfenced_code_keeps_comments_and_decorators() -> None:
    code = "# fast kernel\nimport torch\n\n@torch.no_grad()\n" + MODEL.split("\n", 1)[1]
    assert extract_code(code).startswith("# fast kernel\nimport torch")


@pytest.mark.parametrize(
    "reply, finish",
    [
        ("```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def f", None),
        (fence(MODEL), "length"),
        (f"{fence(MODEL)}\n\nNow a second version:\n```python\nimport tor", None),
    ],
    ids=["unclosed-fence", "finish-length", "second-block-cut"],
)
def test_truncated_replies(reply: str, finish: str | None) -> None:
    with pytest.raises(ReplyProblem) as info:
        extract_code(reply, finish)
    assert info.value.kind == "truncated"
    assert "cut off" in info.value.feedback and "complete file" in info.value.feedback


@pytest.mark.parametrize(
    "reply, kind",
    [
        (fence(HELPER), "no_model_new"),
        (HELPER, "no_model_new"),
        ("class Model(torch.nn.Module):\n    pass\n", "no_model_new"),
        ("I would write a fast kernel here.", "no_code"),
        (fence("int main() {}", "cpp"), "no_code"),
        ("", "no_code"),
    ],
)
def test_unusable_replies(reply: str, kind: str) -> None:
    assert problem_kind(extract_code, reply) == kind


def test_model_new_feedback_names_the_class() -> None:
    with pytest.raises(ReplyProblem) as info:
        extract_code(fence(HELPER))
    assert "class ModelNew" in info.value.feedback


@pytest.mark.parametrize(
    "wrap",
    [
        "<think>A draft first:\n{draft}\nNow the real one.</think>\nHere it is:\n{final}",
        "<Thinking>{draft}</Thinking>{final}",
        "The template opened the tag in the prompt. {draft}\n</think>\n\n{final}",
    ],
    ids=["think", "thinking", "closing_tag_only"],
)
def test_a_reasoning_models_drafts_are_not_the_answer(wrap: str) -> None:
    """Reasoning models served without a reasoning parser think in the reply; a longer draft
    there must not win over the answer after it."""
    draft = fence(MODEL + "\n# a longer draft\n" + HELPER * 5)
    assert code_answer(wrap.format(draft=draft, final=fence(MODEL))) == (MODEL, "rewrite")


def test_a_reply_cut_off_while_thinking_has_no_code() -> None:
    assert problem_kind(code_answer, f"<think>Let me see.\n{fence(MODEL)}\nHmm") == "no_code"


def test_fenced_blocks_reports_languages_and_closure() -> None:
    blocks = fenced_blocks("a\n```py\nx = 1\n```\ntext\n````\ny\n```\nstill y\n````\n```cpp\nz")
    assert [(b.lang, b.code, b.closed) for b in blocks] == [
        ("py", "x = 1", True),
        ("", "y\n```\nstill y", True),
        ("cpp", "z", False),
    ]


# --- edits -------------------------------------------------------------------------------

CURRENT = MODEL + "\n\ndef scale(x):\n    return x * 2\n"


def edit_block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def test_edits_apply_in_order() -> None:
    reply = (
        "Two changes:\n"
        + edit_block("    return x * 2", "    return x * 3")
        + "\n\nand\n\n"
        + edit_block("    return x * 3", "    return x * 4  # again")
    )
    code, kind = code_answer(reply, "stop", CURRENT)
    assert kind == "edit"
    assert code == CURRENT.replace("return x * 2", "return x * 4  # again")


def test_edits_inside_a_fence() -> None:
    reply = fence(edit_block("def scale(x):", "def scale(x, k=2):"))
    code, kind = code_answer(reply, None, CURRENT)
    assert kind == "edit" and "def scale(x, k=2):" in code


def test_edit_match_ignores_trailing_whitespace() -> None:
    current = CURRENT.replace("    return x * 2", "    return x * 2   ")
    code, _ = code_answer(edit_block("    return x * 2", "    return x + x"), None, current)
    assert "return x + x" in code and "x * 2" not in code


def test_edit_with_empty_replacement_deletes_lines() -> None:
    code = apply_edits("a\nb\nc\n", [Edit("b", "")])
    assert code == "a\nc\n"


def test_multiline_edit_keeps_the_rest_of_the_file() -> None:
    code = apply_edits(CURRENT, [Edit("def scale(x):\n    return x * 2", "SCALE = 2")])
    assert code == MODEL + "\n\nSCALE = 2\n"


@pytest.mark.parametrize(
    "search, why",
    [
        ("    return x * 5", "not in the current file"),
        ("        return x", "match 2 places"),
        ("  ", "empty"),
    ],
    ids=["not-found", "ambiguous", "empty"],
)
def test_edits_that_do_not_apply(search: str, why: str) -> None:
    current = CURRENT + "\nclass Other:\n    def forward(self, x):\n        return x\n"
    reply = edit_block("def scale(x):", "def scale(y):") + "\n" + edit_block(search, "pass")
    with pytest.raises(ReplyProblem) as info:
        code_answer(reply, None, current)
    assert info.value.kind == "edit_failed"
    assert "Edit block 2" in info.value.feedback and why in info.value.feedback
    assert "whole file" in info.value.feedback


def test_edits_that_remove_model_new_are_refused() -> None:
    reply = edit_block("class ModelNew(torch.nn.Module):", "class Renamed(torch.nn.Module):")
    assert problem_kind(code_answer, reply, None, CURRENT) == "no_model_new"


def test_edits_cut_off_mid_block() -> None:
    reply = "<<<<<<< SEARCH\n    return x * 2\n=======\n    return x"
    assert problem_kind(code_answer, reply, None, CURRENT) == "truncated"
    whole = edit_block("    return x * 2", "    return x * 3")
    assert problem_kind(code_answer, whole, "length", CURRENT) == "truncated"


def test_malformed_edit_block() -> None:
    reply = "<<<<<<< SEARCH\na\n<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE"
    assert problem_kind(parse_edits, reply) == "edit_malformed"


def test_edits_without_a_current_file() -> None:
    reply = edit_block("    return x * 2", "    return x * 3")
    assert problem_kind(code_answer, reply, None, None) == "edit_without_file"


def test_full_file_is_a_rewrite_even_with_a_current_file() -> None:
    assert code_answer(fence(MODEL), "stop", CURRENT) == (MODEL, "rewrite")


# --- JSON --------------------------------------------------------------------------------


class Plan(BaseModel):
    summary: str
    kernels: list[str] = []


@pytest.mark.parametrize(
    "reply",
    [
        '{"summary": "s", "kernels": ["k"]}',
        'Here is the plan:\n```json\n{"summary": "s", "kernels": ["k"]}\n```\nGood luck.',
        'Plan follows {not json} then {"summary": "s", "kernels": ["k"]} trailing',
        '```\n{"summary": "s",\n "kernels": ["k"]}\n```',
        '<think>Maybe {"summary": "draft"}? No.</think>{"summary": "s", "kernels": ["k"]}',
    ],
)
def test_json_is_found_in_prose_and_fences(reply: str) -> None:
    assert parse_json(reply, "stop", Plan) == Plan(summary="s", kernels=["k"])


@pytest.mark.parametrize(
    "reply, finish, kind, words",
    [
        ('{"summary": "s"', "length", "truncated", "cut off"),
        ("no json here", "stop", "no_json", "no JSON object"),
        ('{"summary": "s", "kernels": [1', "stop", "no_json", "line 1"),
        ('{"kernels": "k"}', "stop", "invalid", "summary: Field required"),
        ("[1, 2]", None, "no_json", "no JSON object"),
    ],
)
def test_bad_json_replies(reply: str, finish: str | None, kind: str, words: str) -> None:
    with pytest.raises(ReplyProblem) as info:
        parse_json(reply, finish, Plan)
    assert info.value.kind == kind
    assert words in info.value.feedback


def test_first_json_object_skips_non_objects() -> None:
    assert first_json_object('[1] then {"a": {"b": 2}}') == ({"a": {"b": 2}}, "")


def test_schema_instruction_goes_in_the_system_message() -> None:
    messages = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "go"}]
    sent = with_instruction(messages, Plan)
    assert sent[0]["content"].startswith("You plan.") and '"summary"' in sent[0]["content"]
    assert messages[0]["content"] == "You plan."  # the caller's list is untouched
    bare = with_instruction([{"role": "user", "content": "go"}], Plan)
    assert bare[0]["role"] == "system" and bare[1] == {"role": "user", "content": "go"}
