"""Run every chapter's benchmark on the GPU and print achieved rates with their ratios to ceilings.

Usage (on a machine with a CUDA GPU):
    python bench/run_all.py                      # all topics
    python bench/run_all.py --only reduction     # one topic
    python bench/run_all.py --collect DIR        # also refresh reference data into DIR
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import sys
import time
import traceback
from pathlib import Path


from common import Context, report  # noqa: E402

from labhelpers.chapters import TOPICS  # noqa: E402  (one bench topic per chapter, in chapter order)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=None, help="topics to run")
    parser.add_argument("--collect", default=None, help="folder to write reference data into")
    parser.add_argument("--skip-bench", action="store_true", help="only collect reference data")
    args = parser.parse_args()

    # One identifier per collection run, stored in every reference file it writes (tools/device_collect.sh sets it
    # once for all its lanes).
    os.environ.setdefault("LABHELPERS_RUN_ID", datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    import labhelpers as lh

    if lh.is_simulator():
        print("error: benchmarks need a CUDA GPU (the simulator's timings mean nothing)", file=sys.stderr)
        return 2
    from labhelpers.notebook import configure_warnings

    configure_warnings()
    print(lh.banner())
    ctx = Context()
    rows, failed = [], []
    for topic in args.only or TOPICS:
        path = Path(__file__).parent / f"{topic}.py"
        if not path.exists():
            print(f"-- {topic}: no bench/{topic}.py yet, skipped")
            continue
        module = importlib.import_module(topic)
        try:
            if args.collect and hasattr(module, "collect"):
                t0 = time.time()
                module.collect(args.collect)
                print(f"-- {topic}: reference data collected in {time.time() - t0:.1f} s", flush=True)
            if not args.skip_bench and hasattr(module, "bench"):
                t0 = time.time()
                rows += module.bench(ctx)
                print(f"-- {topic}: bench ran in {time.time() - t0:.1f} s", flush=True)
        except Exception:
            failed.append(topic)
            traceback.print_exc()
    print()
    print(report(rows))
    if failed:
        print(f"\nFAILED topics: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
