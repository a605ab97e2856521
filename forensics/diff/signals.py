"""Suspicion signals: what in a commit's added or changed code can slow a GPU step, each with its line.

A signal is one construct, found in what a commit added (or, for switches and
precision, removed), that is known to cost step time when it appears on a step's
path. The kinds and their weights are :data:`SIGNAL_WEIGHTS` (each with the reason
it weighs what it weighs); they are what the commit table shows as a commit's reason.

- Python files: the syntax trees of both versions (:mod:`forensics.diff.pysource`)
  are searched scope by scope (each function, each class body, the module body);
  a construct counts when the new version of a scope holds more of it than the
  old one (a renamed variable does not make a ``.float()`` new). Allocation counts
  only inside a ``for``/``while`` body or a comprehension. Changed defaults are
  read from function signatures (by parameter name), module-level and class-level
  assignments (by name).
- Configuration files (YAML, JSON, TOML, INI/cfg): both versions parsed and
  compared value by value (:func:`config_signals`).
- Anything else (C++/CUDA sources, a Python file that does not parse): the added
  lines, by regular expression (:data:`TEXT_PATTERNS`).

Pure: text in, signals out.
"""

from __future__ import annotations

import ast
import difflib
import enum
import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from forensics.diff import pysource


class SignalKind(str, enum.Enum):
    """What a signal is (the value is what the commit table prints)."""

    PRECISION = "precision change"
    SYNC = "host-device synchronisation"
    ALLOC_IN_LOOP = "allocation inside a loop"
    COLLECTIVE = "collective or communication path"
    GRAPH_COMPILE = "CUDA graph / compile switch"
    KERNEL_CHOICE = "kernel-selection switch"
    CONFIG_DEFAULT = "changed default value"


SIGNAL_WEIGHTS: dict[SignalKind, tuple[float, str]] = {
    SignalKind.GRAPH_COMPILE: (
        4.0,
        "CUDA graphs or torch.compile switched off puts every kernel launch back on the "
        "host: a launch-bound step (decode) slows several-fold (vLLM docs, enforce_eager)",
    ),
    SignalKind.COLLECTIVE: (
        4.0,
        "a collective runs once per layer or more: a changed call, group or backend is "
        "multiplied by the layer count (NCCL tuning notes, docs/bench.md)",
    ),
    SignalKind.SYNC: (
        3.0,
        "a host-device synchronisation (.item(), .cpu(), synchronize, a tensor's truth value in an if/assert: "
        "if not (x > 0).all()) stalls the host until the GPU drains, so the launch queue empties every "
        "step (PyTorch CUDA semantics: asynchronous execution)",
    ),
    SignalKind.PRECISION: (
        3.0,
        "float32 instead of bf16/fp16 leaves the tensor cores' half-precision rate and doubles "
        "the bytes moved (PyTorch AMP docs; the H200's bf16 dense rate is ~15x its fp32 rate)",
    ),
    SignalKind.KERNEL_CHOICE: (
        3.0,
        "cudnn.benchmark off, cudnn.deterministic or deterministic algorithms on make cuDNN/cuBLAS run "
        "fixed or deterministic kernels instead of the fastest ones (PyTorch reproducibility notes: "
        "'deterministic operations are often slower'; pytorch/pytorch#47908: cudnn.benchmark = True took "
        "an epoch from 4:55 to 1:57); turned on, it autotunes again at every new input shape",
    ),
    SignalKind.ALLOC_IN_LOOP: (
        2.0,
        "a tensor allocated per iteration costs an allocator call and, for zeros/ones/"
        "clone, a kernel, every iteration (PyTorch CUDA memory management notes)",
    ),
    SignalKind.CONFIG_DEFAULT: (
        2.0,
        "a changed default changes what every caller gets without a line of theirs "
        "changing: limits, batch sizes, flags (issue 13 case 13: a generation limit)",
    ),
}
"""Kind -> (weight added to a commit's suspicion, the reason). Engineering estimates of how often a construct of this
kind, once added to a step's path, costs time measurably; a commit with a signal outranks any line count."""


@dataclass(frozen=True)
class Signal:
    """One suspicious construct a commit brought.

    Attributes:
        kind: :class:`SignalKind`.
        file: repository-relative path.
        line: 1-based line in the new version (in the old one when ``removed``); 0 when not known.
        text: the line's code, stripped and cut to 120 characters (or ``key: old -> new`` for a value).
        detail: the construct (``.float()``, ``dtype=``, ``default max_tokens=512 -> 256``).
        removed: the construct was taken out (a compile switch, a collective, a cast).
    """

    kind: SignalKind
    file: str
    line: int
    text: str
    detail: str = ""
    removed: bool = False

    @property
    def weight(self) -> float:
        return SIGNAL_WEIGHTS[self.kind][0]

    def reason(self) -> str:
        """One line for a commit table: ``precision change: .float() (model.py:12)``."""
        where = f"{self.file}:{self.line}" if self.line else self.file
        what = f"{'removed ' if self.removed else ''}{self.detail or self.text}"
        return f"{self.kind.value}: {what} ({where})"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.name.lower(),
            "label": self.kind.value,
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "detail": self.detail,
            "removed": self.removed,
        }


# --------------------------------------------------------------------------------------------------
# Python: what each construct is
# --------------------------------------------------------------------------------------------------
PRECISION_METHODS = {"float", "double", "half", "bfloat16"}
DTYPES = {
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "half",
    "double",
    "float",
    "float8_e4m3fn",
    "float8_e5m2",
    "complex64",
    "complex128",
    "tfloat32",
}
PRECISION_CALLS = {
    "autocast",
    "set_default_dtype",
    "set_float32_matmul_precision",
    "custom_fwd",
    "custom_bwd",
}
PRECISION_ATTRS = {
    "allow_tf32",
    "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction",
}
SYNC_METHODS = {"item", "cpu", "tolist", "numpy", "synchronize", "nonzero"}
ALLOC_FUNCS = {
    "empty",
    "zeros",
    "ones",
    "full",
    "tensor",
    "as_tensor",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand",
    "randn",
    "randint",
    "arange",
    "linspace",
    "eye",
    "empty_strided",
}
ALLOC_METHODS = {
    "clone",
    "contiguous",
    "new_zeros",
    "new_empty",
    "new_ones",
    "new_full",
    "new_tensor",
}
COLLECTIVES = {
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "barrier",
    "send",
    "recv",
    "isend",
    "irecv",
    "reduce",
    "batch_isend_irecv",
    "new_group",
    "init_process_group",
    "all_gather_object",
    "broadcast_object_list",
}
GRAPH_NAMES = {"CUDAGraph", "make_graphed_callables", "graph_pool_handle", "cudagraphify"}
GRAPH_KEYWORDS = {
    "enforce_eager",
    "fullgraph",
    "use_cuda_graph",
    "cuda_graph",
    "cudagraphs",
    "compile",
}
_GRAPH_WORDS = re.compile(r"compile|cuda_?graph|enforce_eager|eager|dynamo", re.I)
_PRECISION_WORDS = re.compile(
    r"dtype|precision|(^|_)(fp|bf)(8|16|32)|half|tf32|autocast|(^|_)amp(_|$)|mixed", re.I
)
_COLLECTIVE_WORDS = re.compile(
    r"nccl|all_?reduce|all_?gather|reduce_?scatter|(^|_)comms?(_|$)|collective|"
    r"tensor_parallel|(^|_)tp_size",
    re.I,
)


_KERNEL_CHOICE_WORDS = re.compile(r"cudnn|deterministic", re.I)


