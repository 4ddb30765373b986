"""Follow-up work after a main turn: next-prompt suggestions (and, later, speculation)."""
