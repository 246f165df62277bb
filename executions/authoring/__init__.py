"""The authoring surface: everything a workflow module imports comes from here.

    from executions.authoring import Workflow, WorkflowInput, register

    class HelloInput(WorkflowInput):
        name: str

    hello = register(Workflow(name="hello", version=1, title="Say hello", input=HelloInput,
                              goal=lambda data: "Greet " + data["name"]))

    @hello.step("greet", label="Greeting")
    def greet(ctx):
        return {"greeting": "hello " + ctx.input["name"]}

A workflow reads as its business process: named steps with labels (``step``,
``model_step``, ``agent``), effects with business keys (``effect`` returning an
``Effect``), gates (``gate``, ``wait``); leases, checkpoints, the ledger, retries and
the journal happen underneath, in the engine. The names below are the whole surface
(docs/design.md §4): ``Workflow``, ``WorkflowInput``, ``register``, ``Effect``,
``ReceiptField``, ``RetryPolicy``, ``StepFailure``, ``Tool``, ``Budget``, ``Child`` and what
using them takes (``parse_with`` for an input checked by hand, ``FailureKind`` for a failure,
``InvalidInput`` for a validator's own refusal, ``DB_INT_MAX`` to bound an integer,
``request_json`` to call a service with failures sorted by type, ``ToolArgs``,
``Progress`` and ``Refused`` for tools, ``Template`` for a bounded message to a third party, ``effect_key`` for the ledger key inside another framework's tool run as an effect, ``SignalPayload`` for what a signal may carry, ``ModelRequest`` and ``Decision`` for an
agent step's offline policy, ``END`` for a step after which the workflow completes —
``then=END``, the edge out of a branch a route chose). The approval gate's spec is its app's:
``approvals.gate.Approval``.

Who imports this package: workflow modules, and every room of the runtime (the engine
runs what is declared here). It imports nothing of the API (ninja), the engine or the
agent runtime — an import-linter contract in pyproject.toml keeps it so. Its subpackage
``testing`` (the author's test kit) is no part of the surface: only tests import it, and
importing this package doesn't load it.
"""

from ..errors import FailureKind, InvalidInput, StepFailure
from ..storable import DB_INT_MAX
from .children import Child
from .foreign import effect_key
from .http import request_json
from .mcp import McpServer, mcp_tools
from .modelcalls import Decision, ModelRequest
from .outbound import Template
from .registry import register
from .retry import RetryPolicy
from .specs import SignalPayload
from .tools import Budget, Progress, Refused, Tool, ToolArgs
from .workflow import END, Effect, ReceiptField, Workflow, WorkflowInput, parse_with

__all__ = [
    "DB_INT_MAX",
    "END",
    "Budget",
    "Child",
    "Decision",
    "Effect",
    "FailureKind",
    "InvalidInput",
    "McpServer",
    "ModelRequest",
    "Progress",
    "ReceiptField",
    "Refused",
    "SignalPayload",
    "RetryPolicy",
    "StepFailure",
    "Template",
    "Tool",
    "ToolArgs",
    "Workflow",
    "WorkflowInput",
    "effect_key",
    "mcp_tools",
    "parse_with",
    "register",
    "request_json",
]
