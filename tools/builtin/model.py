"""The builtin model: planner, sketch-writer and coder answers without an LLM.

It answers the same three questions as an LLM brain, from the task analysis: the Plan names the
kernels the program needs, the Sketch lists them as stages with their tunables, and the coder
prints the kernel file with the default config first, then (refine, or a retry after a config
that failed) the next untried config next to the best one. When nothing is left to try it
raises NothingToTry; for ops it cannot write, Unsupported (tools/builtin/errors.py).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from typing import Any

from kernelgraph.state.sketch import Plan, Sketch, Stage, Tunable
from kernelgraph.tools.builtin.attention import AttentionKernel
from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.generate import Generator
from kernelgraph.tools.builtin.kernels import FusedKernel, GemmKernel
from kernelgraph.tools.builtin.module import read_config

Config = dict[str, dict[str, Any]]
# The tunable that trades accuracy for speed, its values listed fastest first (the default may
# start past some: a convolution cuDNN likely runs without TF32 starts at tf32x3). Until a
# config verifies, its values come before any tiling change (a wrong result is cured by
# precision, not tiles), fastest first; once one verifies, only faster values that no config
# has tried yet come before the tiling changes (the slower ones cannot win, the tried failed).
PRECISION = "DOT"


class NothingToTry(Exception):
    """Every configuration next to the best one has been tried."""


class BuiltinModel:
    def __init__(self) -> None:
        self._generators: dict[str, Generator] = {}

    def generator(self, context: dict[str, Any]) -> Generator:
        analysis = context.get("analysis") or {}
        source = context.get("task_source")  # ModelNew runs the reference's __init__ from it
        key = json.dumps([analysis.get("version"), context["dsl"], context["device"],
                          context["policy"], context["precision"], analysis.get("ops"), source],
                         sort_keys=True, default=str)  # fmt: skip
        if key not in self._generators:
            self._generators[key] = Generator(
                analysis,
                context["dsl"],
                context["device"],
                context["policy"],
                context["precision"],
                source,
            )
        return self._generators[key]

    # ------------------------------------------------------------ planner

    def plan(self, context: dict[str, Any]) -> Plan:
        gen = self.generator(context)
        analysis = context.get("analysis") or {}
        kernels = [k.describe() for k in gen.program.kernels]
        risks = []
        products = (GemmKernel, AttentionKernel)
        if any(isinstance(k, products) for k in gen.program.kernels) and context["precision"] in (
            "fp32",
            "ieee",
        ):
            risks.append(
                "fp32 GEMM as three TF32 tensor-core products (tf32x3): if a shape misses the "
                "fp32 tolerance, IEEE FMAs (several times slower) are the next config"
            )
        if any(
            isinstance(k, FusedKernel) and k.rows < 64 and k.rlen > 65536
            for k in gen.program.kernels
        ):
            risks.append("few long rows: one program per row leaves most of the device idle")
        return Plan(
            summary=f"{_ops_summary(analysis)}; builtin program of {gen.summary()}.",
            bound=analysis.get("bound") or "unknown",
            fuse=[k.name for k in gen.program.kernels],
            kernels=kernels,
            library_calls=sorted(set(gen.program.hybrid_ops)),
            risks=risks,
        )

    # ------------------------------------------------------------ sketch

    def sketch(self, context: dict[str, Any]) -> Sketch:
        gen = self.generator(context)
        default, spaces = gen.default_config(), gen.tunables()
        tiling = [
            Tunable(name=f"{kernel}.{param}", values=values, default=default[kernel].get(param))
            for kernel, params in spaces.items()
            for param, values in params.items()
        ]
        fused = [k for k in gen.program.kernels if isinstance(k, FusedKernel)]
        reductions = sorted({r.kind for k in fused for r in k.reductions})
        return Sketch(
            stages=[Stage(name=k.name, description=k.describe()) for k in gen.program.kernels],
            parallel_axes=[k.axes() for k in gen.program.kernels],
            grid="; ".join(f"{k.name}: {k.grid()}" for k in gen.program.kernels),
            tiling=tiling,
            memory="inputs read once from global memory into registers; rows that fit stay in "
            "registers for every pass, longer rows are re-read per pass; GEMM tiles staged by the "
            "compiler's software pipeline",
            reduction=(
                f"in-register tree reductions ({', '.join(reductions)}) along the reduced axis"
                if reductions
                else "none"
            ),  # fmt: skip
            precision=f"loads cast to fp32, math in fp32, stores in the output dtype "
            f"({context['precision']} run)",
            pseudocode="\n".join(k.pseudo() for k in gen.program.kernels),
        )

    # ------------------------------------------------------------ coder

    def code(self, context: dict[str, Any], tried: Iterable[str], best_code: str | None,
             pick: int = 0) -> str:  # fmt: skip
        """The kernel file: default config first; later the first untried neighbour of the
        best config (or of the default when nothing verified yet); `pick` skips that many."""
        found = self.upcoming(context, tried, best_code, pick + 1)
        if len(found) > pick:
            return found[pick]
        raise NothingToTry("every configuration next to the best one was tried")

    def upcoming(
        self, context: dict[str, Any], tried: Iterable[str], best_code: str | None, n: int
    ) -> list[str]:
        """The next `n` kernel files, in the order `code` writes them while the best stays."""
        gen = self.generator(context)
        tried_configs = [c for c in (read_config(code) for code in tried) if c is not None]
        default = gen.default_config()
        if context.get("start") is not None:  # a search island's own starting point
            default = start_config(default, gen.tunables(), context["start"])
        configs = [] if default in tried_configs or not gen.fits(default) else [default]
        centre = read_config(best_code) or default
        spaces = gen.tunables()
        for config in _next_configs(centre, spaces, best_code is not None, tried_configs):
            if len(configs) >= n:
                break
            if config not in tried_configs and config not in configs and gen.fits(config):
                configs.append(config)
        return [gen.code(config) for config in configs[:n]]


def start_config(default: Config, spaces: dict[str, dict[str, list[Any]]], seed: int) -> Config:
    """A seeded random config (PRECISION kept at its default: a wrong result is cured by
    precision first), so another island starts its search elsewhere in the space."""
    rng = random.Random(seed)
    config = {kernel: dict(params) for kernel, params in default.items()}
    for kernel, params in spaces.items():
        for param, values in params.items():
            if param != PRECISION and values:
                config.setdefault(kernel, {})[param] = rng.choice(values)
    return config


def _next_configs(
    centre: Config, spaces: dict[str, dict[str, list[Any]]], verified: bool, tried: list[Config]
) -> list[Config]:
    """The neighbours to try, in order, with PRECISION handled as its comment says."""
    tiling = {kernel: {p: values for p, values in params.items() if p != PRECISION}
              for kernel, params in spaces.items()}  # fmt: skip
    precisions = []
    for kernel, params in spaces.items():
        values = params.get(PRECISION) or []
        current = centre.get(kernel, {}).get(PRECISION)
        if current not in values:
            continue
        used = {config.get(kernel, {}).get(PRECISION) for config in tried}
        for value in values if not verified else values[: values.index(current)]:
            if value != current and not (verified and value in used):
                changed = {k: dict(v) for k, v in centre.items()}
                changed[kernel][PRECISION] = value
                precisions.append(changed)
    return precisions + neighbours(centre, tiling)


def neighbours(config: Config, spaces: dict[str, dict[str, list[Any]]]) -> list[Config]:
    """Configs that differ from `config` in one parameter, nearest values first."""
    found: list[Config] = []
    for kernel, params in spaces.items():
        for param, values in params.items():
            current = config.get(kernel, {}).get(param)
            ranked = sorted(values, key=lambda v: (_distance(v, current, values), str(v)))
            for value in ranked:
                if value == current:
                    continue
                changed = {k: dict(v) for k, v in config.items()}
                changed.setdefault(kernel, {})[param] = value
                found.append(changed)
    # interleave: the first alternative of every parameter before the second of any
    order = sorted(range(len(found)), key=lambda i: _rank(found, i, config))
    return [found[i] for i in order]


def _rank(found: list[Config], i: int, base: Config) -> tuple[int, int]:
    same_param = 0
    target = _changed(found[i], base)
    for j in range(i):
        if _changed(found[j], base) == target:
            same_param += 1
    return (same_param, i)


def _changed(config: Config, base: Config) -> tuple[str, str] | None:
    for kernel, params in config.items():
        for param, value in params.items():
            if base.get(kernel, {}).get(param) != value:
                return (kernel, param)
    return None


def _distance(value: Any, current: Any, values: list[Any]) -> float:
    """How far a value is from the current one: by ratio for numbers (64 is as near to 128 as
    256 is), by place in the list for names (DOT: tf32rna, tf32rn, tf32x3, ieee, in order)."""
    try:
        return abs(math.log(float(value) / float(current)))
    except (TypeError, ValueError, ZeroDivisionError):
        if current in values:
            return abs(values.index(value) - values.index(current))
        return 0.0


def _ops_summary(analysis: dict[str, Any]) -> str:
    kinds = [s.get("kind") for s in analysis.get("stages") or []]
    return "computes " + (", then ".join(kinds) if kinds else "nothing traced")


__all__ = ["BuiltinModel", "NothingToTry", "Unsupported", "neighbours"]
