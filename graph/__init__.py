"""Assembling and running the kernelgraph state machine, and the CLI."""
