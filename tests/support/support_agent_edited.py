"""A deploy that edits the support agent's prompt template (not its version): listed
after workflows.support_agent in a worker's RUNTIME_WORKFLOW_MODULES, it changes the
instruction every request of the ``resolve`` step is built from (scenario S28)."""

from workflows import support_agent

support_agent.INSTRUCTION = "Resolve ticket {ticket} for the customer, kindly and quickly."
