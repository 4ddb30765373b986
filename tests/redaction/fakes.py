"""Fake secrets in every format the scanner knows, made when a test runs.

None is written out in the repository (a push-protection scanner, or this one's own
false-positive count, would take them for real ones): each is a format's prefix and a
body drawn from a seeded generator, so a test sees the same values every run.
"""

from __future__ import annotations

import base64
import random
import string

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
BASE64 = ALNUM + "+/"
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"


def body(length: int, alphabet: str = ALNUM, *, seed: int = 0) -> str:
    draw = random.Random(f"{seed}:{length}:{alphabet}")
    return "".join(draw.choice(alphabet) for _ in range(length))


def github_token(seed: int = 0) -> str:
    return "ghp_" + body(36, seed=seed)


def aws_key_id() -> str:
    return "AKIA" + body(16, UPPER)


def aws_secret_key() -> str:
    return body(40, BASE64, seed=1)


def pem_block(label: str = "RSA PRIVATE KEY", *, breaks: str = "\n") -> str:
    lines = [body(64, BASE64, seed=n) for n in range(4)]
    return breaks.join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def putty_key() -> str:
    public = "\n".join(body(64, BASE64, seed=10 + n) for n in range(2))
    private = "\n".join(body(64, BASE64, seed=20 + n) for n in range(2))
    return (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: me@box\n"
        f"Public-Lines: 2\n{public}\nPrivate-Lines: 2\n{private}\n"
        f"Private-MAC: {body(64, '0123456789abcdef')}"
    )


def kube_key_data() -> str:
    return base64.b64encode(pem_block().encode()).decode()


def azure_storage_key() -> str:
    return base64.b64encode(body(64, BASE64, seed=5).encode()).decode()[:86] + "=="


def jwt() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = base64.urlsafe_b64encode(b'{"sub":"1234567890","n":"x"}').decode().rstrip("=")
    return f"{head}.{claims}.{body(43, ALNUM + '-_')}"


