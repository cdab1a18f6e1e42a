"""kernelgraph: PyTorch operators in, verified and profiled kernels out.

Its subpackages are the project's folders: `kernelgraph.graph`, `.nodes`, `.tools`, `.state`
and `.prompts`. An installed wheel holds them under this package; in a checkout they are the
folders beside this one, found through `__path__`, so `python -m kernelgraph.tools.harness`
works from the checkout's root on a bare GPU box (standard library only here).
"""

import os as _os

# The folder that holds this package: what a child process needs on PYTHONPATH to import it
# (the checkout's root, or site-packages).
IMPORT_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(IMPORT_ROOT, "graph", "cli.py")):
    __path__.append(IMPORT_ROOT)  # a checkout: the subpackages are the folders beside this one
