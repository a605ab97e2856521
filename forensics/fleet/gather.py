"""Every rank's record to rank 0, with a deadline; missing ranks named, never waited on forever.

Two channels with the same operations:

- :class:`StoreChannel`: torch.distributed's c10d ``TCPStore`` at
  ``MASTER_ADDR:MASTER_PORT``, the key-value store every gloo or NCCL process
  group is built on. Under torchrun the agent already hosts it
  (``TORCHELASTIC_USE_AGENT_STORE=True``) and every rank is a client; under
  srun or mpirun rank 0 hosts it (``wait_for_workers=False``, so rank 0 never
  waits for a rank that died before connecting). Keys live under
  ``forensics/fleet/<run id>/``; records are zlib-compressed JSON.
- :class:`DirChannel`: a shared folder (``--out-dir``): each rank writes
  ``rank-NNNNN.json`` atomically; small marker files under ``.fleet-state/``
  stand in for the store's counters.

Why a store and not a gloo ``gather_object``: a collective needs every rank.
One rank that died before it (or hangs in its snapshot) stalls the others
until the process group's timeout and then the collective fails as a whole,
losing every record. With the store, rank 0 takes what arrived by the
deadline and names the rest: ``started but sent no record`` (it said hello,
then died or hung) or ``never reached the store``. No GPU collective is
involved, so a broken NCCL can still be diagnosed.
"""

from __future__ import annotations

import glob
import json
import os
import time
import zlib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from forensics.errors import BadInputError
from forensics.fleet.launcher import Placement

POLL_S = 0.1
RECORD_PREFIX = "rank-"
STATE_DIR = ".fleet-state"


def record_name(rank: int) -> str:
    """``rank-00042.json``: the file name of a rank's record in an ``--out-dir`` folder."""
    return f"{RECORD_PREFIX}{rank:05d}.json"


@dataclass
class Gathered:
    """What rank 0 holds at the end of a gather.

    Attributes:
        records: the ranks' records, by rank order.
        missing: ``{"rank", "node", "reason"}`` for each rank without a record.
        interrupted: the exception (SIGTERM's ``Terminated``, ``KeyboardInterrupt``)
            that cut the wait short; re-raise it after writing the file.
        waited_s: seconds rank 0 waited for the others.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    interrupted: BaseException | None = None
    waited_s: float = 0.0


class Channel:
    """Operations both channels share; subclasses supply ``_put``, ``_get``, ``_incr`` and ``_count``."""

    def _put(self, key: str, value: dict[str, Any]) -> None:
        raise NotImplementedError

    def _get(self, key: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def _incr(self, name: str, who: int) -> None:
        raise NotImplementedError

    def _count(self, name: str) -> int:
        raise NotImplementedError

    def hello(self, pl: Placement) -> None:
        """Say this rank has started (node, pid): a rank that then dies is named, not just counted."""
        self._put(
            f"hello/{pl.rank}",
            {
                "rank": pl.rank,
                "node": pl.node,
                "local_rank": pl.local_rank,
                "pid": os.getpid(),
                "time": time.time(),
            },
        )

    def publish(self, rank: int, record: dict[str, Any]) -> None:
        """Store this rank's record and count it done."""
        self._put(f"rec/{rank}", record)
        self._incr("done", rank)

    def mark(self, name: str, who: int) -> None:
        """Count one arrival at ``name`` (``node/<node>/ready``, ``node/<node>/benched``)."""
        self._incr(name, who)

    def wait(self, name: str, n: int, deadline: float) -> bool:
        """Wait until ``n`` arrivals at ``name`` or ``deadline`` (``time.monotonic``); True if reached."""
        while True:
            if self._count(name) >= n:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)

    def collect(
        self,
        world_size: int,
        deadline: float,
        timeout_s: float,
        on_wait: Callable[[int], None] | None = None,
    ) -> Gathered:
        """Rank 0: wait for ``world_size`` records until ``deadline``, then take what is there.

        A signal or Ctrl-C during the wait ends it early; the records already
        sent are still taken and the exception is returned in ``interrupted``.

        Args:
            world_size: ranks in the job.
            deadline: ``time.monotonic()`` value to stop waiting at.
            timeout_s: the gather timeout, for the missing ranks' reasons.
            on_wait: called with the count of records so far when it changed (at most once a
                second) or every 30 s.
        """
        out = Gathered()
        t0 = time.monotonic()
        last, last_n = 0.0, -1
        try:
            while (n := self._count("done")) < world_size and time.monotonic() < deadline:
                now = time.monotonic()
                if on_wait and ((n != last_n and now - last >= 1.0) or now - last >= 30.0):
                    last, last_n = now, n
                    on_wait(n)
                time.sleep(POLL_S)
        except (
            BaseException
        ) as exc:  # SIGTERM (the launcher tearing the job down), Ctrl-C: keep what arrived
            out.interrupted = exc
        out.waited_s = round(time.monotonic() - t0, 3)
        for rank in range(world_size):
            rec = self._get(f"rec/{rank}")
            if rec is not None:
                out.records.append(rec)
                continue
            hello = self._get(f"hello/{rank}")
            if out.interrupted is not None:
                why = f"no record when the gather was stopped ({_name(out.interrupted)}) after {out.waited_s:g} s"
            elif hello is not None:
                why = (
                    f"started (pid {hello.get('pid')}) but sent no record within {timeout_s:g} s: it died, hung "
                    "or was killed"
                )
            else:
                why = f"never reached the gather within {timeout_s:g} s (not started, or could not connect)"
            out.missing.append(
                {
                    "rank": rank,
                    "node": (hello or {}).get("node"),
                    "local_rank": (hello or {}).get("local_rank"),
                    "reason": why,
                }
            )
        return out


