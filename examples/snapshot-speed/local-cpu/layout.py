"""Fallback when pip cannot build a wheel here: lay a source tree out as `pip install --target T` would."""

import configparser
import shutil
import sys
from pathlib import Path

src, target = Path(sys.argv[1]), Path(sys.argv[2])
cfg = configparser.ConfigParser()
cfg.read(src / "setup.cfg")
target.mkdir(parents=True, exist_ok=True)
for name, folder in (
    ("forensics", "forensics"),
    ("forensics_probes", "probes"),
    ("forensics_reports", "reports"),
):
    shutil.copytree(
        src / folder,
        target / name,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        dirs_exist_ok=True,
    )
info = target / "forensics-0.1.0.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text("Metadata-Version: 2.1\nName: forensics\nVersion: 0.1.0\n")
eps = "".join(
    f"[{sec}]\n"
    + "".join(f"{line.strip()}\n" for line in cfg["options.entry_points"][sec].strip().splitlines())
    + "\n"
    for sec in ("console_scripts", "forensics.probes")
)
(info / "entry_points.txt").write_text(eps)
(info / "top_level.txt").write_text("forensics\nforensics_probes\nforensics_reports\n")
(info / "RECORD").write_text("")
(target / "bin").mkdir(exist_ok=True)
script = target / "bin" / "forensics"
script.write_text(
    f"#!{sys.executable}\nimport re\nimport sys\nfrom forensics.__main__ import main\n"
    "if __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
    "    sys.exit(main())\n"
)
script.chmod(0o755)
print(f"laid out {src} in {target}")
