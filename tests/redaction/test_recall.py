"""What the recall rules must leave alone: code, labels and prose next to each new form.

The forms themselves (a chosen word under a password key, XML and .NET settings,
connection strings, passwords on command lines, SendGrid/Twilio/Mailgun/Shopify/
DigitalOcean/Databricks/Azure keys, a GCP key id) are in fakes.py's case lists, which
test_scan.py checks are each replaced by their marker; here are the near misses of each
rule, in the shapes real code and documentation take.
"""

from __future__ import annotations

import pytest

from qshell.redaction import redact, scan
from tests.redaction.fakes import HEX, body

STRONG_KEYS = [
    "password = get_password()",
    '$last_update_token = "\\"$last_update_token\\"";',  # git's fsmonitor hook sample
    '"python -c pass": lambda: run(),',  # a key `pass`, then code
    'token = "\\"${TOKEN}\\""',
    "password: str",
    "password: SecretStr",
    "password: OAuthFlowPassword | None = None",
    "password=args.password",
    'password = os.environ["X"]',
    '"password": password',
    "password=None",
    "password: ${DB_PASS}",
    "password = self.password",
    'password_field = "password"',
    "strength = PasswordStrength.WEAK",
    "password = user_password",
    "secret = webhook_secret",
    "def connect(password=password, secret=secret):",
    "connect(password=plaintext, user=user)",
    "password = plaintext;",
    'pass = username + ":" + password',
    "userpass = username",
    "password: boolean",
    'errors = {"password": "invalid"}',
    "existingSecret: my-app-secret",
    "secret: mysecretname",
    # labels and prose, in any language
    'password: "Password"',
    'password: "Enter your password"',
    '"password": "Passwort"',
    '"password": "Contraseña"',
    '"password": "Пароль"',
    'password: "Mot de passe"',
    'secret: "used for signing the session cookie"',
    'passphrase: "correct horse"',
    "secret: optional string used to sign",
    ":param password: the password to send",
    "use --password option to set it",
    # token and key names keep to values that look generated
    "token: somewordtoken",
    "api_key = somewordvalue",
    "TOKEN=hunterhunter",
]
XML_AND_SETTINGS = [
    "</password>",
    '<input type="password" name="password">',
    '<label for="password">Password</label>',
    "<password>${DB_PASS}</password>",
    "<password>Password</password>",
    "<PasswordHash>x</PasswordHash>",
    '<add key="Theme" value="dark" />',
    '<add key="ApiKey" value="%API_KEY%" />',
    '<add key="DbPassword" value="" />',
    "Server=db;User Id=sa;Password=${DB_PASSWORD};",
    "Server=db;Integrated Security=true;Database=app;",
    "AccountKey=;AccountName=devstoreaccount1",
    "account_key = settings.azure_account_key",
    '"private_key_id": "TODO"',
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
]
COMMAND_LINES = [
    "mysql -u root -p app",
    'mysql -u root -p"$MYSQL_PWD" app',
    "mysql -uroot -ppassword",
    "find / -name mysql -print",
    "pip install mysqlclient -pre",
    'curl -u "$USER:$TOKEN" https://x',
    "curl -u deploy https://x",
    "curl --user-agent x:y https://x",
    'sshpass -p "$SSHPASS" ssh host',
    "sshpass -p password ssh host",
    "sshpass -f ~/.pw ssh host",
]
TOKEN_SHAPES = [
    "key-value pairs are stored in a key-0000000000000000000000000000000 row",
    "SKIPPED: 3 tests; TASK_SKETCH",
    "SK" + "0" * 32,
    "shpat_ is the prefix of a Shopify admin token",
    "dapi_version = 2",
    "dop_v1_ is the DigitalOcean prefix",
    "SG.example.org",
    f"commit {body(40, HEX)}",
    f'AC{body(32, HEX)}, "two"',
    # a placeholder ending in a non-ASCII ellipsis is judged on the text, not its ASCII copy
    "https://alice:ghp_…@github.com/o/r.git",
]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(text, id=f"{rule}:{text[:40]}")
        for rule, texts in (
            ("strong-keys", STRONG_KEYS),
            ("xml-settings", XML_AND_SETTINGS),
            ("command-lines", COMMAND_LINES),
            ("token-shapes", TOKEN_SHAPES),
        )
        for text in texts
    ],
)
def test_code_labels_and_prose_near_each_recall_rule_are_left_alone(text: str) -> None:
    assert scan(text) == []


def test_a_connection_string_password_is_hidden_up_to_its_field_end_not_the_next_field() -> None:
    text, findings = redact("Server=db;Password=wintersnow;Database=app;Encrypt=true")
    assert text == "Server=db;Password=[redacted: password #1];Database=app;Encrypt=true"
    assert [f.kind for f in findings] == ["password"]


def test_a_dotnet_setting_holding_a_connection_string_hides_only_its_password() -> None:
    text, _ = redact('<add key="Db" value="Server=db;User Id=sa;Pwd=wintersnow;" />')
    assert text == '<add key="Db" value="Server=db;User Id=sa;Pwd=[redacted: password #1];" />'


def test_a_chosen_word_in_a_sentence_after_a_password_key_is_prose_not_a_password() -> None:
    assert scan("password: wintersnow") != []
    assert scan("password: wintersnow is what the docs use") == []