def _name(exc: BaseException) -> str:
    signum = getattr(exc, "signum", None)
    if signum is not None:
        import signal

        try:
            return signal.Signals(signum).name
        except ValueError:
            return f"signal {signum}"
    return "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else type(exc).__name__


class StoreChannel(Channel):
    """The c10d TCPStore of the job (see the module docstring)."""

    def __init__(self, store: Any):
        self.store = store

    @classmethod
    def connect(cls, pl: Placement, timeout_s: float) -> "StoreChannel":
        """Connect to (rank 0 without an agent store: host) the job's store.

        Raises:
            BadInputError: no MASTER_ADDR/MASTER_PORT, or the store cannot be reached in ``timeout_s``.
        """
        if not pl.master_addr or not pl.master_port:
            raise BadInputError(
                "no MASTER_ADDR/MASTER_PORT in the environment, so the ranks cannot meet; run under "
                "torchrun, export them (srun/mpirun: the first node's address and a free port), "
                "or give --out-dir on a shared folder"
            )
        import torch.distributed as dist

        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        try:
            store = dist.TCPStore(
                pl.master_addr,
                pl.master_port,
                world_size=None,
                is_master=(pl.rank == 0 and not agent),
                timeout=timedelta(seconds=timeout_s),
                wait_for_workers=False,
                multi_tenant=True,
            )
        except (RuntimeError, OSError, TimeoutError) as exc:
            raise BadInputError(
                f"cannot reach the c10d store at {pl.master_addr}:{pl.master_port} within "
                f"{timeout_s:g} s ({str(exc).splitlines()[0][:200]}); check MASTER_ADDR/MASTER_PORT "
                "or use --out-dir"
            ) from None
        return cls(dist.PrefixStore(f"forensics/fleet/{pl.run_id}/", store))

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self.store.set(key, zlib.compress(json.dumps(value, allow_nan=False).encode(), 3))

    def _get(self, key: str) -> dict[str, Any] | None:
        try:
            if not self.store.check([key]):
                return None
            return json.loads(zlib.decompress(self.store.get(key)))
        except (
            RuntimeError,
            OSError,
            ValueError,
            zlib.error,
        ):  # the store went away, or a damaged value
            return None

    def _incr(self, name: str, who: int) -> None:
        self.store.add(name, 1)

    def _count(self, name: str) -> int:
        return int(self.store.add(name, 0))


class DirChannel(Channel):
    """A shared folder (``--out-dir``): records as ``rank-NNNNN.json``, markers under ``.fleet-state/``."""

    def __init__(self, folder: Path, run_id: str = "job"):
        self.folder = Path(folder)
        self.run_id = run_id
        if not self.folder.is_dir():
            raise BadInputError(
                f"--out-dir {folder}: no such folder; create it (on a file system every node sees)"
            )
        self.state = self.folder / STATE_DIR / run_id.replace("/", "_")
        try:
            self.state.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInputError(
                f"--out-dir {folder}: cannot write there ({exc.strerror})"
            ) from None

    def _path(self, key: str) -> Path:
        if key.startswith("rec/"):
            return self.folder / record_name(int(key[4:]))
        return self.state / (key.replace("/", "__") + ".json")

    def _put(self, key: str, value: dict[str, Any]) -> None:
        from forensics.docfile import dumps, write_atomic

        path = self._path(key)
        write_atomic(path, dumps(value, path))

    def _get(self, key: str) -> dict[str, Any] | None:
        try:
            value = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if key.startswith("rec/") and (
            not isinstance(value, dict) or value.get("run_id") != self.run_id
        ):
            return None  # an earlier run's record in a reused folder is not this run's rank
        return value

    def _incr(self, name: str, who: int) -> None:
        (self.state / f"{name.replace('/', '__')}.{who}").touch()

    def _count(self, name: str) -> int:
        return len(
            list(self.state.glob(f"{glob.escape(name.replace('/', '__'))}.*"))
        )  # a node named 'gpu*' counts only its own
