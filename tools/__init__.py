"""Deterministic machinery (no LLM). This package's __init__ imports only the standard library:
tools.harness runs on bare GPU boxes."""
