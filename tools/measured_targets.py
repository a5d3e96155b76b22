"""Measure every measured lab exercise's own solution on this GPU, several times: where each target comes from.

    LABHELPERS_BACKEND=gpu PYTHONPATH=src python tools/measured_targets.py [--runs 3] [LAB ...]

For each measured exercise (the solutions and checker calls are the ones the tests use: ``MEASURED_SOLUTIONS`` of
``tests/test_lab_mutants_measured.py`` and ``MEASURED`` of ``tests/test_lab_mutants_bugs.py``), runs the lab's
checker on its solution ``--runs`` times and prints the ratio each run measured, their spread, and the target in
force. Targets come from these numbers (``labhelpers.exercises.timed.target_for``: the lowest ratio less the
margin of ``src/labhelpers/data/measured_targets.json``); ``--record`` writes this run's ratios there, on the reference
GPU only. Run it alone on the GPU: another process on the same GPU changes the ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import labhelpers as lh  # noqa: E402  (chooses the backend first)
from labhelpers import gpu_lock  # noqa: E402
from labhelpers.errors import CheckFailed  # noqa: E402
from labhelpers.exercises import timed  # noqa: E402


def _table() -> dict[str, tuple]:
    """lab -> (call the checker on the solution, the exercise), from the two test modules that own the calls."""
    import test_lab_mutants_bugs as bugs
    import test_lab_mutants_measured as meas

    table = {lab: ((lambda c=c, s=s, k=k: c(s, k)), meas.TARGETS[lab])
             for lab, (c, s, k, _m, _r) in meas.LABS.items() if lab in meas.TARGETS}
    table.update({lab: (c, ex) for lab, (c, ex, _m, _r) in bugs.MEASURED.items()})
    return dict(sorted(table.items(), key=lambda kv: int(kv[0])))


def measure(call, runs: int) -> list[float | str]:
    """The ratio each run measured (the verdict is recorded, not judged), or the failure's first words."""
    seen: list[float] = []
    judge = timed.verdict

    def record(ex, choice, student, yardstick):
        v = judge(ex, choice, student, yardstick)
        seen.append(v.ratio)
        return timed.Verdict(True, v.ratio, student, yardstick, v.text)

    timed.verdict = record
    out: list[float | str] = []
    try:
        for _ in range(runs):
            before = len(seen)
            try:
                with gpu_lock.shared():  # like a test: a measurement of another process waits for it
                    call()
            except CheckFailed as exc:
                out.append(str(exc)[:120])
                continue
            out.append(seen[-1] if len(seen) > before else "not timed here")
    finally:
        timed.verdict = judge
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", action="store_true",
                        help="write the ratios into the targets record (on the record's reference GPU only)")
    parser.add_argument("labs", nargs="*")
    args = parser.parse_args()
    if not timed.can_time():
        sys.exit("error: no GPU to time on (LABHELPERS_BACKEND=gpu on a machine with an NVIDIA GPU).")
    print(f"{lh.device_info().name}; {args.runs} runs of each measured exercise's solution; ratio = student / yardstick")
    print(f"{'lab':>4} {'target':>7} {'min':>6} {'max':>6} {'spread':>7}  runs")
    record = json.loads(timed.TARGETS_FILE.read_text())
    if args.record and lh.device_info().name != record["gpu"]:
        sys.exit(f"error: --record writes reference ratios, measured on {record['gpu']} (this is {lh.device_info().name})")
    for lab, (call, ex) in _table().items():
        if args.labs and lab not in args.labs:
            continue
        ratios = measure(call, args.runs)
        nums = [r for r in ratios if isinstance(r, float)]
        if nums and args.record:
            record["labs"][lab] = {"ratios": [round(r, 3) for r in nums], "date": datetime.date.today().isoformat(),
                                   "yardstick": ex.yardstick}
            timed.TARGETS_FILE.write_text(json.dumps(record, indent=2) + "\n")
        if nums:
            lo, hi = min(nums), max(nums)
            print(f"{lab:>4} {ex.target:>7g} {lo:>6.3f} {hi:>6.3f} {hi - lo:>7.3f}  "
                  + " ".join(f"{r:.3f}" if isinstance(r, float) else repr(r) for r in ratios), flush=True)
        else:
            print(f"{lab:>4} {ex.target:>7g}      -      -       -  {ratios[0]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
