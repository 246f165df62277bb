"""Example workflows. Each module registers itself; the runtime core knows none of them."""
