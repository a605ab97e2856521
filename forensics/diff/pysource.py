"""Does a Python file's change have behaviour? Its syntax trees compared once the inert parts are set aside.

Two versions of a ``.py`` file behave the same when their syntax trees (Python's own
:mod:`ast`, so comments and layout are gone already) are equal after :func:`normalise`
sets aside, in both:

- **docstrings** and any other bare constant statement (a string or ``...`` on its own
  line), and ``pass`` in a block that has other statements; not in a file that reads
  ``__doc__`` (or calls ``getdoc``): ``docopt(__doc__)`` takes its options' defaults from the
  module docstring;
- **annotations**: parameter and return annotations, ``x: T = v`` (kept as ``x = v``; in
  a class body the statement stays, its annotation blanked, because dataclasses and
  NamedTuples turn annotated names into fields; a ``ClassVar`` or ``InitVar`` annotation
  stays named, since it decides whether a dataclass has that field), ``from __future__ import
  annotations``, imports from ``typing``/``typing_extensions``, ``if TYPE_CHECKING:`` blocks and
  ``typing.cast(T, x)`` (which returns ``x``; a bare ``cast(...)`` only where ``cast`` is
  imported from ``typing``); not in a file that imports a library which acts on annotations
  at run time (:data:`RUNTIME_TYPING`: pydantic, typer, FastAPI, beartype...), nor on a
  function registered by annotation (``@f.register`` of ``functools.singledispatch``);
- **debug logging**: a ``log.debug(...)`` call whose arguments are names, attributes or
  constants (formatting is deferred: nothing is computed when the level is off), and an
  ``if log.isEnabledFor(logging.DEBUG):`` block (no ``else``), the test being that check alone
  (``getEffectiveLevel() <= DEBUG`` and ``log.level <= DEBUG`` too), or joined by ``and`` to
  names and attributes: ``if not log.isEnabledFor(DEBUG):`` or ``if SYNC or ...:`` runs when
  the level is off, so it is behaviour;
- **renames of local names**: inside each function, the names it binds (locals,
  ``*args``/``**kwargs``, positional-only parameters, a lambda's parameters) are replaced
  by canonical ones given in the order of their first binding, so a consistent rename
  leaves the same tree. Other parameter names are the function's interface (a caller
  may pass them by keyword) and are kept, as are module and class attributes. A function
  that calls ``locals()``, ``vars()``, ``eval`` or ``exec`` keeps its names.

:func:`compare` says whether two versions are behaviour-equal and which of these kinds of
edit (plus comments and formatting) the change consists of. Pure; standard library only.
"""

from __future__ import annotations

import ast
import copy
import io
import re
import tokenize
from dataclasses import dataclass, field

ASIDE_ORDER = ("comments", "docstrings", "annotations", "debug logging", "renames", "formatting")
"""The kinds of behaviour-free edit :func:`compare` names, in the order it lists them."""

_LOGGER = re.compile(r"^_*(log|logger|LOG|LOGGER|logging)$")
_TYPING_MODULES = ("typing", "typing_extensions")
_NAME_INTROSPECTION = {"locals", "vars", "eval", "exec"}
RUNTIME_TYPING = (
    "pydantic",
    "typer",
    "fastapi",
    "beartype",
    "typeguard",
    "msgspec",
    "cattrs",
    "cattr",
    "strawberry",
    "jaxtyping",
    "attrs",
    "attr",
)
"""Libraries that read annotations at run time (validation, coercion, command-line parsing, checks): in a file
importing one, an annotation is behaviour."""


def _is_logger(node: ast.AST) -> bool:
    name = (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )
    return bool(_LOGGER.match(name))


def _cheap(node: ast.AST) -> bool:
    """An argument whose evaluation computes nothing: a constant, a name, an attribute chain of names."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _cheap(node.value)
    if isinstance(node, ast.Starred):
        return _cheap(node.value)
    return False


def is_debug_log(stmt: ast.stmt) -> bool:
    """``log.debug("x %s", y)`` (arguments cheap, see :func:`_cheap`) or ``if log.isEnabledFor(DEBUG): ...``."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        return (
            isinstance(f, ast.Attribute)
            and f.attr == "debug"
            and _is_logger(f.value)
            and all(_cheap(a) for a in stmt.value.args)
            and all(_cheap(k.value) for k in stmt.value.keywords)
        )
    if isinstance(stmt, ast.If) and not stmt.orelse:
        return _debug_guard(stmt.test)
    return False


