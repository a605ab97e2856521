"""Redaction of secrets in everything a snapshot or report holds (DESIGN section 10).

Two layers, both on by default:

1. By name: an environment variable whose name says it is a secret
   (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``...) has its value
   replaced, whatever the value looks like. Probes call :meth:`Redactor.env`.
2. By value: every string in the finished snapshot, bench file or report is
   swept (:meth:`Redactor.sweep`) for credentials in URLs
   (``https://user:token@host``, the password may hold ``@``) and without a
   scheme (``user:pass@host``), secret query parameters (``?private_token=``),
   command-line flags (``--token X``, ``--api-key=X``, ``--password X``),
   ``NAME=VALUE`` assignments whose name is a secret (``HF_TOKEN=...``),
   ``Bearer``/``Basic`` credentials, and well-known token shapes (GitHub,
   GitLab, Hugging Face, AWS, Google, Slack, OpenAI-style keys, JWTs,
   private-key blocks). In a swept tree, a key shaped like an environment
   variable name (``HF_TOKEN``) with a secret name has its string value
   replaced too.

Every replacement is recorded (where, why; never the value) so the snapshot
and the report can say what was redacted. ``Redactor(enabled=False)`` is the
explicit ``--no-redact``.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

REDACTED = "<redacted>"

# A name is split into words (on "_", "-", ".", and camelCase) and judged by its words, so that
# HF_TOKEN, --hf-token and ?private_token= are secrets while MAX_TOKENS, --tokenizer, --pad-token-id,
# HF_TOKEN_PATH and ?signature_version= are not.
_SECRET_WORDS = {
    "token",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "credential",
    "credentials",
    "pat",
    "cookie",
    "bearer",
    "pwd",
    "auth",
}
_QUERY_WORDS = {"signature", "sig", "key"}  # in a URL's query string these sign or open a request
_JOINED = ("password", "passwd", "passphrase", "secret", "apikey", "accesskey")
_SUFFIXES = ("token", "apikey", "credentials")
_SECRET_PAIRS = {
    ("api", "key"),
    ("access", "key"),
    ("private", "key"),
    ("secret", "key"),
    ("session", "key"),
    ("client", "secret"),
    ("auth", "token"),
    ("auth", "key"),
    ("wandb", "key"),
    ("openai", "key"),
}
# a last word that makes the value a description of a secret, not the secret itself
_QUALIFIERS = {
    "path",
    "file",
    "dir",
    "env",
    "type",
    "mode",
    "name",
    "id",
    "ids",
    "size",
    "budget",
    "len",
    "length",
    "count",
    "backend",
    "sock",
    "socket",
    "url",
    "endpoint",
    "version",
    "method",
    "header",
    "prefix",
    "kind",
    "source",
    "format",
    "scope",
    "expiry",
    "ttl",
    "timeout",
    "enabled",
    "required",
    # a file name's extension: "api_key.json: is empty" names a file, not a key
    "json",
    "yaml",
    "yml",
    "txt",
    "log",
    "md",
    "html",
    "cfg",
    "conf",
    "ini",
    "toml",
    "pem",
    "csv",
}
# tokenizer special tokens (--eos-token, pad_token) are not secrets
_TOKENIZER_WORDS = {
    "pad",
    "eos",
    "bos",
    "unk",
    "sep",
    "cls",
    "mask",
    "special",
    "start",
    "end",
    "stop",
}
_BOOLEAN_VALUES = {"true", "false", "none", "null", "0", "1", "yes", "no", "on", "off", ""}


def _words(name: str) -> list[str]:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.strip("-\"' "))
    return [w for w in re.split(r"[-_.\s]+", name.lower()) if w]


@functools.lru_cache(maxsize=4096)
def _secret_words(name: str, *, last_key: bool = False) -> bool:
    """True when ``name``'s words name a secret (see the word sets above); ``last_key``: "..._KEY" counts.

    A secret word run together with another (PGPASSWORD, HFTOKEN, ACCESSTOKEN, passWord) counts:
    a word ending in one, or the name holding password/passwd/passphrase/secret anywhere.
    """
    words = _words(name)
    if not words or words[-1] in _QUALIFIERS:
        return False
    if any(x in "".join(words) for x in _JOINED):
        return True
    for i, w in enumerate(words):
        if w in _SECRET_WORDS and not (w == "token" and i and words[i - 1] in _TOKENIZER_WORDS):
            return True
        if w.endswith(_SUFFIXES) and w not in _SECRET_WORDS and w[:-5] not in _TOKENIZER_WORDS:
            return True
    if any(p in _SECRET_PAIRS for p in zip(words, words[1:])):
        return True
    return last_key and len(words) > 1 and words[-1] == "key"


_VALUE = r"(?:\"[^\"\n]{0,1024}\"|'[^'\n]{0,1024}'|[^\s'\"&;,]+)"
_VALUE_RX = re.compile(_VALUE)
_QUERY_VALUE_RX = re.compile(r"[^&\s#]+")
# userinfo runs to the last "@" before the path: a password may hold a literal "@"
_URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z+.\-])(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]{0,31}://)(?P<cred>[^/\s?#]+)@(?=[^/\s@?#]*(?:[/\s?#:]|$))"
)
# user:password@host without a scheme (MASTER_ADDR=user:pw@host, proxy settings)
_BARE_CREDENTIALS = re.compile(
    r"(?<![\w/:@.<>%+-])(?P<cred>[A-Za-z0-9._%+-]{1,256}:[^\s/@:<>]+)@(?!sha\d+:)"
    r"(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?:[:/\s]|$))"
)
# The named patterns match a name and its separator only; the value is matched after a secret name
# (see _sub_named), so a harmless name never swallows the text after it.
_QUERY = re.compile(r"[?&;](?P<name>[A-Za-z0-9_.-]{1,128})=")
_FLAG = re.compile(r"(?<![^\s\"'(])(?P<name>--?[A-Za-z][A-Za-z0-9_-]{0,127})(?:=|\s+)")
_ASSIGNMENT = re.compile(r"(?<![\w-])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,127})=")
# "api_key: x", "\"password\": \"x\"", "HF_TOKEN: hf_..", "aws_secret_access_key = x" (config lines, headers);
# a name right after "/" or "~" is a file path's last part ("/tmp/t/passwd: is a file"), not a key
_KEY_VALUE = re.compile(
    r"(?<![\w.~/-])[\"']?(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,63})[\"']?[ \t]{0,64}[:=][ \t]{0,64}"
)
_AUTH_HEADER = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization\s*[:=]\s*(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
    r"(?P<value>[^\s\"',]+)",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(
    r"(?P<key>\b(?:bearer|basic)\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE
)
_COOKIE = re.compile(r"(?P<key>\b(?:set-)?cookie\s*:\s*)(?P<value>[^\n\"']+)", re.IGNORECASE)
_USER_FLAG = re.compile(r"(?P<key>(?<!\S)(?:-u|--user)\s+)(?P<value>[^\s:]+:\S+)")
_LOGIN_P = re.compile(r"(?P<key>\blogin\b[^\n]{0,200}?\s-p\s+)(?P<value>\S+)")
_MYSQL_P = re.compile(r"(?P<key>\bmysql\b[^\n]{0,200}?\s-p)(?P<value>[^\s-]\S*)")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_TOKEN_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    (
        "GitHub token",
        re.compile(
            r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,4096}|github_pat_[A-Za-z0-9_]{20,4096})(?![A-Za-z0-9])"
        ),
    ),
    ("GitLab token", re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{20,4096}(?![A-Za-z0-9])")),
    ("Hugging Face token", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,4096}(?![A-Za-z0-9])")),
    ("Google API key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9])")),
    ("Google OAuth token", re.compile(r"(?<![A-Za-z0-9])ya29\.[A-Za-z0-9_\-]{20,4096}")),
    ("AWS access key id", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])")),
    (
        "Slack token",
        re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,4096}(?![A-Za-z0-9])"),
    ),
    (
        "webhook URL",
        re.compile(
            r"(?:hooks\.slack\.com/services/[A-Za-z0-9/]+|discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+)"
        ),
    ),
    ("PyPI token", re.compile(r"(?<![A-Za-z0-9])pypi-[A-Za-z0-9_\-]{40,4096}")),
    ("NVIDIA API key", re.compile(r"(?<![A-Za-z0-9])nvapi-[A-Za-z0-9_\-]{20,4096}")),
    (
        "API key",
        re.compile(
            r"(?<![\w-])sk-(?:proj-|svcacct-|admin-|ant-api\d+-)?(?=[A-Za-z_]*\d)[A-Za-z0-9_]{20,4096}"
        ),
    ),
    (
        "JWT",
        re.compile(
            r"(?<![\w-])eyJ[A-Za-z0-9_\-]{10,4096}\.[A-Za-z0-9_\-]{10,4096}\.[A-Za-z0-9_\-]{10,4096}\b"
        ),
    ),
    (
        "private key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
    ),
]


@dataclass(frozen=True)
class Redaction:
    """One redacted value: where it was (a dotted path or a label) and why."""

    where: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "why": self.why}


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True if an environment variable called ``name`` holds a secret by its name.

    Judged by the name's words: HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, GITHUB_PAT, STRIPE_KEY
    are secrets; MAX_TOKENS, TOKENIZER, HF_TOKEN_PATH, SSH_AUTH_SOCK, XAUTHORITY, AUTHOR are not. No
    prefix exempts a name: NCCL_IB_PKEY and GIT_AUTHOR_EMAIL hold no secret word, NCCL_IB_PASSWORD does.
    """
    return _secret_words(name, last_key=True)


