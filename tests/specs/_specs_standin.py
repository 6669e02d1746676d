"""A stand-in for chatdata's History (its fields, ``default_spec``), for the spec tests."""
from __future__ import annotations

from chatdata.specs import history_default_spec
from chatdata.td import tensorclass


@tensorclass(nocast=True)  # as torchrl's History: values stored as given
class History:
    role: str
    content: str
    is_complete: bool = True
    tool_calls: list | None = None
    tool_responses: list | None = None

    @classmethod
    def default_spec(cls, shape=(-1,)):
        return history_default_spec(cls, shape)