def refine(name: str, default: SignalKind = SignalKind.CONFIG_DEFAULT) -> SignalKind:
    """The kind a changed value of ``name`` signals: a compile/graph, precision, kernel-selection or communication
    setting, or ``default``."""
    if _KERNEL_CHOICE_WORDS.search(name):
        return SignalKind.KERNEL_CHOICE
    if _GRAPH_WORDS.search(name):
        return SignalKind.GRAPH_COMPILE
    if _PRECISION_WORDS.search(name):
        return SignalKind.PRECISION
    if _COLLECTIVE_WORDS.search(name):
        return SignalKind.COLLECTIVE
    return default


def _chain(node: ast.AST) -> str:
    """``torch.cuda.synchronize`` for that attribute chain; ``x.float`` for a call on a name; "" otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_chain(node.func) + "()")
    else:
        parts.append("?")
    return ".".join(reversed(parts))


def _call_signals(node: ast.Call, in_loop: bool) -> Iterator[tuple[SignalKind, str]]:
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    chain = _chain(f)
    root = chain.split(".", 1)[0]
    method = isinstance(f, ast.Attribute)
    if method and name in PRECISION_METHODS and not node.args and not node.keywords:
        yield SignalKind.PRECISION, f".{name}()"
    if name in PRECISION_CALLS:
        yield SignalKind.PRECISION, f"{name}()"
    for kw in node.keywords:
        if kw.arg == "dtype":
            yield SignalKind.PRECISION, f"dtype={_short(kw.value)}"
        elif kw.arg in GRAPH_KEYWORDS:
            yield SignalKind.GRAPH_COMPILE, f"{kw.arg}={_short(kw.value)}"
        elif (
            kw.arg == "mode"
            and isinstance(kw.value, ast.Constant)
            and kw.value.value in ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
        ):
            yield SignalKind.GRAPH_COMPILE, f"mode={kw.value.value!r}"
        elif (
            kw.arg == "backend"
            and isinstance(kw.value, ast.Constant)
            and "nccl" in str(kw.value.value).lower()
        ):
            yield SignalKind.COLLECTIVE, f"backend={kw.value.value!r}"
    if name in KERNEL_CHOICE_CALLS:
        arg = _short(node.args[0]) if node.args else ""
        yield SignalKind.KERNEL_CHOICE, f"{name}({arg})"
    if (method and name in SYNC_METHODS and name != "nonzero") or (
        name == "nonzero" and not node.keywords
    ):
        yield SignalKind.SYNC, f".{name}()"
    if (
        method
        and name == "to"
        and any(isinstance(a, ast.Constant) and a.value == "cpu" for a in node.args)
    ):
        yield SignalKind.SYNC, ".to('cpu')"
    if in_loop and (
        (root == "torch" and name in ALLOC_FUNCS) or (method and name in ALLOC_METHODS)
    ):
        yield SignalKind.ALLOC_IN_LOOP, f"{chain if root == 'torch' else '.' + name}() in a loop"
    if (
        name in COLLECTIVES
        or root == "dist"
        or chain.startswith("torch.distributed")
        or "nccl" in chain.lower()
    ):
        yield SignalKind.COLLECTIVE, f"{chain}()"
    if (
        chain in ("torch.compile", "torch.jit.script", "torch.jit.trace")
        or name in GRAPH_NAMES
        or (name == "graph" and "cuda" in chain)
        or "_dynamo" in chain
    ):
        yield SignalKind.GRAPH_COMPILE, f"{chain}()"


KERNEL_CHOICE_ATTRS = {"benchmark", "deterministic", "benchmark_limit"}
"""``torch.backends.cudnn.<attr> = value``: how cuDNN picks its convolution kernels (an assignment is a signal
when the attribute chain holds ``cudnn``)."""
KERNEL_CHOICE_CALLS = {"use_deterministic_algorithms"}
"""torch calls that restrict every op to deterministic kernels."""


def _kernel_choice_target(target: ast.AST) -> str:
    """``cudnn.benchmark`` for an assignment target ``torch.backends.cudnn.benchmark``; "" otherwise."""
    if not isinstance(target, ast.Attribute) or target.attr not in KERNEL_CHOICE_ATTRS:
        return ""
    chain = _chain(target)
    return f"cudnn.{target.attr}" if "cudnn" in chain.split(".") else ""


TRUTH_REDUCTIONS = {"all", "any"}
"""Tensor methods whose result is a one-element tensor: testing its truth (``if``, ``while``, ``assert``, ``not``,
``bool()``) copies it to the host, a synchronisation (torch.Tensor.__bool__)."""
TRUTH_CALLS = {"torch.all", "torch.any", "torch.equal", "torch.allclose", "torch.is_nonzero"}
"""torch functions whose truth value (or Python bool result) needs the device's answer on the host."""
HOST_ROOTS = {"np", "numpy", "math", "pd", "pandas"}
"""Receivers that live on the host: ``np.isfinite(x).all()`` synchronises nothing."""


