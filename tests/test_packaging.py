"""kernelgraph installs as one package: a wheel built from the tracked files, installed into a
fresh virtual environment, puts only `kernelgraph` in site-packages (no top-level `graph`,
`tools`, `state`, `nodes` or `prompts` to collide with other distributions), and works there:
its command line, and an evaluation whose sandboxed workers import the installed package."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from cli_helpers import ROOT

CASES = ROOT / "tests" / "cases"
GENERIC = ("graph", "tools", "state", "nodes", "prompts")


def tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()  # fmt: skip


def tracked_copy(dest: Path) -> Path:
    """The tracked files only, as a fresh clone has them."""
    for name in tracked_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed (no index: its dependencies are this test
    environment's, reached through a .pth line, which runs none of their .pth files)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to build from")
    base = tmp_path_factory.mktemp("packaging")
    source = tracked_copy(base / "src")
    wheels = base / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(source)], check=True, capture_output=True)  # fmt: skip
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    (wheel,) = wheels.glob("kernelgraph-*.whl")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True)  # fmt: skip
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


def run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(cwd)})  # fmt: skip


@pytest.mark.slow
def test_the_wheel_installs_one_package_and_no_generic_names(installed: Path, tmp_path: Path):
    python = str(installed / "bin" / "python")
    site = Path(run(installed, python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    cwd=tmp_path).stdout.strip())  # fmt: skip
    assert (site / "kernelgraph" / "graph" / "cli.py").is_file()
    assert (site / "kernelgraph" / "prompts" / "coder.j2").is_file()  # package data
    assert not [name for name in GENERIC if (site / name).exists()]
    modules = [name for name in tracked_files() if name.endswith(".py")]
    modules = [name for name in modules if name.split("/")[0] in GENERIC[:-1]]
    missing = [name for name in modules if not (site / "kernelgraph" / name).is_file()]
    assert len(modules) > 100 and not missing  # every folder's modules, the builtin's included
    probe = "import kernelgraph, kernelgraph.graph.cli; print(kernelgraph.__path__)"
    shown = run(installed, python, "-c", probe, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert str(site / "kernelgraph") in shown.stdout and str(ROOT) not in shown.stdout
    for name in GENERIC:
        assert run(installed, python, "-c", f"import {name}", cwd=tmp_path).returncode != 0, name
    helped = run(installed, str(installed / "bin" / "kernelgraph"), "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "bench" in helped.stdout, helped.stderr


@pytest.mark.slow
def test_the_installed_package_evaluates_a_kernel_in_its_sandbox(installed: Path, tmp_path: Path):
    task, kernel = CASES / "tasks" / "scale_add.py", CASES / "kernels" / "cpp_scale_add.py"
    proc = run(installed, str(installed / "bin" / "kernelgraph"), "evaluate", str(task),
               str(kernel), "--dsl", "cpp", "--device", "cpu", "--seeds", "1", "--no-profile",
               "--json", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}"
    assert json.loads(proc.stdout.splitlines()[-1])["status"] == "passed"
