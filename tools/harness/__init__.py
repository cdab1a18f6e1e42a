"""The sandboxed verify/profile harness. Standard library and torch only (plus the DSL under
evaluation): it runs on bare GPU boxes as `python -m kernelgraph.tools.harness ...`."""
