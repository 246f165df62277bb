"""Triage's own record: the tallies of terminal executions and of succeeded ledger actions
the counts read (``tallies``)."""

from __future__ import annotations

from django.db import models

from access.managers import scoped


class TerminalTally(models.Model):
    """How many terminal executions changed status before ``through``, by status, workflow
    and reason code: retaken by beat's ``triage.tally`` (``triage.tallies``), read by the counts."""

    status = models.CharField(max_length=30)
    workflow = models.CharField(max_length=100)
    reason_code = models.CharField(max_length=40, blank=True, default="")
    n = models.PositiveBigIntegerField()
    through = models.DateTimeField()
    taken_at = models.DateTimeField()

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        # The table executions' migrations created, kept when the model moved here.
        db_table = "executions_terminaltally"

    def __str__(self) -> str:
        return f"{self.n} {self.workflow} {self.status} before {self.through:%Y-%m-%d %H:%M}"


class LedgerTally(models.Model):
    """How many ledger actions had succeeded before ``through`` (succeeded is the one status
    an action never leaves): retaken with the terminal tally by beat's ``triage.tally``
    (``triage.tallies``), read by the ledger's counts."""

    n = models.PositiveBigIntegerField()
    through = models.DateTimeField()
    taken_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.n} succeeded actions before {self.through:%Y-%m-%d %H:%M}"
