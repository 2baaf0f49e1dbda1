"""Start-up cost of the command line: how long a short run takes and whose time it is.

    python bench/startup.py                          # the commands below, 5 fresh processes each
    python bench/startup.py --repeat 9 --model examples/convnet_bn.onnx
    PYTHONPATH=/path/to/other/checkout python bench/startup.py   # measure another tree

For each command (``--version``, ``--help``, ``rules``, ``check`` of a bundled pack,
``optimize`` of the example model at ``basic`` and ``all``), in fresh processes:

* ``wall``: the whole process, as a shell's ``time`` sees it (median);
* ``python``: an interpreter that does nothing (``python -c pass``), the floor under all;
* ``third-party``: importing, up front, every module outside ``rewriter`` that the command
  ends up importing (found by a first run; numpy, onnx, onnxruntime, networkx, click,
  rich, lark, hypothesis... whichever it needs);
* ``ours``: the rest of the run with those already imported: importing ``rewriter``'s own
  modules and running the command — the project's own time (``ours CPU``: the process's
  CPU time for the same, less sensitive to other work on the machine).

``optimize`` is measured with the pack cache cold (``REWRITER_CACHE=0``) and warm (a
cache directory filled by one run first; see README.md, "Cache").  This 2-core machine's
speed drifts, so only medians of interleaved runs are compared.  Python must be able to
read compiled bytecode for a fair number: run ``python -m compileall -q rewriter`` first
when ``PYTHONDONTWRITEBYTECODE`` is set (otherwise every run compiles our modules anew).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run inside the measured process: import the given third-party modules, then run the
# command line; report both durations on a pipe (stdout and stderr belong to the command).
_RUNNER = r"""
import importlib, json, os, sys, time
modules, argv, mode, fd = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
start, start_cpu = time.perf_counter(), time.process_time()
for name in modules:
    try:
        importlib.import_module(name)
    except Exception:
        pass
middle, middle_cpu = time.perf_counter(), time.process_time()
sys.argv = ["rewriter", *argv]
from rewriter.cli import main
try:
    main()
except SystemExit:
    pass
end, end_cpu = time.perf_counter(), time.process_time()
if mode == "modules":
    result = [m for m in sys.modules if m != "rewriter" and not m.startswith("rewriter.") and m != "__main__"]
else:
    result = [middle - start, end - middle, end_cpu - middle_cpu]
with os.fdopen(fd, "w") as report:
    json.dump(result, report)
"""


def run_once(argv: list[str], modules: list[str], mode: str, env: dict[str, str]) -> object:
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, json.dumps(modules), json.dumps(argv), mode, str(write)],
        cwd=tempfile.gettempdir(),  # (not the checkout: PYTHONPATH may name another tree to measure)
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write,),
    )
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    proc.wait()
    return json.loads(data)


def wall(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        command, cwd=tempfile.gettempdir(), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--model", default=str(ROOT / "examples" / "convnet_bn.onnx"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rewriter-startup-") as folder:  # (the cache and outputs)
        measure(args.repeat, args.model, Path(folder))


def measure(repeat: int, model: str, out: Path) -> None:
    cache = out / "cache"
    base = dict(os.environ)
    cold = {**base, "REWRITER_CACHE": "0"}
    warm = {**base, "REWRITER_CACHE_DIR": str(cache)}
    optimize = ["optimize", model, "-o", str(out / "o.onnx"), "-q"]
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("--version", ["--version"], warm),
        ("--help", ["--help"], warm),
        ("rules", ["rules"], warm),
        ("check rules/basic.rules", ["check", str(ROOT / "rules" / "basic.rules")], warm),
        ("optimize --level basic, cold cache", [*optimize, "--level", "basic"], cold),
        ("optimize --level basic, warm cache", [*optimize, "--level", "basic"], warm),
        ("optimize --level all, cold cache", [*optimize, "--level", "all"], cold),
        ("optimize --level all, warm cache", [*optimize, "--level", "all"], warm),
    ]
    run_once([*optimize, "--level", "all"], [], "time", warm)  # fill the cache
    modules = {name: run_once(argv, [], "modules", env) for name, argv, env in cases}
    samples: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name, _, _ in cases}
    floor: list[float] = []
    executable = str(Path(sys.executable).with_name("rewriter"))
    for _ in range(repeat):  # interleaved rounds: drift hits every command alike
        floor.append(wall([sys.executable, "-c", "pass"], base))
        for name, argv, env in cases:
            third, ours, ours_cpu = run_once(argv, modules[name], "time", env)  # type: ignore[misc]
            samples[name].append((wall([executable, *argv], env), third, ours, ours_cpu))
    print(f"python -c pass: {statistics.median(floor) * 1000:.0f} ms (median of {repeat})")
    print(f"{'command':40} {'wall':>8} {'third-party':>12} {'ours':>8} {'ours CPU':>9}")
    for name, rows in samples.items():
        w, t, o, c = (statistics.median(column) * 1000 for column in zip(*rows))
        print(f"{name:40} {w:6.0f} ms {t:9.0f} ms {o:6.0f} ms {c:6.0f} ms")


if __name__ == "__main__":
    main()
