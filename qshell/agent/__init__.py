"""The agent: one loop (`loop.py`) and its tool batches, the session state, events and the
interactive conversation; permissions/ decides what runs, latency/ makes it answer sooner."""
