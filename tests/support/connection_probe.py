"""A one-step workflow that reports which database connection ran it (tests of issue 10).

Its output names the worker process and the PostgreSQL backend serving the step's
connection, so a test can tell whether a worker reuses one connection across tasks.
"""

import os

from django.db import connection

from executions.authoring import registry
from executions.authoring.workflow import Workflow

flow = registry.register(
    Workflow(
        name="connection_probe",
        version=1,
        title="Test: which connection ran this step",
        parse_input=lambda raw: {"n": int(raw.get("n", 0))},
        goal=lambda data: "report the database connection",
    )
)


@flow.step("probe", label="Reporting the connection")
def probe(ctx):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend_pid,) = cursor.fetchone()
    return {"worker_pid": os.getpid(), "backend_pid": backend_pid}
