"""The agent: one loop (`loop.py`), its session state, events and main-loop policy."""
