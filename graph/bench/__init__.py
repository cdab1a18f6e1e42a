"""`kernelgraph bench`: a KernelBench-format suite run task by task, its metrics and reports."""
