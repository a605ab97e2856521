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

import re
import threading
from dataclasses import dataclass
from typing import Any

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|"
    r"AUTH|COOKIE|SESSION_?KEY|_PAT$|^PAT_|SIGNATURE)",
    re.IGNORECASE,
)
# Names that match the pattern above but are not secrets.
_NOT_SECRET_NAMES = re.compile(r"^(NCCL_IB_.*|.*_AUTHOR.*|GIT_AUTHOR_.*|.*TOKENIZERS?_PARALLELISM.*)$", re.IGNORECASE)

# userinfo runs to the last "@" before the path: a password may hold a literal "@"
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<cred>[^/\s?#]+)@(?=[^/\s@?#]*(?:[/\s?#:]|$))")
# user:password@host without a scheme (MASTER_ADDR=user:pw@host, proxy settings)
_BARE_CREDENTIALS = re.compile(r"(?<![\w/:@.<>-])(?P<cred>[A-Za-z0-9._%+-]+:[^\s/@:<>]+)@(?!sha\d+:)(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?:[:/\s]|$))")
_SECRET_QUERY = re.compile(r"(?P<key>[?&;](?:[A-Za-z0-9_]*token|api_?key|apikey|key|secret|client_secret|password|passwd|"
                           r"pwd|sig|signature|auth|access_?key)=)(?P<value>[^&\s#]+)", re.IGNORECASE)
_SECRET_FLAG = re.compile(r"(?P<flag>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=|\s+)(?P<value>[^\s-][^\s]*|-[^\s-][^\s]*)")
_FLAG_WORDS = {"token", "password", "passwd", "passphrase", "secret", "apikey", "credential", "credentials", "auth", "pat"}
_FLAG_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "token"),
               ("client", "secret"), ("session", "key")}
_ASSIGNMENT = re.compile(r"(?<![\w-])(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^\s'\"&;]+)")
_AUTH_SCHEME = re.compile(r"\b(?P<scheme>Bearer|Basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_TOKEN_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b")),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("API key", re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}\b")),
    ("JWT", re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b")),
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)")),
]


@dataclass(frozen=True)
class Redaction:
    """One redacted value: where it was (a dotted path or a label) and why."""

    where: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "why": self.why}


def is_secret_name(name: str) -> bool:
    """True if an environment variable called ``name`` holds a secret by its name."""
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET_NAMES.match(name)


def _is_secret_flag(flag: str) -> bool:
    """``--hf-token``, ``--api-key``, ``--password``: a flag whose words name a secret (``--max-tokens`` does not)."""
    words = [w for w in re.split(r"[-_]+", flag.lstrip("-").lower()) if w]
    return any(w in _FLAG_WORDS for w in words) or any(p in _FLAG_PAIRS for p in zip(words, words[1:]))


def redact_text(text: str) -> tuple[str, list[str]]:
    """Replace credentials in URLs and token-shaped substrings of ``text``.

    Returns:
        (new text, list of reasons), the list empty when nothing was replaced.
    """
    reasons: list[str] = []

    def _url(m: re.Match[str]) -> str:
        if m.group("cred") == REDACTED:
            return m.group(0)
        reasons.append("credentials in URL")
        return f"{m.group('scheme')}{REDACTED}@"

    out = _URL_CREDENTIALS.sub(_url, text)

    def _bare(m: re.Match[str]) -> str:
        reasons.append("credentials before a host")
        return f"{REDACTED}@"

    out = _BARE_CREDENTIALS.sub(_bare, out)

    def _keep(key: str, value: str, why: str) -> str:
        if value == REDACTED:
            return key + value
        reasons.append(why)
        return key + REDACTED

    out = _SECRET_QUERY.sub(lambda m: _keep(m.group("key"), m.group("value"), "secret query parameter"), out)
    out = _SECRET_FLAG.sub(lambda m: _keep(m.group("flag") + m.group("sep"), m.group("value"), "secret command-line flag")
                           if _is_secret_flag(m.group("flag")) else m.group(0), out)
    out = _ASSIGNMENT.sub(lambda m: _keep(m.group("name") + "=", m.group("value"), "secret by name")
                          if is_secret_name(m.group("name")) else m.group(0), out)
    out = _AUTH_SCHEME.sub(lambda m: _keep(m.group("scheme") + " ", m.group("value"), "HTTP credentials"), out)
    for label, pattern in _TOKEN_SHAPES:
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
        """Return a copy of a JSON-like tree with every string passed through :meth:`text`."""
        if not self.enabled:
            return obj
        if isinstance(obj, str):
            return self.text(obj, where)
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                path = f"{where}.{k}" if where else str(k)
                if isinstance(k, str) and isinstance(v, str) and _ENV_NAME.match(k):
                    out[k] = self.env(k, v, path)  # an environment map (bench --env, a report's env table)
                else:
                    out[k] = self.sweep(v, path)
            return out
        if isinstance(obj, list):
            return [self.sweep(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj
