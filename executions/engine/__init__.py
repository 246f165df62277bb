"""The engine: the runtime core, free of agents, approvals and the API.

The record's lifecycle (``lifecycle``: the one writer of ``Execution.status``), leases
and fencing (``leases``), the fenced writer (``writer``), the action ledger
(``ledger``), the runner (one slice of steps under one lease), the doorbell
(``dispatch``) and its sweeper, the model-call journal, parking at a gate
(``parking``), and the registries through which everything else plugs in: gates
(``gates``), step kinds (``kinds``) and event types (``events``). Failpoints and the
log context serve the crash tests and the logs.

May import: ``executions.authoring``, ``executions.models`` and the leaves (errors,
reasons, storable), ``artifacts``. Never the agent runtime, the gates that plug in,
the services or the API above it: they register here instead. Imported by every room
of ``executions`` above it; the apps built on the runtime (approvals' gate, triage,
notifications…) reach it only through ``executions.runtime`` (import-linter protects
it). This ``__init__`` imports nothing: the logging
configuration loads ``logcontext`` before the apps.
"""
