"""Redaction of secrets in everything a snapshot or report holds (DESIGN section 10).

Two layers, both on by default:

1. By name: an environment variable whose name says it is a secret
   (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``...) has its value
   replaced, whatever the value looks like. Probes call :meth:`Redactor.env`.
2. By value: every string in the finished snapshot is swept for credentials
   in URLs (``https://user:token@host``) and well-known token shapes (GitHub,
   Hugging Face, AWS, Slack, OpenAI-style keys, JWTs, private-key blocks):
   :meth:`Redactor.sweep`.

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

_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<cred>[^/\s@:]+(?::[^/\s@]*)?)@")
_TOKEN_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")),
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
            self._records.append(Redaction(where, why))

    def env(self, name: str, value: str, where: str) -> str:
        """Return ``value`` or :data:`REDACTED` for an environment variable ``name``.

        ``where`` names the place for the record, e.g. ``nccl_env.parent.HF_TOKEN``.
        """
        if not self.enabled:
            return value
        if is_secret_name(name) and value:
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
            return {k: self.sweep(v, f"{where}.{k}" if where else str(k)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.sweep(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj
