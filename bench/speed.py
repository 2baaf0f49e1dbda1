"""Speed and memory of rewriter against its peers, measured in one run on the same models.

    python bench/speed.py                         # test models + synthetic 1k/10k graphs
    python bench/speed.py model.onnx --level extended --repeat 5 --sizes 1000 10000 100000

Per model: our ``optimize`` (median of --repeat runs on the in-memory model; loading and
saving excluded and reported separately), ONNX Runtime's optimizer (session creation at
the level minus session creation with all optimizations off), and — when installed —
onnxscript's ``optimize_for_ort`` and onnxruntime.transformers' ``optimize_model`` (each
in a worker process of its own, so their imports stay out of ours), all sampled in
interleaved rounds.  Prints times (medians), ratios ours/peer, our peak Python
memory (tracemalloc) and our per-phase split (medians of the same runs).  Install the
optional peers with ``pip install onnxscript`` (transformers' optimizer ships with onnxruntime
but needs ``sympy`` and ``packaging``).
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import onnx
import onnxruntime as ort

import rewriter

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from synthetic import synthetic_model  # noqa: E402

ORT_LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def ort_runs(model_bytes: bytes, level: str):
    """(optimizing session, plain session) factories: ONNX Runtime's optimizer time is the
    difference of their creation times."""

    def session(opt_level):
        options = ort.SessionOptions()
        options.graph_optimization_level = opt_level
        options.log_severity_level = 4
        return lambda: ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])

    return session(ORT_LEVELS[level]), session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)


def onnxscript_run(path: Path):
    try:
        from onnxscript import ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort
    except Exception:
        return None
    model = onnx.load(str(path))

    def run():
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            optimize_for_ort(ir.serde.deserialize_model(model))

    return _working(run)


def transformers_run(path: Path):
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except Exception:
        return None

    def run():
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            optimize_model(str(path), model_type="bert", opt_level=0)

    return _working(run)


PEERS = {"onnxscript": onnxscript_run, "transformers": transformers_run}


def _working(run):
    """``run`` if it works on this model (a peer may refuse it), else None."""
    try:
        run()
    except Exception:
        return None
    return run


class PeerProcess:
    """A Python peer in a process of its own (``speed.py --worker PEER MODEL``), so that
    its imports (torch, onnxscript's IR...) do not share our interpreter, allocator and
    garbage collector while we are timed; it times one run per request."""

    def __init__(self, peer: str, path: Path) -> None:
        self.name = peer
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", peer, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.works = self.process.stdout.readline().strip() == "ready"

    def __call__(self) -> float:
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def worker(peer: str, path: str) -> int:
    run = PEERS[peer](Path(path))  # (one warm run inside)
    print("ready" if run is not None else "unavailable", flush=True)
    for _ in sys.stdin:
        print(seconds(run), flush=True)
    return 0


def measure(name: str, model: onnx.ModelProto, level: str, repeat: int, peers: bool) -> dict:
    """Time every contender in interleaved rounds (the peers, then ours, ORT optimized and
    ORT plain, then again): this machine's speed drifts by up to 1.5x within minutes, and
    interleaving lets each ratio compare runs made under the same conditions.  A Python
    peer keeps a core busy for seconds in another process, which leaves the caches cold
    for whoever runs next (7% of our time when that was always us), so each in-process
    contender runs once untimed right before its timed run, all of them alike."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        start = time.perf_counter()
        onnx.save(model, str(path))
        save_s = time.perf_counter() - start
        start = time.perf_counter()
        model = onnx.load(str(path))
        load_s = time.perf_counter() - start
        result = rewriter.optimize(model, level=level)  # warm: rules parsed once per process
        ort_opt, ort_plain = ort_runs(model.SerializeToString(), level)
        # (ours includes assembling the optimized ModelProto, as ONNX Runtime's includes its graph)
        contenders = {
            "ours": lambda: rewriter.optimize(model, level=level).model,
            "ort_opt": ort_opt,
            "ort_plain": ort_plain,
        }
        workers = [PeerProcess(peer, path) for peer in PEERS] if peers else []
        for peer in workers:
            if peer.works:
                contenders[peer.name] = peer
        samples: dict[str, list[float]] = {k: [] for k in contenders}
        phase_samples: list[dict[str, float]] = []
        order = sorted(samples, key=lambda k: not isinstance(contenders[k], PeerProcess))
        for _ in range(repeat):
            for key in order:
                if isinstance(contenders[key], PeerProcess):
                    samples[key].append(contenders[key]())
                    continue
                contenders[key]()  # untimed: warm caches, as every in-process contender gets
                if key == "ours":  # its phases come from the same runs
                    start = time.perf_counter()
                    result = rewriter.optimize(model, level=level)
                    _ = result.model  # the model is built lazily: time building it too
                    samples[key].append(time.perf_counter() - start)
                    phase_samples.append(result.report.seconds)
                else:
                    samples[key].append(seconds(contenders[key]))
        for peer in workers:
            peer.close()
        median = {k: statistics.median(v) for k, v in samples.items()}
        tracemalloc.start()
        _ = rewriter.optimize(model, level=level).model
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        phases = {k: statistics.median(p[k] for p in phase_samples) for k in phase_samples[0]}
        row = {
            "model": name,
            "nodes": len(model.graph.node),
            "after": result.report.nodes_after,
            "ours": median["ours"],
            "load": load_s,
            "save": save_s,
            "peak_mb": peak / 2**20,
            "phases": phases,
            "ort": max(median["ort_opt"] - median["ort_plain"], 1e-6),
            "onnxscript": median.get("onnxscript"),
            "transformers": median.get("transformers"),
        }
    return row


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--level", default="extended", choices=sorted(ORT_LEVELS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000], help="synthetic graph sizes (nodes)")
    parser.add_argument("--no-peers", action="store_true", help="skip the Python peers")
    args = parser.parse_args()
    paths = args.models or sorted((HERE.parent / "tests" / "models").glob("*.onnx"))
    cases = [(p.name, onnx.load(str(p))) for p in paths]
    cases += [(f"synthetic-{n}", synthetic_model(n)) for n in args.sizes]

    def ratio(ours: float, peer: float | None) -> str:
        return "-" if peer is None else f"{ours / peer:.2f}"

    header = (
        f"{'model':24} {'nodes':>6} {'after':>6} {'ours ms':>8} {'us/node':>8} {'ORT ms':>8} {'/ORT':>6} "
        f"{'oscript ms':>10} {'/osc':>6} {'transf ms':>9} {'/tr':>6} {'peak MB':>8} {'load ms':>8} {'save ms':>8}"
    )
    print(header)
    rows = []
    for name, model in cases:
        row = measure(name, model, args.level, args.repeat, not args.no_peers)
        rows.append(row)
        fmt = lambda v: "-" if v is None else f"{v * 1000:.1f}"
        print(
            f"{row['model']:24} {row['nodes']:6} {row['after']:6} {row['ours'] * 1000:8.1f} "
            f"{row['ours'] / max(row['nodes'], 1) * 1e6:8.0f} {fmt(row['ort']):>8} {ratio(row['ours'], row['ort']):>6} "
            f"{fmt(row['onnxscript']):>10} {ratio(row['ours'], row['onnxscript']):>6} "
            f"{fmt(row['transformers']):>9} {ratio(row['ours'], row['transformers']):>6} "
            f"{row['peak_mb']:8.1f} {row['load'] * 1000:8.1f} {row['save'] * 1000:8.1f}",
            flush=True,
        )
    print("\nper-phase split of our time (ms):")
    for row in rows:
        phases = ", ".join(f"{k} {v * 1000:.1f}" for k, v in row["phases"].items())
        print(f"  {row['model']:24} {phases}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
