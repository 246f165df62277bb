"""The runtime: executions that survive crashes, leases, the action ledger, gates.

Rooms, each importing only the ones below it (import-linter keeps it so; the map is
docs/architecture.md):

- the edges — ``api`` and ``inputs`` (the Task API's runtime part, ninja), ``tasks``
  (Celery), ``admin``, ``apps`` (start-up: plugs the rooms into the engine);
- ``services`` and ``selectors``: the writes and reads every interface shares;
  ``stuck`` (why an execution isn't moving) and ``blockers`` (what keeps it from resuming);
- ``agent/`` (model and agent steps, model clients; a step kind) and ``waits`` (the
  wait gate and its signal; a gate and an event type), which plug into the engine;
- ``engine/``: the core — lifecycle, leases, the fenced writer, ledger, runner,
  doorbell, sweeper, journal, parking, and the registries of gates, step kinds and
  event types;
- ``authoring/``: the surface a workflow imports (``executions.authoring``);
- ``models``, and the leaves ``errors``, ``reasons``, ``storable``.

Imported by approvals, triage, notifications, schedules, retention, fleet, console, cli, metrics,
workflows and config; it imports none of them (only ``apikit``, ``accounts``, ``artifacts`` and
``dblocks``, below it).
"""
