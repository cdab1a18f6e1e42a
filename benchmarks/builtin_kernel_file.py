"""Write the builtin's kernel file for a task, for a GPU, without one: for A/B probes
(benchmarks/kernel_file_probe.py) of a config the search would reach only later.

    python benchmarks/builtin_kernel_file.py TASK.py OUT.py [--set KERNEL.PARAM=JSON ...]
    python benchmarks/builtin_kernel_file.py kb/level1/54_*.py old.py --set k0_convolution.DOT='"tf32x3"'

The task is analysed on this machine's CPU, as a run's planner does; the config is the
builtin's default for --device with each --set applied, and is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import _common  # noqa: F401  (the repository on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KERNEL.PARAM=JSON")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dsl", default="triton")
    parser.add_argument("--policy", default="strict")
    parser.add_argument("--precision", default="fp32")
    ns = parser.parse_args()

    from kernelgraph.tools.analysis import analyze_task
    from kernelgraph.tools.builtin.generate import Generator
    from kernelgraph.tools.task import TaskSource

    source = TaskSource.read(ns.task)
    analysis = analyze_task(source, "cpu")
    generator = Generator(analysis, ns.dsl, ns.device, ns.policy, ns.precision,
                          source.effective_source)  # fmt: skip
    config = generator.default_config()
    for item in ns.set:
        name, _, value = item.partition("=")
        kernel, _, param = name.partition(".")
        if kernel not in config:
            parser.error(f"--set {item}: no kernel {kernel!r} (kernels: {', '.join(config)})")
        config[kernel][param] = json.loads(value)
    ns.out.write_text(generator.code(config))
    print(json.dumps(config))


if __name__ == "__main__":
    main()