def _truth_operands(expr: ast.AST) -> Iterator[ast.AST]:
    """The expressions whose truth value ``expr``'s truth value reads (through ``not``, ``and``, ``or``)."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        yield from _truth_operands(expr.operand)
    elif isinstance(expr, ast.BoolOp):
        for v in expr.values:
            yield from _truth_operands(v)
    else:
        yield expr


def _truth_signals(test: ast.AST, seen: set[int]) -> Iterator[tuple[SignalKind, str]]:
    """A synchronisation for each tensor reduction whose truth value ``test`` reads (each node once)."""
    for e in _truth_operands(test):
        if id(e) in seen or not isinstance(e, ast.Call):
            continue
        seen.add(id(e))
        chain = _chain(e.func)
        f = e.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr in TRUTH_REDUCTIONS
            and not e.args
            and not e.keywords
            and chain.split(".", 1)[0] not in HOST_ROOTS
        ):
            yield SignalKind.SYNC, f"truth value of .{f.attr}()"
        elif chain in TRUTH_CALLS:
            yield SignalKind.SYNC, f"truth value of {chain}()"


def _short(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # an odd node from a newer grammar: say nothing rather than fail
        return "?"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _node_signals(
    node: ast.AST, in_loop: bool, funcs: set[int]
) -> Iterator[tuple[SignalKind, str]]:
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            name = _kernel_choice_target(t)
            if name and node.value is not None:
                yield SignalKind.KERNEL_CHOICE, f"{name} = {_short(node.value)}"
    if isinstance(node, (ast.If, ast.While, ast.Assert, ast.IfExp)):
        yield from _truth_signals(node.test, funcs)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield from _truth_signals(node, funcs)
    if isinstance(node, ast.Call):
        funcs.add(id(node.func))
        yield from _call_signals(node, in_loop)
        if isinstance(node.func, ast.Name) and node.func.id == "bool" and len(node.args) == 1:
            yield from _truth_signals(node.args[0], funcs)
    elif isinstance(node, ast.Attribute) and id(node) not in funcs:
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr in DTYPES:
            yield SignalKind.PRECISION, f"torch.{node.attr}"
        elif node.attr in PRECISION_ATTRS:
            yield SignalKind.PRECISION, node.attr
        elif re.search(r"cuda_?graph|enforce_eager", node.attr, re.I):
            yield SignalKind.GRAPH_COMPILE, node.attr
    elif (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "nccl" in node.value.lower()
        and len(node.value) < 80
    ):
        yield SignalKind.COLLECTIVE, repr(node.value)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def scopes(tree: ast.Module) -> dict[str, ast.AST]:
    """Qualified name -> node for every function and class (``Outer.method``), and ``<module>`` for the module."""
    out: dict[str, ast.AST] = {"<module>": tree}

    def walk(node: ast.AST, prefix: str) -> None:
        # functions and classes are statements: only statement lists are walked, never expressions
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, name, None) or []:
                if isinstance(child, _SCOPES):
                    q = f"{prefix}{child.name}"
                    out.setdefault(q, child)
                    walk(child, q + ".")
                elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                    walk(child, prefix)

    walk(tree, "")
    return out


def own_nodes(scope: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    """(node, inside a loop) for every node of ``scope`` outside its nested functions and classes."""

    def walk(node: ast.AST, in_loop: bool) -> Iterator[tuple[ast.AST, bool]]:
        for name, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for child in items:
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(child, _SCOPES):
                    yield from ((d, in_loop) for d in child.decorator_list)  # evaluated here
                    continue
                loop = (
                    in_loop
                    or (isinstance(node, _LOOPS) and name in ("body", "orelse"))
                    or (isinstance(node, _COMPS) and name in ("elt", "key", "value"))
                )
                yield child, loop
                yield from walk(child, loop)

    yield from walk(scope, False)


def _occurrences(scope: ast.AST) -> dict[tuple[SignalKind, str], list[int]]:
    out: dict[tuple[SignalKind, str], list[int]] = {}
    funcs: set[int] = set()
    for node, in_loop in own_nodes(scope):
        for kind, detail in _node_signals(node, in_loop, funcs):
            out.setdefault((kind, detail), []).append(getattr(node, "lineno", 0))
    return out


def _defaults(fn: ast.AST) -> dict[str, tuple[str, int]]:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    a = fn.args
    positional = a.posonlyargs + a.args
    out = {}
    for arg, d in zip(positional[len(positional) - len(a.defaults) :], a.defaults):
        out[arg.arg] = (_short(d), d.lineno)
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None:
            out[arg.arg] = (_short(d), d.lineno)
    return out


def _constants(scope: ast.AST) -> dict[str, tuple[str, int]]:
    """Name -> (value text, line) of the plain assignments directly in a module or class body."""
    if not isinstance(scope, (ast.Module, ast.ClassDef)):
        return {}
    out = {}
    for stmt in scope.body:
        target, value = None, None
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            target, value = stmt.targets[0].id, stmt.value
        elif (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.value is not None
        ):
            target, value = stmt.target.id, stmt.value
        if (
            target is None
            or any(isinstance(n, (ast.Call, ast.Lambda)) for n in ast.walk(value))
            and not _field_call(value)
        ):
            continue
        out[target] = (_short(_field_default(value)), stmt.lineno)
    return out


def _field_call(value: ast.AST) -> bool:
    """``field(default=...)`` / ``Field(default=...)``: a dataclass or pydantic default."""
    return (
        isinstance(value, ast.Call)
        and _chain(value.func).split(".")[-1] in ("field", "Field")
        and any(k.arg == "default" for k in value.keywords)
    )


def _field_default(value: ast.AST) -> ast.AST:
    if _field_call(value):
        return next(k.value for k in value.keywords if k.arg == "default")  # type: ignore[union-attr]
    return value


def _line_text(lines: list[str], line: int) -> str:
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text if len(text) <= 120 else text[:117] + "..."


def added_lines(old: str | None, new: str) -> set[int]:
    """1-based numbers of the lines of ``new`` that ``old`` does not have (difflib, line by line)."""
    a, b = (old or "").splitlines(), new.splitlines()
    out: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return out


REMOVAL_COUNTS = (
    SignalKind.GRAPH_COMPILE,
    SignalKind.COLLECTIVE,
    SignalKind.PRECISION,
    SignalKind.KERNEL_CHOICE,
)
"""Kinds whose removal is a signal too (a compile switch, a cast or cudnn.benchmark taken out changes the step
as much)."""


def python_signals(
    path: str, old_tree: ast.Module | None, new_tree: ast.Module, old: str | None, new: str
) -> list[Signal]:
    """Signals in a Python file's change (module docstring); ``old_tree`` ``None`` for a new file."""
    lines, old_lines = new.splitlines(), (old or "").splitlines()
    fresh = added_lines(old, new)
    before = scopes(old_tree) if old_tree is not None else {}
    after = scopes(new_tree)
    found: list[Signal] = []
    for qual, node in after.items():
        if (
            qual in before
            and qual != "<module>"
            and _text(lines, node) == _text(old_lines, before[qual])
        ):
            continue  # the same function or class, character for character: nothing it holds is new
        new_occ = _occurrences(node)
        old_occ = _occurrences(before[qual]) if qual in before else {}
        for (kind, detail), where in new_occ.items():
            extra = len(where) - len(old_occ.get((kind, detail), []))
            if extra <= 0:
                continue
            ranked = sorted(where, key=lambda n: (n not in fresh, n))[:extra]
            found.extend(Signal(kind, path, n, _line_text(lines, n), detail) for n in ranked)
        for (kind, detail), where in old_occ.items():
            gone = len(where) - len(new_occ.get((kind, detail), []))
            if kind in REMOVAL_COUNTS and gone > 0:
                found.extend(
                    Signal(kind, path, n, _line_text(old_lines, n), detail, removed=True)
                    for n in where[-gone:]
                )
        if qual in before:
            od, nd = _defaults(before[qual]), _defaults(node)
            for name, (value, line) in nd.items():
                if name in od and od[name][0] != value:
                    found.append(
                        Signal(
                            refine(name),
                            path,
                            line,
                            _line_text(lines, line),
                            f"default {name}={od[name][0]} -> {value} in {qual}()",
                        )
                    )
            oc, nc = _constants(before[qual]), _constants(node)
            for name, (value, line) in nc.items():
                if name in oc and oc[name][0] != value:
                    owner = "" if qual == "<module>" else f"{qual}."
                    found.append(
                        Signal(
                            refine(name),
                            path,
                            line,
                            _line_text(lines, line),
                            f"{owner}{name} = {oc[name][0]} -> {value}",
                        )
                    )
    # a switch given another value is one change: the new value, not also the old one taken out
    set_now = {
        (s.file, s.detail.split(" = ")[0])
        for s in found
        if s.kind is SignalKind.KERNEL_CHOICE and not s.removed
    }
    found = [
        s
        for s in found
        if not (
            s.kind is SignalKind.KERNEL_CHOICE
            and s.removed
            and (s.file, s.detail.split(" = ")[0]) in set_now
        )
    ]
    return _dedupe(found)


