"""The official MCP conformance suite (0.2.0-alpha.12) against `canon serve`, for both protocol revisions.

The suite acts as an MCP client over Streamable HTTP and runs exactly the scenarios a revision requires
(`--requirements`). Its fixtures (tools, resources and prompts of its reference server) are not canon's, so
the scenarios that need them are listed in conformance-baseline.yml, check by check, each with its reason.
Everything else must pass. The runner judges the baseline for the scored scenarios; this test judges it
again from the saved checks.json files for every scenario run, scored or not, so that a new failure of a
not-scored scenario (tasks, pending) does not pass unseen either.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.clients._processes import run
from tests.clients.conftest import CLIENTS, Served, client_env, require_clients

SUITE = CLIENTS / "node_modules" / "@modelcontextprotocol" / "conformance"
BASELINE = CLIENTS / "conformance-baseline.yml"
REVISIONS = ("2025-11-25", "2026-07-28")
FAILING = ("FAILURE", "WARNING")  # the runner's baseline rules treat a WARNING as a failure too
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
SEVERITY = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1}


def _baseline() -> tuple[set[str], dict[str, set[str]]]:
    """The baselined scenarios (whole) and checks (per scenario)."""
    whole: set[str] = set()
    checks: dict[str, set[str]] = {}
    for entry in yaml.safe_load(BASELINE.read_text())["server"]:
        scenario, _, check = str(entry).partition(":")
        if check:
            checks.setdefault(scenario, set()).add(check)
        else:
            whole.add(scenario)
    return whole, checks


def _required(revision: str) -> set[str]:
    """Every server scenario `--requirements revision` runs: the scored ones and the not-scored ones."""
    requirements = yaml.safe_load((SUITE / "requirements" / f"{revision}.yaml").read_text())
    not_scored = {e["scenario"] for e in requirements.get("not_scored", []) if e["leg"] == "server"}
    return set(requirements["server"]) | not_scored


def _verdicts(checks: list[dict[str, object]]) -> dict[str, str]:
    """One status per check id, the most severe of its occurrences (as the runner collapses them); INFO aside."""
    verdicts: dict[str, str] = {}
    for check in checks:
        status, check_id = str(check["status"]), str(check["id"])
        if status in SEVERITY and SEVERITY[status] >= SEVERITY.get(verdicts.get(check_id, ""), 0):
            verdicts[check_id] = status
    return verdicts


@dataclass
class Tally:
    """What one run of the suite found, judged against the baseline."""

    statuses: Counter[str] = field(default_factory=Counter)
    scenarios: dict[str, str] = field(default_factory=dict)  # scenario -> passed | baselined | failed
    excused: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    def summary(self, revision: str) -> str:
        s, c = Counter(self.scenarios.values()), self.statuses
        return (
            f"conformance --requirements {revision}: checks {c['SUCCESS']} passed, {c['FAILURE']} failed, "
            f"{c['WARNING']} warnings; by check id, {len(self.excused)} failing in the baseline and "
            f"{len(self.unexpected)} not; scenarios {len(self.scenarios)} run: {s['passed']} passed, "
            f"{s['baselined']} failed only in baselined checks, {s['failed']} failed otherwise"
        )


def _tally(results: Path) -> Tally:
    whole, per_check = _baseline()
    tally = Tally()
    for directory in sorted(results.iterdir()):
        match = RESULT_DIR.match(directory.name)
        assert match, f"unexpected result directory {directory.name}"
        scenario = match["scenario"]
        checks = json.loads((directory / "checks.json").read_text())
        tally.statuses.update(str(c["status"]) for c in checks)
        failing = {i for i, status in _verdicts(checks).items() if status in FAILING}
        if scenario in whole:
            tally.excused += [f"{scenario}:{i}" for i in sorted(failing)]
            tally.stale += [] if failing else [scenario]
            tally.scenarios[scenario] = "baselined" if failing else "passed"
            continue
        allowed = per_check.get(scenario, set())
        tally.excused += [f"{scenario}:{i}" for i in sorted(failing & allowed)]
        tally.unexpected += [f"{scenario}:{i}" for i in sorted(failing - allowed)]
        verdicts = _verdicts(checks)
        tally.stale += [f"{scenario}:{i}" for i in sorted(allowed) if verdicts.get(i) == "SUCCESS"]
        tally.scenarios[scenario] = "failed" if failing - allowed else "baselined" if failing else "passed"
    return tally


@pytest.mark.slow
@pytest.mark.parametrize("revision", REVISIONS)
def test_conformance_suite_passes_every_scenario_that_does_not_need_its_own_fixtures(
    revision: str, node22: Path, canon_http: Served, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    command = [node22, SUITE / "dist" / "index.js", "server", "--url", canon_http.url, "--requirements", revision,
               "--expected-failures", BASELINE, "--output-dir", results]  # fmt: skip
    finished = run(command, cwd=CLIENTS, env=client_env(tmp_path / "home"), timeout=600)
    tally = _tally(results)
    print(tally.summary(revision))

    report = finished.stdout[finished.stdout.find("=== SUMMARY ===") :]
    assert finished.returncode == 0, f"the suite reports failures canon must fix:\n{report}\n{finished.stderr}"
    assert set(tally.scenarios) == _required(revision), "the suite did not run every scenario the revision requires"
    assert tally.unexpected == [], f"failures outside the baseline (canon's to fix): {tally.unexpected}"
    assert tally.stale == [], f"baselined checks that now pass (remove them from the baseline): {tally.stale}"
    assert tally.excused, "a run with no baselined failure at all means the suite found no fixtures missing: check it"


def test_conformance_baseline_names_real_scenarios_and_says_why_for_each() -> None:
    require_clients()
    entries = [line for line in BASELINE.read_text().splitlines() if line.lstrip().startswith("- ")]
    known = set().union(*(_required(r) for r in REVISIONS))
    whole, per_check = _baseline()

    assert len(entries) == len(whole) + sum(len(c) for c in per_check.values()), "an entry is listed twice"
    assert (whole | set(per_check)) <= known, f"not a scenario of {REVISIONS}: {(whole | set(per_check)) - known}"
    assert not whole & set(per_check), "a scenario is baselined both whole and check by check"
    for line in entries:
        reason = line.partition(" # ")[2].strip()
        assert reason, f"baseline entry without a reason: {line.strip()}"
