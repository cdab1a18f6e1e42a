"""The builtin model: kernels written from the traced ops, with no LLM (see model.py)."""
