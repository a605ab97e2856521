"""Clean a pasted text and find the environment reports in it (one file often holds several).

Cleaning undoes what pasting into a ticket does: a UTF-8/UTF-16 byte-order mark,
Windows (CRLF) or old Mac (CR) line ends, ANSI colour codes, Markdown code fences
(```text ... ```), ``<details>``/``<summary>`` lines, a ``> `` quote prefix on
every line of a reply. Line numbers of the cleaned text match the original
(removed lines become empty lines).

Detection finds the first line of each part by its anchor:

========================  ==================================================================
format                    anchor
========================  ==================================================================
``collect-env``           "Collecting environment information...", or a "PyTorch version" line
``vllm``                  a collect_env whose text names vLLM ("vLLM Version", "==== System Info")
``sglang``                "Python: ..." followed within 3 lines by "CUDA available:" (check_env)
``nvidia-smi``            the "NVIDIA-SMI <v>  Driver Version: <v>" table header
``nvidia-smi-q``          "==============NVSMI LOG=============="
``nvidia-smi-xml``        "<?xml" or "<nvidia_smi_log"
``pip``                   a "Package  Version" header over dashes, or 3+ "name==version" lines
========================  ==================================================================

A part runs to the next anchor. Text before the first anchor (a question, a shell
prompt) and text between parts is ignored.

People paste fragments: a report's later sections without its first line ("Versions of
relevant libraries:" and the vLLM lines, a few GPU boxes of the table, one GPU block of
``-q``). Each section a text holds is read wherever it starts: a *section anchor* starts
a fragment of its format where no part of that format is under way, and continues the
part that is:

========================  ==================================================================
format                    section anchors
========================  ==================================================================
``collect-env``           "Versions of relevant libraries:"; two ``[pip3]``/``[conda]`` lines;
                          a collect_env key line ("Nvidia driver version:", "Is CUDA
                          available:" ...) with another within 3 lines
``vllm``                  "vLLM Build Flags:", "GPU Topology:", "ROCM Version:", "Neuron SDK
                          Version:"; a "==== PyTorch Info ====" (or other section) header
``sglang``                a check_env key line ("CUDA available:", "PyTorch:", "sglang:",
                          "NVCC:", "CUDA Driver Version:", "NVIDIA Topology:" ...) with another
                          within 3 lines, or "sglang: <version>"
``nvidia-smi``            the column header ("| GPU  Name ... Bus-Id ...") or a GPU's first row
``nvidia-smi-q``          "GPU 00000000:17:00.0" followed by "Key : value" lines; "Driver
                          Version : ..." with "CUDA Version : ..." or "Attached GPUs : ..." near
``nvidia-smi-xml``        a ``<gpu id="...">`` element or ``<driver_version>`` line without the log around it
``pip``                   three ``name   version`` rows of the table without its header
========================  ==================================================================

Fragments of one format in one text (the libraries here, the vLLM lines further down) are one
part; two *complete* reports of one kind are still refused by the importer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from forensics.errors import BadInputError

FORMATS = ("collect-env", "vllm", "sglang", "nvidia-smi", "nvidia-smi-q", "nvidia-smi-xml", "pip")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})[\w+-]*\s*$")
_HTML_LINE = re.compile(
    r"^\s*(</?details[^>]*>|<summary>.*</summary>|</?summary>|<br\s*/?>|</?pre>|</?code>)\s*$", re.I
)
_TORCH_KEYS = re.compile(
    r"^\s*(PyTorch version|Is debug build|CUDA used to build PyTorch|Is CUDA available|"
    r"GPU models and configuration|Nvidia driver version|cuDNN version|CUDA runtime version|"
    r"Versions? of relevant libraries)\b",
    re.I,
)
_VLLM_HINT = re.compile(
    r"^\s*(vLLM Version\s*:|vLLM Build Flags|=+\s*$|\s*vLLM Info\s*$|Neuron SDK Version)|"
    r"Automatically detected platform|vllm\._C",
    re.I,
)
_SECTION_HEADER = re.compile(
    r"^\s*(System Info|PyTorch Info|Python Environment|CUDA / GPU Info|CPU Info|Versions of "
    r"relevant libraries|vLLM Info|Environment Variables)\s*$"
)


@dataclass
class Span:
    """One part found in a text: its format and 0-based line range ``[start, end)``.

    ``fragment``: the part starts at a section anchor, not at its report's first line.
    """

    format: str
    start: int
    end: int
    fragment: bool = False


def decode(raw: bytes) -> str:
    """Bytes of a pasted file to text: UTF-8 (BOM allowed), UTF-16 with a BOM (Windows redirection),
    else Latin-1 (never fails; a stray byte becomes one odd character)."""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def clean(text: str) -> list[str]:
    """The text's lines with paste damage undone (module docstring); same line count as the input."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    nonempty = [ln for ln in lines if ln.strip()]
    quoted = (
        nonempty
        and sum(1 for ln in nonempty if ln.lstrip().startswith(">")) >= 0.8 * len(nonempty)
        and not any(ln.lstrip().startswith("<?xml") for ln in nonempty)
    )
    out = []
    for ln in lines:
        ln = _ANSI.sub("", ln)
        if quoted:
            ln = re.sub(r"^\s*> ?", "", ln)
        if _FENCE.match(ln) or _HTML_LINE.match(ln):
            ln = ""
        out.append(ln)
    return out