def _text(lines: list[str], node: ast.AST) -> str | None:
    """The source lines of ``node`` (decorators included); ``None`` when it carries no position."""
    end = getattr(node, "end_lineno", None)
    if end is None:
        return None
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    return "\n".join(lines[start - 1 : end])


def _dedupe(signals: list[Signal]) -> list[Signal]:
    seen: set[tuple] = set()
    out = []
    for s in sorted(signals, key=lambda s: (s.file, s.line, s.kind.name)):
        key = (s.kind, s.file, s.line, s.removed)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


# --------------------------------------------------------------------------------------------------
# Other code: added lines by pattern
# --------------------------------------------------------------------------------------------------
TEXT_PATTERNS: list[tuple[SignalKind, re.Pattern[str]]] = [
    (
        SignalKind.GRAPH_COMPILE,
        re.compile(
            r"torch\.compile|CUDAGraph|cuda\.graph|cudaGraph\w*|enforce_eager|"
            r"cuda_?graph",
            re.I,
        ),
    ),
    (
        SignalKind.COLLECTIVE,
        re.compile(
            r"\bnccl\w*|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
            r"\bdist\.\w+|torch\.distributed",
            re.I,
        ),
    ),
    (
        SignalKind.SYNC,
        re.compile(
            r"\.(item|cpu|tolist|numpy)\(\)|synchronize\(|cudaDeviceSynchronize|"
            r"cudaStreamSynchronize|cudaMemcpy(?!Async)\b"
        ),
    ),
    (
        SignalKind.PRECISION,
        re.compile(
            r"\.(float|double|half|bfloat16)\(\)|\bdtype\s*=|"
            r"torch\.(float16|float32|float64|bfloat16|half|double)\b|"
            r"set_float32_matmul_precision|allow_tf32|autocast"
        ),
    ),
]
"""Kind -> pattern searched in the added lines of a file that is not parsed (C++/CUDA, unparseable Python)."""


