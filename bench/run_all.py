"""`make bench`: run every bench/bench_*.py in turn, then gather their tables into RESULTS.md.

Each script writes bench/results/<name>.json (all figures) and <name>.md (its table).
Pass script names to run a subset: .venv/bin/python bench/run_all.py bench_ppo
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from common import RESULTS, machine

HERE = Path(__file__).resolve().parent


def section(result: Path) -> str:
    """A script's own table (<name>.md) if it wrote one, else its JSON figures as they are."""
    table = result.with_suffix(".md")
    if table.exists():
        return table.read_text()
    return f"### {result.stem}\n\n```json\n{result.read_text().strip()}\n```\n"


def main() -> int:
    wanted = set(sys.argv[1:])
    scripts = sorted(p for p in HERE.glob("bench_*.py") if not wanted or p.stem in wanted)
    failed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        start = time.perf_counter()
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
        print(f"   {time.perf_counter() - start:.0f} s", flush=True)
    tables = [section(p) for p in sorted(RESULTS.glob("*.json"))]
    header = f"# Benchmark results\n\nMeasured by `make bench` on {machine()}.\n\n"
    (RESULTS / "RESULTS.md").write_text(header + "\n".join(tables))
    print(f"wrote {RESULTS / 'RESULTS.md'}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
