"""no_push_suggestions: never suggest a next prompt that pushes, deploys or publishes.

qshell suggests your likely next prompt after each answer and, when speculation is on,
starts running it before you press Enter. qshell itself holds back a suggestion like
"push it" or "deploy to staging" until one of your prompts asked for that kind of action
(`suggestions.consequential`; a plugin adds kinds with `qshell_consequential_words`).
This plugin is stricter, for repositories where a push deploys: it rejects such
suggestions even after you asked, through `qshell_filter_suggestion` (they are counted
as suppressed with reason `plugin:no_push_suggestions` in the local telemetry), so
nothing of the kind is shown or speculated. It matches the words push, deploy, publish,
release, ship and upload in any form ("pushing", "deployed"), and commands such as `git push`,
`npm publish`, `twine upload` and `cargo publish`. No options.
"""

from __future__ import annotations

import re

from qshell.plugins import SuggestionCheck, hookimpl

OUTWARD = re.compile(
    r"\b(push|deploy|publish|release|ship|upload)(es|ed|ing|s)?\b",
    re.IGNORECASE,
)


@hookimpl
def qshell_filter_suggestion(text: str, context: SuggestionCheck) -> str | None:
    found = OUTWARD.search(text)
    return f"it would {found.group(1).lower()} something" if found else None