def text_signals(path: str, old: str | None, new: str) -> list[Signal]:
    """Signals in the added lines of ``new`` (:data:`TEXT_PATTERNS`); one per kind and line."""
    lines = new.splitlines()
    found = []
    for n in sorted(added_lines(old, new)):
        text = lines[n - 1]
        code = (
            re.split(r"//|(?<![\w\"'])#", text, maxsplit=1)[0]
            if not path.endswith(".py")
            else text.split("#", 1)[0]
        )
        for kind, pattern in TEXT_PATTERNS:
            m = pattern.search(code)
            if m:
                found.append(Signal(kind, path, n, _line_text(lines, n), m.group(0)))
    return _dedupe(found)


# --------------------------------------------------------------------------------------------------
# Configuration files: values compared
# --------------------------------------------------------------------------------------------------
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf")
MAX_CONFIG_SIGNALS = 20


def parse_config(path: str, text: str) -> Any:
    """A configuration file's values (YAML, JSON, TOML, INI); raises ValueError when it cannot be read as such."""
    suffix = path.lower().rsplit(".", 1)[-1]
    try:
        if suffix in ("yaml", "yml"):
            import yaml

            return yaml.safe_load(text)
        if suffix == "json":
            return json.loads(text)
        if suffix == "toml":
            import tomllib

            return tomllib.loads(text)
        if suffix in ("ini", "cfg", "conf"):
            import configparser

            cp = configparser.ConfigParser(interpolation=None)
            cp.read_string(text)
            return {s: dict(cp.items(s, raw=True)) for s in cp.sections()}
    except (
        Exception
    ) as exc:  # yaml.YAMLError, json.JSONDecodeError, tomllib.TOMLDecodeError, configparser.Error
        raise ValueError(f"{path}: not readable as {suffix} ({type(exc).__name__})") from None
    raise ValueError(f"{path}: not a configuration file")


