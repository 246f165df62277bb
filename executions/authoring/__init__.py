"""The authoring surface: what a workflow module imports (filled in below the moves)."""
