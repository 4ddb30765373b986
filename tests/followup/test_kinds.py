"""A suggested prompt's kind, read off its first words: what the gate learns per kind."""

from __future__ import annotations

import pytest

from qshell.followup.kinds import OTHER, kind_of


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("run the tests", "test"),
        ("now run pytest -x tests/test_app.py", "test"),
        ("cargo test", "test"),
        ("make test", "test"),
        ("check the test still matches", "test"),
        ("build the docs", "build"),
        ("npm run build", "build"),
        ("make", "build"),
        ("make app.py shout the greeting", "edit"),
        ("add a docstring to greet", "edit"),
        ("Please rename DEFAULT_NAME to FALLBACK_NAME", "edit"),
        ("explain greet in detail", "explain"),
        ("what does util.py offer", "explain"),
        ("show me hello.py", "show"),
        ("where is greet used", "search"),
        ("list the python files", "search"),
        ("commit the change", "git"),
        ("git diff", "git"),
        ("run app.py", "run"),
        ("python app.py", "run"),
        ("hmm", OTHER),
        ("", OTHER),
    ],
)
def test_the_kind_comes_from_the_first_words(prompt, kind):
    assert kind_of(prompt) == kind
