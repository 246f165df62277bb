"""A deploy that edits the pydantic-ai support agent's instructions (not its version):
listed after examples.pydantic_support.workflow, it adds an instruction to the agent, so
every request of the ``support`` step is built from a different system text."""

from examples.pydantic_support.workflow import support


@support.instructions
def be_brief() -> str:
    return "Answer in one sentence."
