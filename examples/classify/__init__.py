"""A step kind written from scratch, the worked example of docs/architecture.md ("A new
step kind"): ``classify`` (``kind.py``: one module and one registration) and a
workflow that uses it (``workflow.py``, registered only through
``KEEL_WORKFLOW_MODULES=examples.classify.workflow``)."""
