"""Temporal's expense sample (temporalio/samples-python ``expense``) ported to keel: its own
package, registered only through ``KEEL_WORKFLOW_MODULES=examples.expense.workflow``."""
