"""The report's error: a report cannot be made, and the message says which input and why."""

__all__ = ["ReportError"]


class ReportError(Exception):
    """A report cannot be made; the message says which input and why."""