# (kind, text with {secret} where the secret goes, the secret)
TOKEN_CASES: list[tuple[str, str, str]] = [
    ("private-key", "key:\n{secret}\ndone\n", pem_block()),
    ("private-key", "{secret}\n", pem_block("OPENSSH PRIVATE KEY")),
    ("private-key", "{secret}\n", pem_block("ENCRYPTED PRIVATE KEY")),
    ("private-key", "{secret}\n", pem_block("PGP PRIVATE KEY BLOCK")),
    (
        "private-key",
        '{{"type": "service_account", "private_key": "{secret}\\n", "client_email": "a@b.iam"}}',
        pem_block("PRIVATE KEY", breaks="\\n"),
    ),
    ("private-key", "users:\n- user:\n    client-key-data: {secret}\n", kube_key_data()),
    ("putty-private-key", "{secret}\n", putty_key()),
    ("aws-access-key", "aws_access_key_id = {secret}\n", aws_key_id()),
    ("aws-secret-key", "aws_secret_access_key = {secret}\n", aws_secret_key()),
    ("aws-secret-key", "AWS_SECRET_ACCESS_KEY={secret}\n", aws_secret_key()),
    ("github-token", "export GITHUB_TOKEN={secret}\n", github_token()),
    ("github-token", "token: {secret}\n", "github_pat_" + body(82, ALNUM + "_")),
    ("gitlab-token", "CI_TOKEN={secret}\n", "glpat-" + body(20, ALNUM + "-_")),
    ("slack-token", "slack: {secret}\n", "xoxb-" + body(12, string.digits) + "-" + body(24)),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/{secret}\n",
        f"T{body(8, UPPER)}/B{body(8, UPPER)}/{body(24)}",
    ),
    ("stripe-key", "stripe.api_key = '{secret}'\n", "sk_live_" + body(24)),
    ("stripe-key", "STRIPE={secret}\n", "rk_test_" + body(24)),
    ("openai-key", "OPENAI_API_KEY={secret}\n", "sk-proj-" + body(48, ALNUM + "_-")),
    ("anthropic-key", "ANTHROPIC_API_KEY={secret}\n", "sk-ant-api03-" + body(90, ALNUM + "_-")),
    ("npm-token", "//registry.npmjs.org/:_authToken={secret}\n", "npm_" + body(36)),
    ("pypi-token", "password = {secret}\n", "pypi-AgEIcHlwaS5vcmc" + body(60, ALNUM + "_-")),
    ("google-api-key", "key={secret}&q=1\n", "AIza" + body(35, ALNUM + "_-")),
    ("huggingface-token", "HF_TOKEN={secret}\n", "hf_" + body(34)),
    ("vault-token", "{secret}\n", "hvs." + body(90, ALNUM + "_-")),
    ("jwt", "Cookie: session={secret}; Path=/\n", jwt()),
    ("url-password", "url = https://deploy:{secret}@github.com/o/r.git\n", body(14)),
    ("url-password", "DATABASE_URL=postgres://app:{secret}@db:5432/app\n", body(16, ALNUM + "!%")),
    ("url-token", "url = https://{secret}@gitlab.example.com/o/r.git\n", body(32)),
    # what `git remote -v` and `git config -l` print of a remote whose URL holds a password
    ("url-password", "origin\thttps://alice:{secret}@github.com/o/r.git (fetch)\n", body(20)),
    ("url-password", "remote.origin.url=https://x-access-token:{secret}@h/r.git\n", body(30)),
    ("bearer-token", "Authorization: Bearer {secret}\n", body(40, ALNUM + "._-")),
    ("sendgrid-key", "SENDGRID_API_KEY={secret}\n", f"SG.{body(22, URLSAFE)}.{body(43, URLSAFE)}"),
    ("twilio-api-key", "twilio:\n  key_sid: {secret}\n", "SK" + body(32, HEX)),
    (
        "twilio-auth-token",
        f'client = Client("AC{body(32, HEX, seed=3)}", "{{secret}}")\n',
        body(32, HEX),
    ),
    (
        "private-key-id",
        '{{"type": "service_account", "private_key_id": "{secret}", "client_id": "1"}}',
        body(40, HEX),
    ),
    ("mailgun-key", "MAILGUN_API_KEY={secret}\n", "key-" + body(32, HEX)),
    ("shopify-token", "X-Shopify-Access-Token: {secret}\n", "shpat_" + body(32, HEX)),
    ("shopify-token", "SHOPIFY_SECRET={secret}\n", "shpss_" + body(32, HEX)),
    ("digitalocean-token", "DIGITALOCEAN_TOKEN={secret}\n", "dop_v1_" + body(64, HEX)),
    ("databricks-token", "host = x\ntoken = {secret}\n", "dapi" + body(32, HEX)),
    (
        "azure-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={secret};"
        "EndpointSuffix=core.windows.net\n",
        azure_storage_key(),
    ),
    (
        "basic-auth",
        "Authorization: Basic {secret}\n",
        base64.b64encode(b"bob:" + body(12).encode()).decode(),
    ),
]
# the same for values judged by their key's name
ASSIGNMENT_CASES: list[tuple[str, str, str]] = [
    ("password", "[sendemail]\n\tsmtpPass = {secret}\n", body(12)),
    ("password", "[sendemail]\n\tsmtppass = {secret}\n", body(12)),
    ("token", "[hub]\n\toauthtoken = {secret}\n", body(40, "0123456789abcdef")),
    # `git config --get-regexp` prints a key and its value with one space between
    ("password", "sendemail.smtppass {secret}\n", body(12)),
    ("token", "user.name x\nhub.oauthtoken {secret}\n", body(40, "0123456789abcdef")),
    ("password", "credential.https://example.com.password {secret}\n", body(10) + "3"),
    ("secret", "x.clientsecret {secret}", body(24)),
    (
        "bearer-token",
        "http.extraheader=Authorization: token {secret}\n",
        body(40, "0123456789abcdef"),
    ),
    ("password", "DB_PASSWORD={secret}\n", "hunter2"),
    ("password", "password: {secret}\n", "S3cr3t!pass"),
    ("password", 'conn = connect(user="app", password="{secret}")\n', "w1nter-is-coming"),
    ("api-key", '{{"api_key": "{secret}"}}\n', body(32)),
    ("secret", "client_secret: '{secret}'\n", body(24, ALNUM + "-_")),
    ("secret", "SECRET_KEY = '{secret}'\n", "django-insecure-" + body(40, ALNUM + "!@#%^&*-")),
    (
        "auth-token",
        '{{"auths": {{"reg.io": {{"auth": "{secret}"}}}}}}\n',
        base64.b64encode(b"u:" + body(10).encode()).decode(),
    ),
    ("auth-token", "_auth={secret}\n", base64.b64encode(b"u:" + body(10).encode()).decode()),
    ("password", "machine api.example.org login bob password {secret}\n", body(12) + "9"),
    ("password", "machine host\n  login bob\n  password {secret}\n", body(10) + "7"),
    ("credential", 'credentials = "{secret}"\n', body(30)),
    ("api-key", "[default]\napikey = {secret}\n", body(32, "0123456789abcdef")),
    # under a password or secret key a chosen word is a password, where it stands alone
    ("password", "password: {secret}\n", "correcthorsebattery"),
    ("password", "DB_PASSWORD={secret}\n", "hunterhunter"),
    ("password", '{{"password": "{secret}"}}\n', "summertime"),
    ("password", 'passphrase: "{secret}"\n', "correct horse battery staple"),
    ("password", "[client]\nuser = app\npassword = {secret}  # set by ops\n", "bluebirds"),
    ("secret", "client_secret = {secret}\n", "wintersnow"),
    ("password", "PGPASSWORD={secret} psql -h db app\n", "wintersnow"),
    ("password", "mysql --password={secret} app\n", "wintersnow"),
    ("password", "docker login --password {secret} reg.io\n", body(12) + "7"),
    # XML elements, .NET settings and connection strings
    ("password", "<password>{secret}</password>\n", "s3cr3tP4ss"),
    ("password", "<db:Password>{secret}</db:Password>\n", "wintersnow"),
    ("api-key", '<add key="ApiKey" value="{secret}" />\n', body(32, HEX)),
    ("password", '<add key="SmtpPassword" value="{secret}" />\n', "wintersnow"),
    ("password", "Server=db;User Id=sa;Password={secret};Database=app\n", "Pa55w0rd!"),
    ("password", "Server=db;Uid=sa;Pwd={secret};\n", "wintersnow"),
    ("password", 'conn = "Host=db;Username=app;Password={secret}"\n', "wintersnow"),
]
# passwords given to a command line's options
COMMAND_CASES: list[tuple[str, str, str]] = [
    ("password", "mysql -u root -p{secret} app\n", "S3cretPass"),
    ("password", "docker exec -it db mysqldump -uroot -p'{secret}' app > dump.sql\n", body(10)),
    ("password", "curl -u deploy:{secret} https://api.example.org/v1\n", body(14)),
    ("password", "curl -fsS --user 'ci:{secret}' https://h/x\n", body(14)),
    ("password", "sshpass -p '{secret}' ssh deploy@host\n", "S3cret99"),
    ("password", "sshpass -e -p {secret} scp f host:\n", body(9)),
]
