"""The typer app and the options its commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Turn PyTorch operators into verified, profiled GPU and CPU kernels.",
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)

TaskArg = Annotated[
    Path, typer.Argument(help="KernelBench-format task file (Model, get_inputs, get_init_inputs).")
]
KernelArg = Annotated[Path, typer.Argument(help="Candidate file defining class ModelNew.")]
DslOpt = Annotated[
    str, typer.Option("--dsl", help="Kernel language: triton, cpp, cuda or tilelang.")
]
PolicyOpt = Annotated[
    str, typer.Option(help="strict: no PyTorch compute; hybrid: library GEMM/conv allowed.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a size constant: NAME=VALUE (Python literal). Repeatable."
    ),
]

MaxHostMemoryOpt = Annotated[
    float | None,
    typer.Option(
        "--max-host-memory",
        metavar="GB",
        min=0.001,
        help="Host memory limit per harness worker, GB (default: a share of this machine's).",
    ),
]
ShareWeightsOpt = Annotated[
    bool,
    typer.Option(
        "--share-weights",
        help="Load the reference's weights into ModelNew (for kernels that will load trained "
        "weights). Default: KernelBench's protocol, each model initialises its own under the "
        "same seed.",
    ),
]


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
