"""The bisect report's JSON has the head every forensics document has: ``schema``, ``tool``, ``created``."""

from __future__ import annotations

import json
import re

from forensics import __version__
from forensics.bisect.measure import StepSpec
from forensics.bisect.run import BisectConfig, Outcome, run_bisect
from forensics.render.bisect import SCHEMA, render
from tests.bisect.test_bisect import CMD, factor_file, make_repo  # noqa: F401 - factor_file is a fixture


def test_the_json_report_names_its_schema_tool_and_time(tmp_path, factor_file):  # noqa: F811
    repo, shas = make_repo(tmp_path, n=3, slow_at=None, broken_at=None)
    factor_file.write_text("1.3\n")  # the environment got slower: only the endpoints are measured
    res = run_bisect(
        BisectConfig(
            str(repo),
            shas[0],
            shas[-1],
            StepSpec(cmd=CMD),
            processes=5,
            threshold=0.10,
            good_was=6.0,
        )
    )
    assert res.outcome is Outcome.ENVIRONMENT
    data = json.loads(render(res, "json"))
    assert SCHEMA == "forensics.bisect/1" and data["schema"] == SCHEMA
    assert data["tool"] == {"name": "forensics", "version": __version__}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["created"])
    assert (
        list(data)[:3] == ["schema", "created", "tool"] and data["outcome"] == "environment-changed"
    )
