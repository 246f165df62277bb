"""One django-ninja response wrapper per schema.

django-ninja wraps the schema of each (operation, status code) in a pydantic model of its
own — ~270 here, mostly the same ``ErrorOut`` — built as the routers declare their
operations: ~0.2 s of every web worker's start. The wrapper depends on the schema alone
and nothing mutates it afterwards, so one per schema serves every operation. Applied
once, when the app is ready (``apikit.apps``), before any router is imported (the URLs
load them); the OpenAPI document is unchanged (tests/integration/test_api_startup.py).
"""

from __future__ import annotations

from typing import Any

from ninja.operation import Operation


def share_response_wrappers() -> None:
    """Make ``Operation._create_response_model`` build one wrapper per schema (idempotent)."""
    create = Operation._create_response_model
    if getattr(create, "shared", False):
        return
    made: dict[Any, Any] = {}

    def shared(self: Operation, response_param: Any) -> Any:
        try:
            return made[response_param]
        except KeyError:
            made[response_param] = model = create(self, response_param)
            return model
        except TypeError:  # an unhashable annotation: its own wrapper, as before
            return create(self, response_param)

    shared.shared = True  # type: ignore[attr-defined]
    Operation._create_response_model = shared  # type: ignore[method-assign]