def flatten(doc: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}`` (lists by index); leaves as JSON text."""
    out: dict[str, str] = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix.rstrip(".")] = json.dumps(doc, default=str)
    return out


def config_signals(path: str, old: str | None, new: str) -> tuple[bool, list[Signal]]:
    """(same values, signals) for a configuration file's change; unreadable versions fall back to :func:`text_signals`.

    Returns:
        ``same values`` True when both versions parse to the same values (the change is comments or layout).
    """
    try:
        a = flatten(parse_config(path, old)) if old is not None else {}
        b = flatten(parse_config(path, new))
    except ValueError:
        return False, text_signals(path, old, new)
    if old is not None and a == b:
        return True, []
    lines = new.splitlines()
    found = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key) or old is None:
            continue
        last = key.rsplit(".", 1)[-1]
        line = next(
            (
                i + 1
                for i, t in enumerate(lines)
                if re.search(rf"(^|[\s\"'\[{{,]){re.escape(last)}[\"']?\s*[:=]", t)
            ),
            0,
        )
        detail = f"{key}: {a.get(key, '(absent)')} -> {b.get(key, '(absent)')}"
        found.append(
            Signal(
                refine(key),
                path,
                line,
                detail if len(detail) <= 120 else detail[:117] + "...",
                detail,
            )
        )
        if len(found) >= MAX_CONFIG_SIGNALS:
            break
    return False, found


def python_file(
    path: str, old: str | None, new: str | None
) -> tuple[pysource.PyComparison, list[Signal]]:
    """A Python file's comparison and its signals (text patterns when a version does not parse)."""
    cmp = pysource.compare(old, new)
    if new is None or cmp.same_behaviour:
        return cmp, []
    if cmp.new_tree is None or (old is not None and cmp.old_tree is None):
        return cmp, text_signals(path, old, new)
    return cmp, python_signals(path, cmp.old_tree, cmp.new_tree, old, new)
