"""The environment the control-flow tests start keel's processes with: the workflows they
register (tests/support/control_flows.py, imported by those processes only) beside the
shipped replacement orders."""

ENV = {
    "RUNTIME_WORKFLOW_MODULES": "workflows.replacement_order,workflows.replacement_order_v2,tests.support.control_flows"
}