def _anchor(lines: list[str], i: int) -> str | None:
    ln = lines[i].strip()
    if not ln:
        return None
    if ln.startswith("<?xml") or ln.startswith("<nvidia_smi_log"):
        return "nvidia-smi-xml"
    if re.match(r"^=+\s*NVSMI LOG\s*=+$", ln):
        return "nvidia-smi-q"
    if re.search(r"NVIDIA-SMI\s+\d+\.\d+\S*\s+Driver Version:\s*\d", ln):
        return "nvidia-smi"
    if ln.startswith("Collecting environment information"):
        return "collect-env"
    if re.match(r"^PyTorch version\b", ln):
        return "collect-env"
    if re.match(r"^=+$", ln) and i + 1 < len(lines) and lines[i + 1].strip() == "System Info":
        return "collect-env"
    if re.match(r"^Python:\s*\d", ln) and any(
        re.match(r"^\s*(CUDA|ROCM|MUSA) available:", x) for x in lines[i + 1 : i + 4]
    ):
        return "sglang"
    if (
        re.match(r"^Package\s+Version(\s+\S.*)?$", ln)
        and i + 1 < len(lines)
        and re.match(r"^-{3,}\s+-{3,}", lines[i + 1].strip())
    ):
        return "pip"
    if _freeze_line(ln) and sum(1 for x in lines[i : i + 5] if _freeze_line(x.strip())) >= 3:
        return "pip"
    if re.match(r"^vLLM Version\s*:", ln):
        return "vllm"
    return None


_FREEZE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?\s*(==|===|\s@\s)\s*\S+")
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _./()\-]*?)\s*[:：]")
_COLLECT_KEYS = frozenset(
    {
        "os",
        "pytorch version",
        "is debug build",
        "cuda used to build pytorch",
        "rocm used to build pytorch",
        "gcc version",
        "clang version",
        "cmake version",
        "libc version",
        "python version",
        "python platform",
        "is cuda available",
        "cuda runtime version",
        "cuda_module_loading set to",
        "gpu models and configuration",
        "nvidia driver version",
        "cudnn version",
        "hip runtime version",
        "miopen runtime version",
        "is xnnpack available",
        "is xpu available",
        "caching allocator config",
        "versions of relevant libraries",
        "version of relevant libraries",
    }
)
"""collect_env's own key names (torch/utils/collect_env.py); a line counts only with another within 3 lines."""
_VLLM_SECTIONS = re.compile(
    r"^(vLLM Build Flags|GPU Topology|ROCM Version|Neuron SDK Version)\s*[:：]", re.I
)
_SGLANG_KEYS = frozenset(
    {
        "cuda available",
        "rocm available",
        "cuda_home",
        "rocm_home",
        "nvcc",
        "hipcc",
        "cuda driver version",
        "rocm driver version",
        "pytorch",
        "sglang",
        "sgl_kernel",
        "flashinfer",
        "flashinfer_python",
        "nvidia topology",
        "amd topology",
        "ulimit soft",
    }
)
"""check_env's key names (sglang/check_env.py) that no other format prints as ``Key: value``."""
_PIP_ROW = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*\s{2,}v?\d[\w.+!\-]*(\s+/\S*)?\s*$")
_SMI_COLUMNS = re.compile(r"^\|\s*GPU\s+Name\s+.*\|\s*Bus-Id\b")
_SMI_ROW1 = re.compile(
    r"^\|\s*\d+\s+\S.*?\s+(On|Off)\s*\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s"
)
_Q_GPU = re.compile(r"^\s*GPU\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*$")
_Q_KV = re.compile(r"^\s*[A-Z][\w .()/-]*?\s+:\s")


