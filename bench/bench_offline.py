"""Offline RL from rlrun's own datasets, as a user chains the commands (issue #32): train SAC
online (Pendulum-v1: +experiment=sac, 20k frames; a MuJoCo env: +experiment=sac_mujoco), record
an expert dataset (the policy as trained) and a medium one (Gaussian noise of 0.5 x half the
action range), train bc, iql, td3_bc and cql offline on each, then fine-tune the IQL run of the
medium dataset online (init_from). Scores are Minari's normalised ones: 0 is the random
policy's return, 1 the noise-free policy's (the datasets' ref_min_score and ref_max_score).
Writes bench/results/offline.{json,md} (Pendulum-v1) or offline_<env>.{json,md}.

    .venv/bin/python bench/bench_offline.py [steps]      (default 10000 optimisation steps;
                                                          cql gets a third: ~5 steps/s on CPU)
    .venv/bin/python bench/bench_offline.py 10000 env=inverted_pendulum sac_frames=30000 \
        algos=bc,iql,td3_bc                              (MuJoCo; the algorithms named)
    .venv/bin/python bench/bench_offline.py 10000 algos=cql cql_steps=3000
                                                         (cql alone, at its own step count)
    .venv/bin/python bench/bench_offline.py --table [env=...]   (the .md again from the .json)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

from common import BIN, RESULTS, machine, run_rlrun
from omegaconf import OmegaConf

ALGOS = ("bc", "iql", "td3_bc", "cql")
EPISODES = 50  # per dataset (10k transitions)
EVAL = 10  # evaluation episodes


def record(run_dir: Path, env: str, name: str, noise: float, cwd: Path) -> dict:
    """``rlrun record``; returns what it wrote (``<run>/datasets/<name>.json``)."""
    dataset_id = f"rlrun/{env.replace('_', '-')}/{name}-v0"
    command = [str(BIN / "rlrun"), "record", str(run_dir), f"episodes={EPISODES}",
               f"noise={noise}", f"id={dataset_id}"]  # fmt: skip
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads((run_dir / "datasets" / f"{dataset_id.replace('/', '_')}.json").read_text())


def score(ret: float, dataset: dict) -> float:
    low, high = dataset["ref_min_score"], dataset["ref_max_score"]
    return (ret - low) / (high - low)


def results(env: str, suffix: str) -> Path:
    return RESULTS / (f"offline.{suffix}" if env == "pendulum" else f"offline_{env}.{suffix}")


def write_table(out: dict) -> None:
    """bench/results/offline[_<env>].md from the figures of ``out`` (the .json)."""
    rows = [f"| {r['dataset']} | {r['algo']} | {r['steps']} | {r['eval_return']:.1f} | "
            f"{r['score']:.2f} | {r['dataset_score']:.2f} | {r['wall_s']} |"
            for r in out["runs"]]  # fmt: skip
    o = out["offline_to_online"]
    sac_eval = out["sac"]["eval_return_last"]
    sac_eval = "" if sac_eval is None else f", final evaluation {sac_eval:.1f}"
    lines = [
        f"# Offline RL on {out['env_id']} ({out['date']}, {out['machine']})", "",
        f"`.venv/bin/python bench/bench_offline.py {out['arguments']}`: SAC trained online "
        f"(`rlrun {out['sac']['command']}`, {out['sac']['frames']} frames{sac_eval}), "
        f"{EPISODES} episodes recorded without noise (expert) and with noise 0.5 (medium). "
        "Score: Minari's normalised score (0: random policy, 1: the noise-free policy), "
        f"final evaluation over {EVAL} episodes, one seed.", "",
        "| dataset | algo | optimisation steps | eval return | score | dataset's score | wall s |",
        "|---|---|---|---|---|---|---|", *rows, "",
        f"Offline to online: `{o['command']}`: {o['offline_eval_return']:.1f} "
        f"(score {o['offline_score']:.2f}) offline, {o['online_eval_return']:.1f} "
        f"(score {o['online_score']:.2f}) after {o['frames']} collected frames.",
    ]  # fmt: skip
    results(out["env"], "md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    args = sys.argv[1:]
    options = dict(a.split("=", 1) for a in args if "=" in a)
    env = options.get("env", "pendulum")
    if "--table" in args:  # the table again, from the .json
        write_table(json.loads(results(env, "json").read_text()))
        return 0
    steps = int(next((a for a in args if a.isdigit()), 10000))
    algos = options.get("algos", ",".join(ALGOS)).split(",")
    out = {"date": date.today().isoformat(), "machine": machine(), "steps": steps, "runs": [],
           "env": env, "arguments": " ".join(args)}  # fmt: skip
    if env == "pendulum":
        sac_args = ["+experiment=sac", "seed=0"]
    else:  # evaluated every 10k frames, for the record
        sac_args = ["+experiment=sac_mujoco", f"env={env}", "seed=0",
                    f"trainer.total_frames={options.get('sac_frames', 100000)}",
                    "eval.every_frames=10000", f"eval.episodes={EVAL}"]  # fmt: skip
    on_env = [] if env == "pendulum" else [f"env={env}"]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        os.environ["MINARI_DATASETS_PATH"] = str(cwd / "datasets")
        print(f"-- rlrun {' '.join(sac_args)}", flush=True)
        sac = run_rlrun(sac_args, cwd)
        out["env_id"] = OmegaConf.load(sac["run_dir"] / ".hydra" / "config.yaml").env.id
        out["sac"] = {"eval_return_last": sac["eval_return_last"], "frames": sac["frames"],
                      "command": " ".join(sac_args)}  # fmt: skip
        print(f"   {out['sac']}", flush=True)
        datasets = {
            "expert": record(sac["run_dir"], env, "expert", 0.0, cwd),
            "medium": record(sac["run_dir"], env, "medium", 0.5, cwd),
        }
        kept = ("id", "episodes", "noise", "return_mean", "ref_min_score", "ref_max_score")
        out["datasets"] = {k: {key: v[key] for key in kept} for k, v in datasets.items()}
        offline = {}
        for name, dataset in datasets.items():
            for algo in algos:
                n = steps // 3 if algo == "cql" else steps
                if algo == "cql" and "cql_steps" in options:
                    n = int(options["cql_steps"])
                args = [f"+experiment={algo}", *on_env, f"dataset={dataset['id']}",
                        f"trainer.total_frames={n}", f"eval.every_frames={n}",
                        f"eval.episodes={EVAL}"]  # fmt: skip
                print(f"-- rlrun {' '.join(args)}", flush=True)
                found = run_rlrun(args, cwd)
                offline[name, algo] = found
                ret = found["eval_return_last"]
                out["runs"].append({
                    "dataset": name, "algo": algo, "steps": n, "command": "rlrun " + " ".join(args),
                    "eval_return": ret, "score": score(ret, dataset),
                    "dataset_score": score(dataset["return_mean"], dataset),
                    "wall_s": round(found["process_s"]),
                })  # fmt: skip
                print(f"   {out['runs'][-1]}", flush=True)
        frames = 5000
        base = offline["medium", "iql"]
        args = ["+experiment=iql", *on_env, f"dataset={datasets['medium']['id']}", "collector=sync",
                f"init_from={base['run_dir']}", f"trainer.total_frames={frames}",
                "collector.frames_per_batch=200", f"eval.every_frames={frames}",
                f"eval.episodes={EVAL}"]  # fmt: skip
        print(f"-- rlrun {' '.join(args)}", flush=True)
        online = run_rlrun(args, cwd)
        out["offline_to_online"] = {
            "command": "rlrun " + " ".join(args).replace(
                str(base["run_dir"]), "<the iql run of the medium dataset>"), "frames": frames,
            "offline_eval_return": base["eval_return_last"],
            "online_eval_return": online["eval_return_last"],
            "offline_score": score(base["eval_return_last"], datasets["medium"]),
            "online_score": score(online["eval_return_last"], datasets["medium"]),
        }  # fmt: skip
        print(f"   {out['offline_to_online']}", flush=True)
    results(env, "json").write_text(json.dumps(out, indent=1) + "\n")
    write_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
