"""The one NVML wrapper of forensics (STYLE habit 6).

Only this module imports ``pynvml`` (the ``nvidia-ml-py`` distribution); probes
and the sampler call NVML through :class:`Nvml`. What it guarantees:

- NVML is started lazily, on the first call, and :meth:`Nvml.unavailable`
  says in one line why it cannot be (no driver, no nvidia-ml-py).
- Every call goes through :meth:`Nvml.call`, which never raises for an NVML
  error: each ``NVMLError`` subclass becomes a :func:`forensics.model.missing`
  value (NotSupported -> ``not_supported``, NoPermission -> ``no_permission``,
  FunctionNotFound or a wrapper absent from an old nvidia-ml-py
  (``AttributeError``) -> ``function_not_found``, GpuIsLost -> ``gpu_lost``,
  anything else -> ``error`` naming the exception). FunctionNotFound is logged
  once per function. Bytes are decoded to str.
- Every call runs on a worker thread and is waited for at most
  ``call_timeout_s``: a call that hangs (a sick driver) becomes ``timed_out``
  and every later call returns ``timed_out`` at once instead of queueing
  behind the hung one. Calls made inside ``with nvml.lane(key):`` run on a
  worker of their own per key (one per GPU), so several GPUs are read at once.
- Field values (``nvmlDeviceGetFieldValues``) are asked for by the *name* of
  the ``NVML_FI_*`` constant in the installed pynvml (field ids changed between
  releases), and each entry's ``nvmlReturn`` is checked.

Tests pass a fake module as ``Nvml(module=fake)``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import Any, Iterable, Iterator

from forensics.model import MissingReason, is_missing, missing

log = logging.getLogger("forensics.gpu.nvml")

_LOGGED_NOT_FOUND: set[str] = set()
_LOG_LOCK = threading.Lock()

# NVML return codes (nvml.h); used when the module lacks the constant.
_CODE_REASON = {
    3: MissingReason.NOT_SUPPORTED,  # NVML_ERROR_NOT_SUPPORTED
    4: MissingReason.NO_PERMISSION,  # NVML_ERROR_NO_PERMISSION
    10: MissingReason.TIMED_OUT,  # NVML_ERROR_TIMEOUT
    13: MissingReason.FUNCTION_NOT_FOUND,  # NVML_ERROR_FUNCTION_NOT_FOUND
    15: MissingReason.GPU_LOST,  # NVML_ERROR_GPU_IS_LOST
}
_NAME_REASON = {
    "NVMLError_NotSupported": MissingReason.NOT_SUPPORTED,
    "NVMLError_NoPermission": MissingReason.NO_PERMISSION,
    "NVMLError_FunctionNotFound": MissingReason.FUNCTION_NOT_FOUND,
    "NVMLError_GpuIsLost": MissingReason.GPU_LOST,
    "NVMLError_Timeout": MissingReason.TIMED_OUT,
}
# Attribute of c_nvmlValue_t to read for each NVML_VALUE_TYPE_* (0..6).
_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def decode(value: Any) -> Any:
    """Decode ``bytes`` (old pynvml forks) to ``str``; other values unchanged."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").strip("\x00")
    return value


def _log_not_found(name: str) -> None:
    with _LOG_LOCK:
        if name in _LOGGED_NOT_FOUND:
            return
        _LOGGED_NOT_FOUND.add(name)
    log.info(
        "NVML function %s not found (older driver or nvidia-ml-py); recorded as function_not_found",
        name,
    )


class _Hung(Exception):
    pass


class _Worker:
    """One daemon thread that runs NVML calls; a caller waits with a timeout."""

    def __init__(self, name: str = "forensics-nvml") -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._name = name

    def _loop(self) -> None:
        while True:
            fn, args, box, done = self._q.get()
            try:
                box["value"] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box["error"] = exc
            done.set()

    def run(self, fn, args, timeout_s: float):
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._q.put((fn, args, box, done))
        if not done.wait(timeout_s):
            raise _Hung()
        if "error" in box:
            raise box["error"]
        return box.get("value")