def _is_debug_level(node: ast.AST) -> bool:
    """``logging.DEBUG``, ``DEBUG`` or ``10``."""
    return (
        (isinstance(node, ast.Attribute) and node.attr == "DEBUG")
        or (isinstance(node, ast.Name) and node.id == "DEBUG")
        or (isinstance(node, ast.Constant) and node.value == 10 and type(node.value) is int)
    )


def _logger_expr(node: ast.AST) -> bool:
    """A logger: a name or attribute chain, or ``logging.getLogger(...)``."""
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Attribute) and f.attr == "getLogger") or (
            isinstance(f, ast.Name) and f.id == "getLogger"
        )
    return _cheap(node)


def _level_read(node: ast.AST) -> bool:
    """``log.getEffectiveLevel()`` or ``log.level``."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        f = node.func
        return (
            isinstance(f, ast.Attribute) and f.attr == "getEffectiveLevel" and _logger_expr(f.value)
        )
    return isinstance(node, ast.Attribute) and node.attr == "level" and _is_logger(node.value)


def _debug_guard(test: ast.expr) -> bool:
    """A test that is true only when debug logging is on: ``log.isEnabledFor(logging.DEBUG)``,
    ``log.getEffectiveLevel() <= logging.DEBUG`` (or ``== DEBUG``, or ``DEBUG >= ...``), ``log.level <= DEBUG``,
    or one of these joined by ``and`` to names and attributes (nothing computed, no other way in)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_debug_guard(v) for v in test.values) and all(
            _debug_guard(v) or _cheap(v) for v in test.values
        )
    if isinstance(test, ast.Call):
        f = test.func
        return (
            isinstance(f, ast.Attribute)
            and f.attr == "isEnabledFor"
            and _logger_expr(f.value)
            and len(test.args) == 1
            and not test.keywords
            and _is_debug_level(test.args[0])
        )
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if _level_read(left) and _is_debug_level(right):
            return isinstance(op, (ast.LtE, ast.Eq))
        if _is_debug_level(left) and _level_read(right):
            return isinstance(op, (ast.GtE, ast.Eq))
    return False


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Strip(ast.NodeTransformer):
    """Sets aside docstrings, annotations and debug logging (see the module docstring)."""

    def __init__(
        self,
        annotations: bool = True,
        debug: bool = True,
        docstrings: bool = True,
        typing_cast: bool = True,
    ):
        self.annotations, self.debug, self.docstrings = annotations, debug, docstrings
        self.typing_cast = typing_cast
        self.in_class = [False]

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            if (
                self.docstrings
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
            ):
                continue
            if self.debug and is_debug_log(stmt):
                continue
            if self.annotations:
                if isinstance(stmt, ast.ImportFrom) and (
                    stmt.module in _TYPING_MODULES
                    or (
                        stmt.module == "__future__"
                        and all(a.name == "annotations" for a in stmt.names)
                    )
                ):
                    continue
                if isinstance(stmt, ast.Import) and all(
                    a.name in _TYPING_MODULES for a in stmt.names
                ):
                    continue
                if isinstance(stmt, ast.If) and _type_checking(stmt.test) and not stmt.orelse:
                    continue
            new = self.visit(stmt)
            if new is None:
                continue
            out.extend(new if isinstance(new, list) else [new])
        rest = [s for s in out if not isinstance(s, ast.Pass)]
        return rest or [ast.Pass()]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(node, name, self._body(block))
        for name, value in ast.iter_fields(node):
            if (
                name in ("body", "orelse", "finalbody")
                and isinstance(value, list)
                and value
                and isinstance(value[0], ast.stmt)
            ):
                continue
            if isinstance(value, list):
                new_list = []
                for item in value:
                    if isinstance(item, ast.AST):
                        item = self.visit(item)
                        if item is None:
                            continue
                        if isinstance(item, list):
                            new_list.extend(item)
                            continue
                    new_list.append(item)
                value[:] = new_list
            elif isinstance(value, ast.AST):
                new = self.visit(value)
                if new is None:
                    delattr(node, name)
                else:
                    setattr(node, name, new)
        if hasattr(node, "type_comment"):
            node.type_comment = None  # type: ignore[attr-defined]
        return node

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = self._body(node.body)
        node.type_ignores = []
        return node

    def _function(self, node):
        if self.annotations and not _registered(node):
            node.returns = None
            for a in (
                node.args.posonlyargs
                + node.args.args
                + node.args.kwonlyargs
                + [node.args.vararg, node.args.kwarg]
            ):
                if a is not None:
                    a.annotation = None
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        self.in_class.append(False)
        node.body = self._body(node.body)
        self.in_class.pop()
        if hasattr(node, "type_params"):
            node.type_params = []
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self.in_class.append(True)
        node.body = self._body(node.body)
        self.in_class.pop()
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if not self.annotations:
            return self.generic_visit(node)
        if self.in_class[-1]:
            # ClassVar / InitVar decide whether a dataclass has the field: they stay named
            kept = [w for w in ("ClassVar", "InitVar") if w in ast.dump(node.annotation)]
            node.annotation = ast.Constant(value=kept[0] if kept else None)
            if node.value is not None:
                node.value = self.visit(node.value)
            return node
        if node.value is None:
            return None
        return ast.Assign(
            targets=[node.target],
            value=self.visit(node.value),
            lineno=node.lineno,
            col_offset=node.col_offset,
        )

    def visit_Call(self, node: ast.Call) -> ast.AST:
        f = node.func
        if (
            self.annotations
            and len(node.args) == 2
            and not node.keywords
            and (
                (isinstance(f, ast.Name) and f.id == "cast" and self.typing_cast)
                or (
                    isinstance(f, ast.Attribute)
                    and f.attr == "cast"
                    and isinstance(f.value, ast.Name)
                    and f.value.id in _TYPING_MODULES
                )
            )
        ):
            return self.visit(node.args[1])
        return self.generic_visit(node)


