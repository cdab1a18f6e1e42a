"""Typed data: pydantic models and the SQLAlchemy run store."""