class Nvml:
    """Lazy, never-raising access to NVML.

    Args:
        module: a pynvml-like module (tests pass a fake); default imports
            ``pynvml`` from nvidia-ml-py on first use.
        call_timeout_s: longest wait for one NVML call, seconds.

    Attributes:
        hung: name of the call that hung, or ``""``.
    """

    def __init__(self, module: Any = None, call_timeout_s: float = 5.0):
        self._module = module
        self._timeout_s = call_timeout_s
        self._worker = _Worker()
        self._lanes: dict[Any, _Worker] = {}
        self._here = threading.local()
        self._state: str | None = None  # None: not started; "" ok; else the reason
        self._lock = threading.Lock()
        self.hung = ""

    # -- start-up ---------------------------------------------------------------
    @property
    def module(self) -> Any:
        """The pynvml module in use (imported on first access); ``None`` if absent."""
        if self._module is None:
            try:
                import pynvml  # the only import of pynvml in forensics

                self._module = pynvml
            except ImportError:
                self._module = False
        return self._module or None

    def unavailable(self) -> str | None:
        """Start NVML if needed; return ``None`` when usable, else the reason (one line).

        Source: ``nvmlInit``. The reason names the likely cause: no NVIDIA
        driver (libnvidia-ml.so.1 absent), driver not loaded, nvidia-ml-py absent.
        """
        with self._lock:
            if self._state is None:
                self._state = self._init()
            return self._state or None

    def _init(self) -> str:
        mod = self.module
        if mod is None:
            return "nvidia-ml-py (pynvml) is not installed"
        try:
            self._worker.run(mod.nvmlInit, (), self._timeout_s)
        except _Hung:
            self.hung = "nvmlInit"
            return f"nvmlInit did not return within {self._timeout_s:g} s (driver hung?)"
        except Exception as exc:  # noqa: BLE001 - every init failure is a reason, not a crash
            name = type(exc).__name__
            if name == "NVMLError_LibraryNotFound":
                return "no NVIDIA driver found (libnvidia-ml.so.1 cannot be loaded)"
            if name == "NVMLError_DriverNotLoaded":
                return "NVIDIA driver is installed but not loaded"
            return f"nvmlInit failed: {name}: {exc}"
        return ""

    def shutdown(self) -> None:
        """Call ``nvmlShutdown`` if NVML was started here (errors ignored)."""
        with self._lock:
            if self._state == "" and not self.hung:
                try:
                    self._worker.run(self.module.nvmlShutdown, (), self._timeout_s)
                except Exception:  # noqa: BLE001 - shutting down must not fail a snapshot
                    pass
            self._state = None

    @contextlib.contextmanager
    def lane(self, key: Any) -> Iterator[None]:
        """Run this thread's calls on a worker thread of ``key``'s own for the block (one per GPU).

        NVML is thread-safe ("NVML is thread-safe so it is safe to make
        simultaneous NVML calls from multiple threads", NVML API reference) and
        ctypes releases the GIL during each call, so readers of different GPUs,
        each in its own lane, wait on the driver at the same time instead of
        queueing on one worker. Timeouts are unchanged: a call that hangs in any
        lane sets :attr:`hung`, and later calls in every lane return ``timed_out``.
        """
        with self._lock:
            if key not in self._lanes:
                self._lanes[key] = _Worker(f"forensics-nvml-{key}")
        prev = getattr(self._here, "worker", None)
        self._here.worker = self._lanes[key]
        try:
            yield
        finally:
            self._here.worker = prev

    # -- calls ------------------------------------------------------------------
    def reason_for(self, exc: BaseException) -> dict[str, str]:
        """Map an exception from a pynvml call to a missing value (see module docstring)."""
        name = type(exc).__name__
        reason = _NAME_REASON.get(name)
        if reason is None:
            reason = _CODE_REASON.get(getattr(exc, "value", None), MissingReason.ERROR)
        text = str(exc) or name
        return missing(reason, text if reason is not MissingReason.ERROR else f"{name}: {text}")

    def call(self, name: str, *args: Any) -> Any:
        """Call pynvml function ``name`` with ``args``; never raises.

        Returns:
            The function's value (bytes decoded, lists/tuples of bytes
            decoded), or a missing value: ``function_not_found`` (wrapper or
            symbol absent), ``not_supported``, ``no_permission``, ``gpu_lost``,
            ``timed_out`` (this call or an earlier one hung), ``error``, or
            the start-up failure when NVML is unavailable.
        """
        why = self.unavailable()
        if why:
            return missing(MissingReason.NOT_FOUND, why)
        if self.hung:
            return missing(MissingReason.TIMED_OUT, f"NVML stopped answering ({self.hung} hung)")
        fn = getattr(self.module, name, None)
        if fn is None:
            _log_not_found(name)
            return missing(MissingReason.FUNCTION_NOT_FOUND, f"{name} not in this nvidia-ml-py")
        worker = getattr(self._here, "worker", None) or self._worker
        try:
            value = worker.run(fn, args, self._timeout_s)
        except _Hung:
            self.hung = name
            return missing(
                MissingReason.TIMED_OUT, f"{name} did not return within {self._timeout_s:g} s"
            )
        except AttributeError as exc:
            _log_not_found(name)
            return missing(MissingReason.FUNCTION_NOT_FOUND, f"{name}: {exc}")
        except Exception as exc:  # noqa: BLE001 - NVMLError and friends become missing values
            out = self.reason_for(exc)
            if out["missing"] == MissingReason.FUNCTION_NOT_FOUND.value:
                _log_not_found(name)
            return out
        if isinstance(value, (list, tuple)):
            return type(value)(decode(v) for v in value)
        return decode(value)

    def first(self, *calls: tuple) -> tuple[Any, str]:
        """Try ``(name, *args)`` calls in order; the first real value wins.

        Falls through only on ``function_not_found`` (new API absent, use the
        deprecated one). Returns ``(value, name_used)``.
        """
        value, used = None, ""
        for name, *args in calls:
            value, used = self.call(name, *args), name
            if not (
                is_missing(value) and value["missing"] == MissingReason.FUNCTION_NOT_FOUND.value
            ):
                break
        return value, used

    def constant(self, name: str, default: Any = None) -> Any:
        """An ``NVML_*`` constant of the installed pynvml, or ``default``."""
        mod = self.module
        return getattr(mod, name, default) if mod is not None else default

    def field_values(self, handle: Any, names: Iterable[str]) -> dict[str, Any]:
        """Read NVML field values by the names of their ``NVML_FI_*`` constants.

        Source: ``nvmlDeviceGetFieldValues`` (batched; when the batch fails as a
        whole for a reason other than a lost GPU or hang, each field is read alone).

        Returns:
            ``{name: value}``; a value is a number or a missing value:
            ``function_not_found`` when the installed pynvml lacks the constant,
            otherwise the entry's own ``nvmlReturn`` mapped as in :meth:`call`.
        """
        out: dict[str, Any] = {}
        wanted: list[tuple[str, int]] = []
        for name in names:
            fid = self.constant(name)
            if fid is None:
                out[name] = missing(
                    MissingReason.FUNCTION_NOT_FOUND, f"{name} not in this nvidia-ml-py"
                )
            else:
                wanted.append((name, fid))
        if not wanted:
            return out
        res = self.call("nvmlDeviceGetFieldValues", handle, [fid for _, fid in wanted])
        if is_missing(res):
            if (
                res["missing"]
                in (
                    MissingReason.GPU_LOST.value,
                    MissingReason.TIMED_OUT.value,
                    MissingReason.NOT_FOUND.value,
                )
                or len(wanted) == 1
            ):
                out.update({name: res for name, _ in wanted})
                return out
            for name, fid in wanted:  # one by one: a single bad id must not lose the others
                one = self.call("nvmlDeviceGetFieldValues", handle, [fid])
                out[name] = one if is_missing(one) else self._entry(one[0])
            return out
        for (name, _), entry in zip(wanted, res):
            out[name] = self._entry(entry)
        return out

    def _entry(self, entry: Any) -> Any:
        code = getattr(entry, "nvmlReturn", 0)
        if code:
            reason = _CODE_REASON.get(code, MissingReason.ERROR)
            return missing(reason, f"field entry nvmlReturn={code}")
        attr = _VALUE_ATTR.get(getattr(entry, "valueType", 3), "ullVal")
        return getattr(entry.value, attr)

    # -- common reads -----------------------------------------------------------
    def devices(self) -> list[tuple[int, Any, str]] | dict[str, str]:
        """``[(index, handle, uuid)]`` for every GPU NVML sees, or a missing value.

        Source: ``nvmlDeviceGetCount``, ``nvmlDeviceGetHandleByIndex``, ``nvmlDeviceGetUUID``.
        A GPU whose handle or UUID cannot be read is keyed ``index-<i>``.
        """
        count = self.call("nvmlDeviceGetCount")
        if is_missing(count):
            return count
        out = []
        for i in range(int(count)):
            handle = self.call("nvmlDeviceGetHandleByIndex", i)
            if is_missing(handle):
                out.append((i, None, f"index-{i}"))
                continue
            uuid = self.call("nvmlDeviceGetUUID", handle)
            out.append((i, handle, uuid if isinstance(uuid, str) else f"index-{i}"))
        return out

    def versions(self) -> dict[str, Any]:
        """Driver, CUDA driver API, NVML and nvidia-ml-py versions.

        Sources: ``nvmlSystemGetDriverVersion``, ``nvmlSystemGetCudaDriverVersion``
        (int 1000*major+10*minor, shown as "13.0"), ``nvmlSystemGetNVMLVersion``,
        and the nvidia-ml-py distribution metadata.
        """
        cuda = self.call("nvmlSystemGetCudaDriverVersion")
        if isinstance(cuda, int):
            cuda = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        return {
            "driver_version": self.call("nvmlSystemGetDriverVersion"),
            "cuda_driver_version": cuda,
            "nvml_version": self.call("nvmlSystemGetNVMLVersion"),
            "nvidia_ml_py_version": nvidia_ml_py_version(),
        }


def nvidia_ml_py_version() -> Any:
    """Version of the installed nvidia-ml-py distribution (package metadata), or missing."""
    from importlib import metadata

    try:
        return metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        return missing(MissingReason.NOT_FOUND, "nvidia-ml-py not installed")