def _registered(node) -> bool:
    """A function decorated with ``@something.register`` (``functools.singledispatch``: its annotation picks
    the type it serves)."""
    return any(isinstance(d, ast.Attribute) and d.attr == "register" for d in node.decorator_list)


def _binds_typing_cast(tree: ast.Module) -> bool:
    """``cast`` is ``typing.cast`` in this module: imported from ``typing``/``typing_extensions`` under its
    own name, and bound nowhere else (a function, an assignment or another import named ``cast``)."""
    typing_cast = other = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if (a.asname or a.name.split(".")[0]) != "cast":
                    continue
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module in _TYPING_MODULES
                    and not a.asname
                ):
                    typing_cast = True
                else:
                    other = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other = other or node.name == "cast"
        elif (
            isinstance(node, ast.Name) and node.id == "cast" and not isinstance(node.ctx, ast.Load)
        ):
            other = True
        elif isinstance(node, ast.arg) and node.arg == "cast":
            other = True
    return typing_cast and not other


def _imports(tree: ast.Module, roots: tuple[str, ...]) -> bool:
    """The module imports one of the packages ``roots`` (or a module under one)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] in roots for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] in roots:
                return True
    return False


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class _Bindings(ast.NodeVisitor):
    """Names a function binds, in the order of their first binding; nested scopes are not entered."""

    def __init__(self):
        self.order: list[str] = []
        self.declared: set[str] = set()
        self.introspects = False

    def bind(self, name: str | None) -> None:
        if name and name not in self.order:
            self.order.append(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bind(node.id)
        elif node.id in _NAME_INTROSPECTION:
            self.introspects = True

    def visit_Global(self, node) -> None:
        self.declared.update(node.names)

    visit_Nonlocal = visit_Global

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        self.bind(node.name)
        for s in node.body:
            self.visit(s)

    def visit_alias(self, node: ast.alias) -> None:
        if node.name != "*":
            self.bind(node.asname or node.name.split(".")[0])

    def _nested(self, node) -> None:
        self.bind(getattr(node, "name", None))
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _nested

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.bind(node.name)
        for n in node.bases + node.decorator_list + [k.value for k in node.keywords]:
            self.visit(n)

    def visit_MatchAs(self, node) -> None:
        self.bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node) -> None:
        self.bind(node.name)

    def visit_MatchMapping(self, node) -> None:
        self.bind(node.rest)
        self.generic_visit(node)


class _Canon(ast.NodeTransformer):
    """Renames each function's local names to ``_l<depth>_<n>`` in the order of their first binding."""

    def __init__(self):
        self.scopes: list[dict[str, str]] = []

    def _lookup(self, name: str) -> str:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return name

    def _function(self, node):
        # decorators and defaults are evaluated in the enclosing scope
        if not isinstance(node, ast.Lambda):
            node.decorator_list = [self.visit(d) for d in node.decorator_list]
        args = node.args
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [self.visit(d) if d is not None else None for d in args.kw_defaults]
        finder = _Bindings()
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            finder.visit(stmt)
        lam = isinstance(node, ast.Lambda)
        renamed = list(args.posonlyargs) + ([a for a in args.args + args.kwonlyargs] if lam else [])
        renamed += [a for a in (args.vararg, args.kwarg) if a is not None]
        kept = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {
            a.arg for a in renamed
        }
        scope: dict[str, str] = {}
        if not finder.introspects:
            depth = len(self.scopes) + 1
            names = [a.arg for a in renamed] + [
                n for n in finder.order if n not in finder.declared and n not in kept
            ]
            for name in names:
                scope.setdefault(name, f"_l{depth}_{len(scope)}")
            for a in renamed:
                a.arg = scope[a.arg]
        # parameters kept by name shadow outer scopes: map them to themselves
        for name in kept:
            scope.setdefault(name, name)
        self.scopes.append(scope)
        if isinstance(node.body, list):
            node.body = [self.visit(s) for s in node.body]
        else:
            node.body = self.visit(node.body)
        self.scopes.pop()
        if not lam and self.scopes:
            node.name = self._lookup(node.name)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        if self.scopes:
            node.name = self._lookup(node.name)
        own = _Bindings()
        for stmt in node.body:
            own.visit(stmt)
        self.scopes.append({n: n for n in own.order})  # a class body's names are attributes: kept
        body = []
        for stmt in node.body:
            name = getattr(stmt, "name", None)
            stmt = self.visit(stmt)
            if name is not None:
                stmt.name = name  # a method's name is an attribute too
            body.append(stmt)
        node.body = body
        self.scopes.pop()
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._lookup(node.id)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self._lookup(node.name)
        return self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if self.scopes and node.name != "*":
            local = node.asname or node.name.split(".")[0]
            new = self._lookup(local)
            if new != local:
                node.asname = new
        return node

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        node.names = [self._lookup(n) for n in node.names]
        return node

    def visit_MatchAs(self, node) -> ast.AST:
        if node.name:
            node.name = self._lookup(node.name)
        return self.generic_visit(node)

    def visit_MatchStar(self, node) -> ast.AST:
        if node.name:
            node.name = self._lookup(node.name)
        return node

    def visit_MatchMapping(self, node) -> ast.AST:
        if node.rest:
            node.rest = self._lookup(node.rest)
        return self.generic_visit(node)


