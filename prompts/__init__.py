"""Prompt templates and per-DSL documentation (package data)."""