def _key(line: str) -> str:
    m = _KEY.match(line)
    return re.sub(r"\s+", " ", m.group(1).strip().lower()) if m else ""


def _near(lines: list[str], i: int, test, count: int = 3) -> bool:
    """True when ``test`` holds for one of the next ``count`` non-blank lines after line ``i``."""
    seen = 0
    for ln in lines[i + 1 :]:
        if not ln.strip():
            continue
        if test(ln):
            return True
        seen += 1
        if seen >= count:
            return False
    return False


def _section(lines: list[str], i: int) -> str | None:
    """The format whose section starts at line ``i`` (module docstring: section anchors), or None."""
    raw = lines[i]
    ln = raw.strip()
    if not ln:
        return None
    if ln.startswith("<gpu id=") or re.match(r"^<(driver_version|attached_gpus)>", ln):
        return "nvidia-smi-xml"
    if _SMI_COLUMNS.match(ln) or _SMI_ROW1.match(ln):
        return "nvidia-smi"
    if _Q_GPU.match(raw) and _near(lines, i, _Q_KV.match):
        return "nvidia-smi-q"
    if re.match(r"^(Driver Version|Attached GPUs)\s+:\s*\S", ln) and _near(
        lines,
        i,
        lambda x: re.match(r"^\s*(CUDA Version|Attached GPUs|Driver Version|Timestamp)\s+:", x),
    ):
        return "nvidia-smi-q"
    if _VLLM_SECTIONS.match(ln):
        return "vllm"
    if (
        ln
        in (
            "PyTorch Info",
            "Python Environment",
            "CUDA / GPU Info",
            "CPU Info",
            "vLLM Info",
            "Versions of relevant libraries",
            "Environment Variables",
        )
        and i > 0
        and re.match(r"^=+$", lines[i - 1].strip())
    ):
        return "vllm"
    key = _key(raw)
    if key in ("versions of relevant libraries", "version of relevant libraries"):
        return "collect-env"
    if re.match(r"^\[(pip\d?|conda)\]\s+\S", ln) and _near(
        lines, i, lambda x: re.match(r"^\s*\[(pip\d?|conda)\]\s", x), 1
    ):
        return "collect-env"
    if key in _COLLECT_KEYS and _near(lines, i, lambda x: _key(x) in _COLLECT_KEYS):
        return "collect-env"
    if key in _SGLANG_KEYS and (
        key == "sglang"
        and re.search(r"[:：]\s*\d", ln)
        or _near(lines, i, lambda x: _key(x) in _SGLANG_KEYS)
    ):
        return "sglang"
    if _PIP_ROW.match(ln) and sum(1 for x in lines[i : i + 3] if _PIP_ROW.match(x.strip())) >= 3:
        return "pip"
    return None


_FAMILY = {"vllm": "collect-env"}


def family(fmt: str) -> str:
    """The kind of report a format is (vLLM's collect-env is a collect_env)."""
    return _FAMILY.get(fmt, fmt)


def _freeze_line(ln: str) -> bool:
    return bool(_FREEZE.match(ln)) and not ln.startswith("[")


