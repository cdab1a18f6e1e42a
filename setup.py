"""Packages for setuptools: the folders graph/, nodes/, tools/, state/ and prompts/ install as
kernelgraph.graph, kernelgraph.nodes, ... (the metadata is in pyproject.toml)."""

from setuptools import find_packages, setup

FOLDERS = ("graph", "nodes", "tools", "state", "prompts")

setup(
    packages=["kernelgraph"]
    + [f"kernelgraph.{name}" for name in find_packages(include=[f"{f}*" for f in FOLDERS])],
    package_dir={"kernelgraph": "kernelgraph", **{f"kernelgraph.{f}": f for f in FOLDERS}},
    package_data={"kernelgraph.prompts": ["**/*.md", "**/*.j2", "**/*.py"]},
)
