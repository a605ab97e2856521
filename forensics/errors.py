"""Domain errors and the process exit codes they map to (DESIGN section 12).

Core functions raise these; only the CLI layer turns them into one line on
stderr and an exit code. No core function prints or exits.
"""

from __future__ import annotations

EXIT_OK = 0
"""No regression (or the command simply succeeded)."""
EXIT_REGRESSION = 1
"""A regression was found (``forensics diff --fail-on``, ``bench compare``)."""
EXIT_BAD_INPUT = 2
"""Bad input or usage: unreadable, truncated, foreign or newer-schema file; bad option."""
EXIT_INCONCLUSIVE = 3
"""Too noisy or not enough data to decide."""


class ForensicsError(Exception):
    """Base class of every error the CLI reports as one line.

    Attributes:
        exit_code: the process exit code the CLI uses for it.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class BadInputError(ForensicsError):
    """A file or an argument the user gave cannot be used (exit code 2).

    The message names the thing (file path, option) and, where possible, the fix. A core
    function does not spell command-line flags: it names the parameter instead, with
    ``option`` (the message then follows the flag: ``BadInputError("must be at least 1, got 0",
    option="processes")``) or with ``{name}`` fields in the message listed in ``names``
    (``BadInputError("give {cmd} too", names=("cmd",))``). The
    CLI's error boundary puts the command's own flag there (:meth:`render`); ``str()`` uses
    ``--name``, the flag most commands give the parameter.

    Attributes:
        option: the parameter the message is about (its value follows the flag), or None.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        message: str,
        exit_code: int | None = None,
        *,
        option: str | None = None,
        names: tuple[str, ...] = (),
    ):
        self.template, self.option, self.names = message, option, names
        super().__init__(self.render(_default_flag), exit_code)

    def render(self, flag_of) -> str:
        """The message with ``option`` and each ``{name}`` of ``names`` spelt as ``flag_of(name)`` (a
        command's flag for that parameter)."""
        text = self.template
        for name in self.names:
            text = text.replace("{" + name + "}", flag_of(name))
        return f"{flag_of(self.option)} {text}" if self.option else text


def _default_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class InconclusiveError(ForensicsError):
    """The data cannot support a verdict (exit code 3)."""

    exit_code = EXIT_INCONCLUSIVE


class ProbeUnavailable(Exception):
    """Raised by a probe whose subject does not exist here (no GPU, no driver, not a repo).

    The runner records the probe as ``unavailable`` with ``str(exc)`` as the reason.
    It is not an error: a laptop has no NVIDIA driver.
    """