def _is_secret_flag(flag: str) -> bool:
    """``--hf-token``, ``--api-key``, ``--password``, ``--wandb-key``: a flag whose words name a secret
    (``--max-tokens``, ``--tokenizer``, ``--pad-token-id``, ``--password-file`` do not)."""
    return _secret_words(flag, last_key=True) or flag.lstrip("-").lower() == "key"


def _token_like(user: str) -> bool:
    """A URL's user part that is a token in disguise (``https://<token>@github.com``): long, or mixing
    letters and digits over 8 characters; ``git``, ``ubuntu``, ``oauth2`` are names."""
    return len(user) >= 20 or (
        len(user) >= 8 and any(c.isdigit() for c in user) and any(c.isalpha() for c in user)
    )


def _sub_named(
    key_rx: re.Pattern[str],
    value_rx: re.Pattern[str],
    text: str,
    judge: Callable[[str], bool],
    keep: Callable[[str, str], str],
) -> str:
    """Replace the value after each secret name that ``key_rx`` finds (group ``name``).

    ``key_rx`` matches a name and its separator only (bounded lengths); the
    value is matched by ``value_rx`` right after a secret name and handed to
    ``keep(key, value)``. A harmless name is stepped over without its
    "value", so ``commit: password: hunter3`` and ``--foo --token X`` are
    caught, and the scan stays linear in the text's length.
    """
    out: list[str] = []
    pos = 0  # copied up to here
    at = 0  # search from here
    while True:
        m = key_rx.search(text, at)
        if m is None:
            break
        at = m.end() if m.end() > m.start() else m.start() + 1
        if not judge(m.group("name")):
            continue
        v = value_rx.match(text, m.end())
        if v is None:
            continue
        out.append(text[pos : m.start()])
        out.append(keep(m.group(0), v.group(0)))
        pos = at = v.end()
    out.append(text[pos:])
    return "".join(out)


# Literal strings without which a pattern cannot match: a pattern runs only when its trigger is in
# the text (a substring test is a fast C scan), so a long text without them costs one pass each.
_TOKEN_TRIGGERS = {
    "GitHub token": ("gh", "github_pat_"),
    "GitLab token": ("glpat-",),
    "Hugging Face token": ("hf_",),
    "Google API key": ("AIza",),
    "Google OAuth token": ("ya29.",),
    "AWS access key id": ("AKIA", "ASIA"),
    "Slack token": ("xox",),
    "webhook URL": ("hooks.slack.com", "discord"),
    "PyPI token": ("pypi-",),
    "NVIDIA API key": ("nvapi-",),
    "API key": ("sk-",),
    "JWT": ("eyJ",),
    "private key": ("PRIVATE KEY",),
}

_ANY_TRIGGER = re.compile("|".join(re.escape(t) for ts in _TOKEN_TRIGGERS.values() for t in ts))


def redact_text(text: str) -> tuple[str, list[str]]:
    """Replace credentials in URLs and token-shaped substrings of ``text``.

    Returns:
        (new text, list of reasons), the list empty when nothing was replaced.
    """
    reasons: list[str] = []

    def _url(m: re.Match[str]) -> str:
        cred = m.group("cred")
        if cred == REDACTED or (
            ":" not in cred and not _token_like(cred)
        ):  # git@, user@: a name, not a secret
            return m.group(0)
        reasons.append("credentials in URL")
        return f"{m.group('scheme')}{REDACTED}@"

    low = text.lower()
    out = _URL_CREDENTIALS.sub(_url, text) if "://" in text and "@" in text else text

    def _bare(m: re.Match[str]) -> str:
        reasons.append("credentials before a host")
        return f"{REDACTED}@"

    if ":" in out and "@" in out:
        out = _BARE_CREDENTIALS.sub(_bare, out)

    def _keep(key: str, value: str, why: str) -> str:
        if value.strip("\"'") in (REDACTED, "") or value.strip("\"'").lower() in _BOOLEAN_VALUES:
            return key + value
        reasons.append(why)
        return key + REDACTED

    def _by_name(
        key_rx: re.Pattern[str], value_rx: re.Pattern[str], judge, why: str, text_in: str
    ) -> str:
        return _sub_named(
            key_rx, value_rx, text_in, judge, lambda key, value: _keep(key, value, why)
        )

    if "authoriz" in low:
        out = _AUTH_HEADER.sub(
            lambda m: _keep(m.group("key"), m.group("value"), "HTTP credentials"), out
        )
    if "bearer" in low or "basic" in low:
        out = _AUTH_SCHEME.sub(
            lambda m: _keep(m.group("key"), m.group("value"), "HTTP credentials"), out
        )
    if "cookie" in low:
        out = _COOKIE.sub(lambda m: _keep(m.group("key"), m.group("value"), "HTTP cookie"), out)
    if "=" in out:
        out = _by_name(
            _QUERY,
            _QUERY_VALUE_RX,
            lambda n: (
                _secret_words(n, last_key=True)
                or (bool(_words(n)) and _words(n)[-1] in _QUERY_WORDS)
            ),
            "secret query parameter",
            out,
        )
    if "-" in out:
        out = _by_name(_FLAG, _VALUE_RX, _is_secret_flag, "secret command-line flag", out)
    if "=" in out:
        out = _by_name(_ASSIGNMENT, _VALUE_RX, is_secret_name, "secret by name", out)
    if ":" in out or "=" in out:
        out = _by_name(
            _KEY_VALUE,
            _VALUE_RX,
            lambda n: _secret_words(n, last_key=True) and n.lower() not in ("auth",),
            "secret by name",
            out,
        )
    for rx, trigger in ((_USER_FLAG, "-u"), (_LOGIN_P, "login"), (_MYSQL_P, "mysql")):
        if trigger in low:
            out = rx.sub(
                lambda m: _keep(m.group("key"), m.group("value"), "password on a command line"), out
            )
    if not _ANY_TRIGGER.search(out):  # one scan; most strings (package names, versions) hold none
        return out, reasons
    for label, pattern in _TOKEN_SHAPES:
        if not any(t in out for t in _TOKEN_TRIGGERS[label]):
            continue
        out, n = pattern.subn(REDACTED, out)
        if n:
            reasons.append(label)
    return out, reasons


