"""`rlrun check` of the CartPole and Pendulum presets at their references' full budgets, as a user
runs it: 3 seeds each, the IQM of the final evaluation with its 95% interval beside the published
figure (issue #33). Writes bench/results/references.{json,md}.

    .venv/bin/python bench/bench_references.py [ppo dqn ...]     (default: ppo ppo_lstm dqn sac)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from common import BIN, RESULTS, machine

PRESETS = ("ppo", "ppo_lstm", "dqn", "sac")
SEEDS = 3


def check(preset: str, cwd: Path) -> dict:
    """``rlrun check +experiment=PRESET seeds=3``: its exit status, comparison line and time."""
    command = ["rlrun", "check", f"+experiment={preset}", f"seeds={SEEDS}",
               "trainer.progress_bar=false", "checkpoint.backend=none"]  # fmt: skip
    load = os.getloadavg()[0]  # wall seconds are speed figures only on an idle machine
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / "rlrun"), *command[1:]], cwd=cwd, capture_output=True,
                          text=True)  # fmt: skip
    wall = time.perf_counter() - start
    tail = proc.stdout[proc.stdout.rfind("rlrun check: outputs") :].splitlines()[1:]
    if not tail:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    finals = []
    for summary in sorted((cwd / "outputs" / "multirun").rglob("summary.json")):
        finals.append(json.loads(summary.read_text()).get("eval_return_last"))
    return {"command": " ".join(command), "exit_status": proc.returncode, "line": tail[0],
            "notes": tail[1:], "final_eval_returns": finals, "wall_s": round(wall),
            "load_average_at_start": round(load, 2),
            "date": date.today().isoformat()}  # fmt: skip


def main() -> int:
    presets = sys.argv[1:] or PRESETS
    results = {"machine": machine(), "checks": {}}
    for preset in presets:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"-- rlrun check +experiment={preset} seeds={SEEDS}", flush=True)
            results["checks"][preset] = found = check(preset, Path(tmp))
            print(f"   {found['line']} (exit {found['exit_status']}, {found['wall_s']} s)")
    path = RESULTS / "references.json"
    old = json.loads(path.read_text())["checks"] if path.exists() else {}
    results["checks"] = {**old, **results["checks"]}  # a subset run keeps the others' figures
    path.write_text(json.dumps(results, indent=1) + "\n")
    write_table(results)
    return 0


def write_table(results: dict) -> None:
    """bench/results/references.md: one row per preset, each with the date it was measured."""
    rows = [
        f"| `{r['command']}` | {r['line']} | {r['exit_status']} | {r['wall_s']} "
        f"| {r.get('load_average_at_start', 'not recorded')} | {r['date']} |"
        for r in results["checks"].values()
    ]
    (RESULTS / "references.md").write_text(
        "### Presets against their references (`bench/bench_references.py`)\n\n"
        f"Measured on {results['machine']}; the IQM of 3 seeds' final evaluation (5 "
        "deterministic episodes at the reference's frames), its 95% stratified bootstrap "
        "interval, and the published figure. Wall seconds are speed figures only at a load "
        "average near 0 at the start.\n\n"
        "| command | result | exit status | wall s | load average at start | date |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    sys.exit(main())
