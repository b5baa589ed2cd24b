"""Counts the hostile-input battery's cases per class (the ``cN`` prefix of each test id).

Run: python -m tests.hostile.count   (exit status 1 when the battery has fewer than 150 cases
or a class has none)
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

from tests.hostile.classes import CLASSES

MINIMUM = 150


def main() -> int:
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-m", "", "tests/hostile"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    counts: Counter[str] = Counter()
    for line in listing.splitlines():
        match = re.search(r"\[(c\d)[-_\]]", line)
        if "::" in line and match:
            counts[match.group(1)] += 1
    total = sum(counts.values())
    for key, title in CLASSES.items():
        print(f"{key}  {counts[key]:4d}  {title}")
    print(f"total {total}")
    missing = [key for key in CLASSES if not counts[key]]
    if total < MINIMUM or missing:
        print(f"fewer than {MINIMUM} cases, or classes without a case: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
