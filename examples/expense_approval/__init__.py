"""The guide's example (docs/authoring.md): an expense claim approved by a manager and paid
through the ledger. Its own package, outside keel's: registered only through
``KEEL_WORKFLOW_MODULES=examples.expense_approval.workflow``."""
