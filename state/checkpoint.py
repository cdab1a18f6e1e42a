"""The checkpointer factory: LangGraph's SqliteSaver in the run store's own SQLite file.

The serializer's allow-list names our state classes, so a resumed run gets them back as
models rather than dicts (and nothing else is revived from the database).
"""

from __future__ import annotations

import sqlite3

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from kernelgraph.state.graph_state import STATE_CLASSES
from kernelgraph.state.search import SEARCH_CLASSES
from kernelgraph.state.store import RunStore, busy_timeout_ms


def serializer() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=[*STATE_CLASSES, *SEARCH_CLASSES])


def open_checkpointer(store: RunStore) -> SqliteSaver:
    timeout_ms = busy_timeout_ms()
    conn = sqlite3.connect(str(store.path), check_same_thread=False, timeout=timeout_ms / 1000)
    conn.execute(f"PRAGMA busy_timeout={timeout_ms}")
    conn.execute("PRAGMA journal_mode=WAL")
    saver = SqliteSaver(conn, serde=serializer())
    saver.setup()
    return saver