def split(lines: list[str]) -> list[Span]:
    """Find the parts of a cleaned text (module docstring); ``[]`` when none is recognised.

    Inside a collect_env part, a "PyTorch version" line or a "System Info" header
    starts a new part only when the current one already has one (two reports pasted
    one after the other); "Collecting environment information..." starts a new part
    only when the current one already holds a report.
    """
    spans: list[Span] = []
    cur: Span | None = None
    seen: set[str] = set()  # what the current collect_env part holds: "torch", "system"
    for i in range(len(lines)):
        kind = _anchor(lines, i)
        if kind is None:
            kind = _section(lines, i)
            if kind is None:
                continue
            if cur is not None and (
                family(cur.format) == family(kind)
                or (cur.format == "nvidia-smi-xml" and not _xml_closed(lines, cur.start, i))
            ):
                if kind == "vllm" and cur.format == "collect-env":
                    cur.format = "vllm"
                continue  # a section of the part under way
            if cur is not None:
                cur.end = i
                spans.append(cur)
            cur = Span(kind, i, len(lines), fragment=True)
            seen = set()
            continue
        ln = lines[i].strip()
        mark = (
            "torch"
            if ln.startswith("PyTorch version")
            else ("system" if re.match(r"^=+$", ln) else None)
        )
        if (
            cur is not None
            and cur.format in ("collect-env", "vllm")
            and kind in ("collect-env", "vllm")
        ):
            if (
                kind == "vllm"
                or (
                    mark is not None
                    and mark not in seen
                    and not (mark == "system" and "torch" in seen)
                )
                or (mark is None and not seen)
            ):
                if kind == "vllm":
                    cur.format = "vllm"
                else:
                    cur.fragment = (
                        False  # a report's own beginning: the pieces before it are of that report
                    )
                if mark:
                    seen.add(mark)
                continue
        elif cur is not None and cur.format == kind == "pip":
            cur.fragment = False
            continue
        elif (
            cur is not None
            and cur.format == "nvidia-smi-xml"
            and not _xml_closed(lines, cur.start, i)
        ):
            continue  # text inside an XML document is not a new part
        if cur is not None:
            cur.end = i
            spans.append(cur)
        cur = Span(kind, i, len(lines))
        seen = {mark} if mark else set()
    if cur is not None:
        spans.append(cur)
    for s in spans:
        if s.format != "collect-env":
            continue
        body = [ln for ln in lines[max(0, s.start - 4) : s.end] if not re.match(r"^\s*=+\s*$", ln)]
        if any(_VLLM_HINT.search(ln) or _SECTION_HEADER.match(ln) for ln in body):
            s.format = "vllm"  # vLLM's collect_env: it names vLLM, or uses its sectioned layout (vLLM >= 0.9)
    return [s for s in spans if _has_content(s, lines)]


def _xml_closed(lines: list[str], start: int, i: int) -> bool:
    return any("</nvidia_smi_log>" in ln for ln in lines[start:i])


def _has_content(span: Span, lines: list[str]) -> bool:
    """A collect_env anchor alone ("Collecting environment information..." and nothing) is no part."""
    body = [ln for ln in lines[span.start : span.end] if ln.strip()]
    if span.fragment:
        return len(body) >= 1
    if span.format in ("collect-env", "vllm"):
        return any(
            _TORCH_KEYS.match(ln) or _SECTION_HEADER.match(ln) or re.match(r"^\s*vLLM Version", ln)
            for ln in body
        )
    return len(body) >= 1


def parts_of(text: str, name: str, fmt: str = "auto") -> tuple[list[str], list[Span]]:
    """Clean ``text`` and find its parts; with ``fmt`` other than ``auto`` the whole text is that format.

    Raises:
        BadInputError: nothing in the text is an environment report (the message names
            ``name`` and the formats this tool reads).
    """
    lines = clean(text)
    if fmt != "auto":
        if fmt not in FORMATS:
            raise BadInputError(f"--format {fmt}: expected auto or one of {', '.join(FORMATS)}")
        same = [
            {"collect-env", "vllm"},
            {"nvidia-smi", "nvidia-smi-q"},
        ]  # --format nvidia-smi: the table or -q text
        spans = [
            s for s in split(lines) if s.format == fmt or any({s.format, fmt} <= g for g in same)
        ]
        if not spans:
            raise BadInputError(
                f"{name}: no {fmt} report found in it; check --format (or use --format auto)"
            )
        return lines, spans
    spans = split(lines)
    if not spans and re.search(r'^\W*"?schema"?\s*:\s*"?forensics\.', text[:4096], re.MULTILINE):
        raise BadInputError(
            f"{name}: already a forensics document, not a pasted text; read it with "
            "'forensics show' or compare it with 'forensics diff'"
        )
    if not spans:
        raise BadInputError(
            f"{name}: not an environment report (no collect_env, vLLM collect-env, sglang check_env, "
            "nvidia-smi, nvidia-smi -q/-x or pip list text found); paste one of those"
        )
    return lines, spans
