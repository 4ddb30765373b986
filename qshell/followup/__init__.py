"""Follow-up work after a main turn: next-prompt suggestions and their speculation.

`followup.py` (`Followup`) is what front-ends drive for one conversation; `controller.py`
(`SuggestionController`) is the ghost-text state machine; `guards.py` and `suggestion.py`
decide whether and what to suggest; `speculator.py` and `speculation.py` run a suggestion
ahead on a fork of the session, behind `gate.py`'s speculative ToolRunner, on an overlay
from `qshell.overlay`, and `acceptance.py` makes an accepted one the real turn. Nothing here
imports a front-end.
"""
