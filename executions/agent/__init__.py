"""The agent runtime: model and agent steps, the model clients and the providers' adapters.

``steps`` registers the ``model`` and ``agent`` step kinds with the engine
(``executions.engine.kinds``) when the app loads; the runner looks them up and never
imports this package. ``modelclient`` holds the offline default and which client a
process uses (``RUNTIME_MODEL_CLIENT``); ``adapters`` the OpenAI-compatible and
Anthropic clients. What they speak (``ModelRequest``, ``ModelResponse``…) is the
authoring surface's (``executions.authoring.modelcalls``).

May import: the engine, the authoring surface, the models and leaves, ``artifacts``.
Imported by ``executions.apps`` (to register), the rooms of ``executions`` above it,
and ``executions.runtime``, through which the apps reach it (the model in use, an
agent's recorded tool results, replay): import-linter protects it.
"""
