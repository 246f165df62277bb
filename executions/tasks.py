"""Celery tasks: thin wrappers around the runner and the sweeper. An edge: nothing in
the runtime imports this module; the doorbell (``engine.dispatch``) and beat send these
tasks by name."""

from celery import shared_task

from .engine import runner, sweeper
from .engine.dispatch import ADVANCE
from .engine.leases import worker_identity


@shared_task(name=ADVANCE, bind=True, acks_late=True, ignore_result=True)
def advance(self, execution_id: int) -> str:
    return runner.advance(execution_id, worker=worker_identity(), queues=consumed(self.app))


def consumed(app) -> frozenset[str]:
    """The queues this worker process consumes (``-Q``; every declared queue without it;
    never the ones Celery adds when this process sends to an undeclared queue)."""
    return frozenset(app.amqp.queues.consume_from)


@shared_task(name="executions.sweep", ignore_result=True)
def sweep() -> list[int]:
    return list(sweeper.sweep().dispatched)


@shared_task(name="executions.unheld", ignore_result=True)
def unheld() -> list[int]:
    return list(sweeper.flag_unheld())
