"""Triage: the operator's tools, built on the runtime's services.

The counts by status and by stuck reason and the tally of terminal executions they
read (``tallies``, retaken by beat's ``triage.tally``), bulk operations with a dry run
(``bulk``), the resume preview (``preview``), restart from a step (``restart``),
closing compensations (``compensations``), the operator audit (``operator_audit``),
and their endpoints (``api``, assembled in config.api). The screens that use them are
the console's.

May import: executions (its services, selectors and record), accounts, artifacts.
Imported by console, cli, metrics, retention and config; never by executions or approvals.
"""
