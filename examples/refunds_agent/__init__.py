"""DBOS's reliable refunds agent (dbos-inc/dbos-demo-apps ``python/reliable-refunds-langchain``)
ported to keel: its own package, registered only through
``KEEL_WORKFLOW_MODULES=examples.refunds_agent.workflow``."""
