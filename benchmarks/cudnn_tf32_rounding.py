"""Which TF32 rounding does cuDNN apply, problem by problem? For each task file with a
convolution: the model runs once at its real size under PyTorch's default flags (cuDNN may
use TF32), a hook keeps the first convolution's input and output for batch item 0, and that
output is compared with the same convolution in fp64 of the operands exact, rounded ties to
even, and rounded ties away. The closest names what cuDNN's chosen kernel did
(`tools/builtin/triton_conv.cudnn_roundings` follows it). GPU only; one JSON line a task:

    python benchmarks/cudnn_tf32_rounding.py 'KernelBench/level1/*.py' 'KernelBench/level2/*.py' \
        --out results.jsonl
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from tf32_rounding_probe import rnd

CONVS = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}
TRANSPOSED = {
    nn.ConvTranspose1d: F.conv_transpose1d,
    nn.ConvTranspose2d: F.conv_transpose2d,
    nn.ConvTranspose3d: F.conv_transpose3d,
}


def first_convolution(path: str):
    """(module, input, output) of the model's first convolution, batch item 0."""
    spec = importlib.util.spec_from_file_location("task", path)
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    torch.manual_seed(42)
    with torch.device("cuda"):
        model = task.Model(*task.get_init_inputs())
        inputs = [a.cuda() if isinstance(a, torch.Tensor) else a for a in task.get_inputs()]
    seen = []

    def keep(module, args, out):
        if not seen:
            seen.append((module, args[0][:1].clone(), out[:1].clone()))

    for module in model.modules():
        if type(module) in CONVS or type(module) in TRANSPOSED:
            module.register_forward_hook(keep)
    with torch.no_grad():
        model(*inputs)
    return seen[0] if seen else None


def replay(module, x: torch.Tensor, rounding: str) -> torch.Tensor:
    """The convolution in fp64 of x and the weights as `rounding` leaves them."""
    w = rnd(module.weight.detach(), rounding).double()
    bias = None if module.bias is None else module.bias.detach().double()
    x = rnd(x, rounding).double()
    if type(module) in TRANSPOSED:
        return TRANSPOSED[type(module)](x, w, bias, module.stride, module.padding,
                                        module.output_padding, module.groups, module.dilation)  # fmt: skip
    return CONVS[type(module)](x, w, bias, module.stride, module.padding, module.dilation,
                               module.groups)  # fmt: skip


def probe(path: str) -> dict:
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default, as KernelBench runs
    found = first_convolution(path)
    if found is None:
        return {"task": path, "conv": None}
    module, x, out = found
    torch.backends.cudnn.allow_tf32 = False  # the fp64 replays
    row = {"task": path, "conv": repr(module), "x": list(x.shape)}
    with torch.no_grad():
        for rounding in ("exact", "rn_even", "rn_away"):
            row[rounding] = (out.double() - replay(module, x, rounding)).abs().max().item()
    row["closest"] = min(("exact", "rn_even", "rn_away"), key=row.get)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tasks", nargs="+", help="globs of task files")
    parser.add_argument("--out", help="append JSON lines here too")
    args = parser.parse_args()
    paths = [p for g in args.tasks for p in sorted(glob.glob(g)) if "Conv" in open(p).read()]
    for path in paths:
        try:
            row = probe(path)
        except Exception as error:  # one task's failure (memory, an odd module) ends only it
            row = {"task": path, "error": f"{type(error).__name__}: {str(error)[:200]}"}
        torch.cuda.empty_cache()
        line = json.dumps(row)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as out:
                out.write(line + "\n")


if __name__ == "__main__":
    main()