class Redactor:
    """Collects redactions for one snapshot; thread-safe (probes run concurrently)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._records: list[Redaction] = []
        self._lock = threading.Lock()

    @property
    def records(self) -> list[Redaction]:
        with self._lock:
            return list(self._records)

    def _add(self, where: str, why: str) -> None:
        with self._lock:
            rec = Redaction(where, why)
            if rec not in self._records:  # two URLs in one value: one record
                self._records.append(rec)

    def env(self, name: str, value: str, where: str) -> str:
        """Return ``value`` or :data:`REDACTED` for an environment variable ``name``.

        ``where`` names the place for the record, e.g. ``nccl_env.parent.HF_TOKEN``.
        """
        if not self.enabled:
            return value
        if is_secret_name(name) and value:
            if value == REDACTED:
                return value
            self._add(where, "secret by name")
            return REDACTED
        return self.text(value, where)

    def text(self, value: str, where: str) -> str:
        """Return ``value`` with URL credentials and token shapes replaced."""
        if not self.enabled or not isinstance(value, str):
            return value
        new, reasons = redact_text(value)
        for why in reasons:
            self._add(where, why)
        return new

    def sweep(self, obj: Any, where: str = "") -> Any:
        """Return a copy of a tree with every string passed through :meth:`text`.

        The tree may hold dicts, lists, tuples and dataclass instances (a diff's
        ``Analysis`` with its hypotheses, findings, changes and commits): a
        dataclass is copied and each of its fields swept, so one call on the
        object every renderer reads covers every output. Enums, numbers and
        other objects are kept as they are.
        """
        if not self.enabled:
            return obj
        if isinstance(obj, enum.Enum):
            return obj
        if isinstance(obj, str):
            return self.text(obj, where)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            new = copy.copy(obj)
            for f in dataclasses.fields(obj):
                object.__setattr__(
                    new,
                    f.name,
                    self.sweep(getattr(obj, f.name), f"{where}.{f.name}" if where else f.name),
                )
            return new
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            return tuple(self.sweep(v, f"{where}[{i}]") for i, v in enumerate(obj))
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                path = f"{where}.{k}" if where else str(k)
                if isinstance(k, str) and isinstance(v, str) and _ENV_NAME.match(k):
                    out[k] = self.env(
                        k, v, path
                    )  # an environment map (bench --env, a report's env table)
                else:
                    out[k] = self.sweep(v, path)
            return out
        if isinstance(obj, list):
            return [self.sweep(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj
