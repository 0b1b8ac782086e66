"""Errors the pipeline expects and explains: the CLI prints the message, not a stack trace."""

from __future__ import annotations


class LakehouseError(RuntimeError):
    """A failure whose message says what went wrong and what to do about it."""