def normalise(
    tree: ast.AST,
    *,
    docstrings: bool = True,
    annotations: bool = True,
    debug: bool = True,
    renames: bool = True,
    typing_cast: bool = True,
) -> ast.AST:
    """A copy of ``tree`` with the inert parts set aside (module docstring); each kind can be kept.
    ``typing_cast``: a bare ``cast(T, x)`` is ``typing.cast`` (see :func:`_binds_typing_cast`)."""
    tree = copy.deepcopy(tree)
    tree = _Strip(
        annotations=annotations, debug=debug, docstrings=docstrings, typing_cast=typing_cast
    ).visit(tree)
    if renames:
        tree = _Canon().visit(tree)
    return tree


def dump(tree: ast.AST) -> str:
    """The tree as text without positions (what two versions are compared by)."""
    return ast.dump(tree, include_attributes=False)


def _comments(text: str) -> list[str]:
    try:
        return [
            t.string.strip()
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []


@dataclass
class PyComparison:
    """What :func:`compare` found.

    Attributes:
        parsed: both versions parsed (False: a syntax error; nothing else is meaningful).
        same_behaviour: the normalised trees are equal.
        set_aside: the kinds of edit the change consists of (:data:`ASIDE_ORDER`), when ``same_behaviour``.
        old_tree, new_tree: the parsed trees (``None`` when a version is absent or did not parse).
    """

    parsed: bool
    same_behaviour: bool
    set_aside: list[str] = field(default_factory=list)
    old_tree: ast.Module | None = None
    new_tree: ast.Module | None = None


_PARSED: dict[str, ast.Module | None] = {}
_PARSED_MAX = 32


def parse(text: str | None) -> ast.Module | None:
    """``text`` parsed, or ``None`` when it is absent or not valid Python for this interpreter.

    The last :data:`_PARSED_MAX` texts are kept: a file changed by consecutive commits is parsed once per
    version, not twice (the new side of one commit is the old side of the next). Callers never change the
    tree they get (:func:`normalise` works on copies).
    """
    if text is None:
        return None
    if text in _PARSED:
        return _PARSED[text]
    try:
        tree: ast.Module | None = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        tree = None
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[text] = tree
    return tree


def compare(old: str | None, new: str | None) -> PyComparison:
    """Compare two versions of a Python file (``None``: the file is absent on that side).

    Returns:
        a :class:`PyComparison`; an added or deleted file, or one that does not parse, is never
        behaviour-equal.
    """
    t_old, t_new = parse(old), parse(new)
    if t_old is None or t_new is None:
        return PyComparison(False, False, [], t_old, t_new)
    texts = [_statement_texts(t, x or "") for t, x in ((t_old, old), (t_new, new))]
    shared = set(texts[0]) & set(texts[1])
    # what is behaviour in this file: a docstring read at run time, annotations a library acts on
    keep: dict[str, bool] = {}
    if any("__doc__" in x or "getdoc" in x for x in (old or "", new or "")):
        keep["docstrings"] = False
    if _imports(t_old, RUNTIME_TYPING) or _imports(t_new, RUNTIME_TYPING):
        keep["annotations"] = False
    casts = [{"typing_cast": _binds_typing_cast(t)} for t in (t_old, t_new)]

    def tokens(i: int, **kinds: bool) -> list[str]:
        tree = (t_old, t_new)[i]
        return _tokens(tree, texts[i], shared, **{**casts[i], **keep, **kinds})

    try:
        if tokens(0) != tokens(1):
            return PyComparison(True, False, [], t_old, t_new)
        aside = []
        if _comments(old or "") != _comments(new or ""):
            aside.append("comments")
        for kind, kwargs in (
            ("docstrings", {"docstrings": False}),
            ("annotations", {"annotations": False}),
            ("debug logging", {"debug": False}),
            ("renames", {"renames": False}),
        ):
            if tokens(0, **kwargs) != tokens(1, **kwargs):
                aside.append(kind)
    except RecursionError:
        return PyComparison(False, False, [], t_old, t_new)
    if _layout_changed(old or "", new or "") or not aside:
        aside.append("formatting")
    return PyComparison(True, True, aside, t_old, t_new)


def _statement_texts(tree: ast.Module, text: str) -> list[str]:
    """The source text of each top-level statement of ``tree`` (decorators included)."""
    lines = text.splitlines()
    out = []
    for st in tree.body:
        start = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", [])])
        out.append("\n".join(lines[start - 1 : st.end_lineno or st.lineno]))
    return out


def _tokens(tree: ast.Module, texts: list[str], shared: set[str], **kwargs: bool) -> list[str]:
    """The module as a list of tokens: a top-level statement whose text both versions hold stands for itself
    (equal texts give equal trees), any other is normalised (:func:`normalise`, each kind as ``kwargs`` says)
    and dumped. Only the statements a change touched are normalised, so a 1-line change in a large file
    costs the function it is in, not the file."""
    out: list[str] = []
    for st, text in zip(tree.body, texts):
        if text in shared:
            out.append("T" + text)
            continue
        body = normalise(ast.Module(body=[st], type_ignores=[]), **kwargs).body  # type: ignore[attr-defined]
        out.extend("D" + dump(x) for x in body if not isinstance(x, ast.Pass))
    return out


def _code_chars(line: str) -> str:
    return re.sub(r"\s+", "", line.split("#", 1)[0]).replace("'", '"').rstrip(",")


def _layout_changed(old: str, new: str) -> bool:
    """Some changed block of lines holds the same characters once spaces, quotes and trailing commas are set aside."""
    import difflib

    a, b = old.splitlines(), new.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag != "replace":
            continue
        x, y = "".join(map(_code_chars, a[i1:i2])), "".join(map(_code_chars, b[j1:j2]))
        bare = [
            [line.split("#", 1)[0].rstrip() for line in block] for block in (a[i1:i2], b[j1:j2])
        ]
        if x and x == y and bare[0] != bare[1]:
            return True
    return False
