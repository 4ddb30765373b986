"""The latency plan (seed 004): what makes a turn answer sooner.

D1 post-execution directives (`directives`), D2 summary-round routing and its fallback
(`routing`, `router`), D4 stream-ahead execution (`stream_ahead`), the decision log that
records every round (`decisions`), and the tool offer of a small local model
(`tool_offer`). Imports no `followup`, `ui` or `acp`.
"""
