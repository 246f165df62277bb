"""Issue 38 (item 9.6): the OpenAPI document's components are one schema per name, and
every ``$ref`` in it resolves. django-ninja names a component after its class and keeps
the last class of a name it meets, so two schemas of one name (there were two
``HoldOut``: a legal hold and a paused execution's) silently give one operation the
other's schema — the resume preview's ``hold`` described a legal hold."""

from __future__ import annotations

import json
import typing
from collections import defaultdict

from django.test import Client
from pydantic import BaseModel

from config.api import api


def declared_operations():
    for _prefix, router in api._routers:
        for view in router.path_operations.values():
            yield from view.operations


def _models_in(annotation, found: set[type[BaseModel]]) -> None:
    """Every pydantic model ``annotation`` mentions (unions, lists, dicts, Annotated), recursively."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in found:
            return
        found.add(annotation)
        for field in annotation.model_fields.values():
            _models_in(field.annotation, found)
        return
    for arg in typing.get_args(annotation):
        _models_in(arg, found)


def api_models() -> set[type[BaseModel]]:
    """The schemas of every body, parameter set and answer the API declares."""
    found: set[type[BaseModel]] = set()
    for op in declared_operations():
        for wrapper in op.response_models.values():
            if wrapper is not None:
                _models_in(wrapper.model_fields["response"].annotation, found)
        for params in op.models:
            _models_in(params, found)
    return found


def test_no_two_schemas_of_the_api_share_a_component_name():
    by_name: dict[str, set[str]] = defaultdict(set)
    for model in api_models():
        by_name[model.__name__].add(f"{model.__module__}.{model.__qualname__}")
    colliding = {name: sorted(where) for name, where in by_name.items() if len(where) > 1}
    assert not colliding, f"schemas that would share one OpenAPI component: {colliding}"


def _refs(node, out: list[str]) -> list[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out.append(value)
            else:
                _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)
    return out


def test_every_ref_of_the_openapi_document_resolves_and_the_preview_hold_is_a_pause(db):
    document = json.loads(Client().get("/api/openapi.json").content)
    components = document["components"]["schemas"]
    refs = _refs(document, [])
    assert refs, "the document refers to its components"
    prefix = "#/components/schemas/"
    unresolved = sorted({r for r in refs if not r.startswith(prefix) or r.removeprefix(prefix) not in components})
    assert not unresolved, f"$refs to nothing: {unresolved}"
    # The two holds are two components, each with its own fields.
    preview = components["ResumePreviewOut"]["properties"]["hold"]["anyOf"][0]["$ref"].removeprefix(prefix)
    legal = components["ExecutionOut"]["properties"]["hold"]["anyOf"][0]["$ref"].removeprefix(prefix)
    assert set(components[preview]["properties"]) == {"paused_from", "by", "reason", "why"}
    assert set(components[legal]["properties"]) == {"reason", "by", "at"}
