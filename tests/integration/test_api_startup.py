"""The API's response wrappers are built once per schema
(``apikit.sharing``), and each still answers for its own schema."""

from __future__ import annotations

import json

from django.test import Client
from ninja import Router, Schema
from ninja.operation import Operation

from apikit.answers import ErrorOut
from config.api import api


def declared_operations():
    for _prefix, router in api._routers:
        for view in router.path_operations.values():
            yield from view.operations


def test_one_wrapper_per_schema_across_the_whole_api():
    wrappers = [
        (code, model)
        for op in declared_operations()
        for code, model in op.response_models.items()
        if model is not None  # an answer without a body
    ]
    assert len(wrappers) > 200  # every (operation, status code) with a body has one
    distinct = {model for _, model in wrappers}
    schemas = {model.model_fields["response"].annotation for model in distinct}
    assert len(distinct) == len(schemas) < 40, "a schema wrapped twice, or the sharing is gone"
    errors = {model for code, model in wrappers if code >= 400 and code != 429}  # 429 says when to retry
    assert {m.model_fields["response"].annotation for m in errors} == {ErrorOut}


class Answer(Schema):
    n: int


def test_a_shared_wrapper_validates_each_operation_by_its_own_schema():
    router = Router()

    @router.get("/a", response={200: Answer, 404: ErrorOut})
    def a(request):
        return 200, {"n": 1}

    @router.get("/b", response={200: ErrorOut, 404: ErrorOut})
    def b(request):
        return 404, {"detail": "none"}

    op_a = router.path_operations["/a"].operations[0]
    op_b = router.path_operations["/b"].operations[0]
    assert op_a.response_models[404] is op_b.response_models[404] is op_b.response_models[200]
    assert op_a.response_models[200] is not op_a.response_models[404]
    assert op_a.response_models[200].model_fields["response"].annotation is Answer
    assert getattr(Operation._create_response_model, "shared", False)


def test_the_openapi_document_names_each_answer_schema(db):
    document = json.loads(Client().get("/api/openapi.json").content)
    one = document["paths"]["/api/executions/{execution_id}"]["get"]["responses"]
    assert one["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ExecutionOut"}
    assert one["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorOut"}
    assert set(one) == {"200", "401", "404", "410", "422", "500"}
