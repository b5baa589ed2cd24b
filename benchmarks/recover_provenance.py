"""Recover the commit each committed results row was trained at, from git history.

`attnmatch reproduce` records, per row, the commit each run was trained at (`commits`, read from
the runs' result.json). Tables written before that have only the table's `commit`: the code that
wrote the table, which reuses finished runs, so a row may have been trained at an earlier commit.
The runs' own folders are not committed; the best evidence left is git history: the first
committed version of results/<table>.json (following renames) whose row has exactly the same
per-seed test values (every metric, every seed) was written at that version's table `commit`, so
the runs were trained at that commit or earlier.

For every trained row of results/*.json without `commits` (or with recovered ones: the script can
be run again), it writes
    "commits": [<that commit>, ...]          one per seed
    "train_time_s": [null, ...]              the runs' own training time is not recoverable
    "provenance": "recovered from git history: ..."
and re-renders results/<table>.md and results/README.md. No result value changes. It also checks
the answer with `git log -S`: it warns when a commit before that version added the row's first
per-seed value under results/ in a table with exactly the row's runs (another table's history).

    python benchmarks/recover_provenance.py            # write
    python benchmarks/recover_provenance.py --dry-run  # print what it would write
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
TABLES = ROOT / "benchmarks" / "tables"
RECOVERED = "recovered from git history"


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def versions(path: str) -> list[tuple[str, str]]:
    """(commit, path at that commit) of every committed version of `path`, oldest first."""
    out = git("log", "--follow", "--format=commit %h", "--name-only", "--", path)
    found: list[tuple[str, str]] = []
    rev = ""
    for line in out.splitlines():
        if line.startswith("commit "):
            rev = line.split()[1]
        elif line.strip() and rev:
            found.append((rev, line.strip()))
            rev = ""
    return found[::-1]


def metric_names(row: dict[str, Any]) -> list[str]:
    return list(row.get("metric_names") or row.get("metrics") or [])


def same_runs(row: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether `old` has exactly `row`'s seeds and per-seed test values for each of its metrics."""
    if list(old.get("seeds") or []) != list(row["seeds"]):
        return False
    names = metric_names(row)
    return bool(names) and all(
        old.get("metrics", {}).get(m, {}).get("runs") == row["metrics"][m]["runs"] for m in names
    )


def first_version(path: str, row: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(revision, table, row) of the first committed version of `path` with `row`'s runs."""
    for rev, at in versions(path):
        table = json.loads(git("show", f"{rev}:{at}"))
        for old in table.get("rows", []):
            if same_runs(row, old):
                return rev, table, old
    raise LookupError(f"{path}: row {row['id']!r}: its per-seed values are in no committed version")


def earlier_sightings(row: dict[str, Any], rev: str) -> list[str]:
    """Commits before `rev` that added `row`'s first per-seed value (as JSON writes it) under
    results/ and hold, in any results JSON, a row with exactly `row`'s runs (expected: none)."""
    value = json.dumps(row["metrics"][metric_names(row)[0]]["runs"][0])
    found = []
    for commit in git("log", "--format=%h", "-S", value, "--", "results").split():
        if commit == rev or not git_is_ancestor(commit, rev):
            continue
        for name in git("ls-tree", "--name-only", commit, "results/").split():
            if not name.endswith(".json"):
                continue
            table = json.loads(git("show", f"{commit}:{name}"))
            if any(same_runs(row, old) for old in table.get("rows", [])):
                found.append(f"{commit}:{name}")
    return found


def recover_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    path = f"results/{table}.json"
    rev, first_table, old = first_version(path, row)
    commit = first_table["commit"]
    provenance = f"{RECOVERED}: first in {path} as committed in {rev} (table written at {commit})"
    if old.get("wall_time_s") and old["wall_time_s"] != row.get("wall_time_s"):
        first = ", ".join(f"{t:g}" for t in old["wall_time_s"])
        provenance += (
            f"; wall time then: {first} s (the finished runs were reused since, so the row's "
            "wall_time_s is not their training time)"
        )
    for where in earlier_sightings(row, rev):
        print(f"warning: {table}/{row['id']}: the same runs are in {where}", file=sys.stderr)
    return {
        "commits": [commit] * len(row["seeds"]),
        "train_time_s": [None] * len(row["seeds"]),
        "provenance": provenance,
    }


def git_is_ancestor(a: str, b: str) -> bool:
    return (
        subprocess.run(
            ["git", "merge-base", "--is-ancestor", a, b], cwd=ROOT, check=False
        ).returncode
        == 0
    )


def with_provenance(row: dict[str, Any], recovered: dict[str, Any]) -> dict[str, Any]:
    """`row` with the recovered keys placed after wall_time_s (before the experiment)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "experiment":
            out.update(recovered)
        out[key] = value
    out.update({k: v for k, v in recovered.items() if k not in out})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", help="table names (default: every results table)")
    parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
    args = parser.parse_args(argv)

    from attnmatch.research.results_index import (
        is_table,
        read_toml,
        render_markdown,
        write_results_readme,
    )

    changed = False
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        if not is_table(result) or (args.tables and result["table"] not in args.tables):
            continue
        rows, found = [], {}
        for row in result["rows"]:
            if row.get("not_run") or (
                row.get("commits") and not str(row.get("provenance", "")).startswith(RECOVERED)
            ):
                rows.append(row)  # not run, or its commits come from its runs' result.json
                continue
            recovered = recover_row(result["table"], row)
            found.setdefault(recovered["commits"][0], []).append(row["id"])
            rows.append(with_provenance(row, recovered))
        for commit, ids in found.items():
            print(f"{result['table']} (written at {result['commit']}): {commit}: {', '.join(ids)}")
        if not found or args.dry_run:
            continue
        result["rows"] = rows
        path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        metrics = read_toml(TABLES / f"{result['table']}.toml")["metrics"]
        path.with_suffix(".md").write_text(render_markdown(result, metrics), encoding="utf-8")
        changed = True
    if changed:
        print(f"wrote {write_results_readme(RESULTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
