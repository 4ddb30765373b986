"""A session's vault: secrets out as markers, markers back in only where the file holds them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from qshell.redaction import Vault, marker
from tests.redaction.fakes import github_token, pem_block

TOKEN = github_token()
CONFIG = f"[auth]\ntoken = {TOKEN}\nname = demo\n"
MARK = marker("github-token", 1)


def test_a_redacted_text_holds_the_marker_and_the_vault_gives_the_value_back_in_place():
    vault = Vault()
    seen = vault.redact(CONFIG).text
    assert TOKEN not in seen and MARK in seen
    rewritten = seen.replace("demo", "renamed")
    done = vault.restore(rewritten, held=CONFIG)
    assert not done.refused
    assert done.text == CONFIG.replace("demo", "renamed")


def test_a_marker_is_not_put_back_into_a_file_that_does_not_hold_its_value():
    vault = Vault()
    vault.redact(CONFIG)
    done = vault.restore(f"copy = {MARK}\n", held="copy = 1\n")
    assert done.refused and done.elsewhere == (MARK,)
    assert "does not hold it" in done.problem("copy.ini")


def test_a_marker_the_vault_never_gave_is_refused():
    vault = Vault()
    vault.redact(CONFIG)
    invented = marker("aws-secret-key", 7)
    done = vault.restore(f"{MARK}\n{invented}\n", held=CONFIG)
    assert done.refused and done.unknown == (invented,)
    assert "stands for no secret" in done.problem("config.ini")


def test_a_marker_the_file_already_holds_as_text_stays_as_it_is():
    vault = Vault()
    held = f"docs say {marker('password', 3)} looks like this\n"
    done = vault.restore(held.replace("docs", "the docs"), held=held)
    assert not done.refused and done.text == held.replace("docs", "the docs")


def test_a_key_shown_on_numbered_read_file_lines_comes_back_as_the_file_holds_it():
    key = pem_block()
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(key.split("\n"), 1))
    vault = Vault()
    assert vault.redact(numbered).text == f"     1\t{marker('private-key', 1)}"
    done = vault.restore(f"{marker('private-key', 1)}\n", held=f"{key}\n")
    assert done.text == f"{key}\n" and not done.refused


def test_a_file_with_crlf_line_ends_still_holds_a_multi_line_key():
    key = pem_block()
    vault = Vault()
    seen = vault.redact(key).text
    assert not vault.restore(seen, held=key.replace("\n", "\r\n")).refused


def test_parallel_redactions_give_one_marker_per_value():
    vault = Vault()
    tokens = [github_token(n) for n in range(20)]
    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(lambda t: vault.redact(f"t={t}").text, tokens * 3))
    assert len(set(texts)) == 20
    numbers = sorted(int(t.split("#")[1].rstrip("]")) for t in set(texts))
    assert numbers == list(range(1, 21))


def test_the_vault_never_shows_a_value_in_its_repr():
    vault = Vault()
    vault.redact(CONFIG)
    assert TOKEN not in repr(vault) and repr(vault) == "Vault(1 held)"


def test_a_marker_moved_where_its_value_would_not_read_as_a_secret_is_refused():
    """The model may put a marker back glued to a word (`x[redacted: … #1]`) or under a key
    that names no secret: written, the file would hold `xghp_…`, which no scanner finds on
    the next read. In place, standing alone, it comes back."""
    vault = Vault()
    token = github_token()
    held = f"token: {token}\n"
    shown = vault.redact(held).text
    made = marker("github-token", 1)
    done = vault.restore(f"note: x{made}\n", held=held)
    assert done.refused and done.exposed == (made,)
    assert "standing alone" in done.problem("deploy.cfg")
    kept = vault.restore(shown + "more: 1\n", held=held)
    assert not kept.refused and kept.text == held + "more: 1\n"
    word = "password: correcthorse\n"  # found only for its key
    chosen = vault.redact(word).text.removeprefix("password: ").strip()
    assert vault.restore(f"note: {chosen}\n", held=word).exposed == (chosen,)
