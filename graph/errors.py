"""Errors the runner raises for the user: one readable line and an exit code."""

from __future__ import annotations


class RunError(Exception):
    """A run cannot be started, resumed or reviewed as asked (exit code 2)."""

    exit_code = 2
