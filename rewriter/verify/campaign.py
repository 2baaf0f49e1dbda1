"""``rewriter verify``: fuzz every rule with hypothesis and check it keeps the numbers.

Per rule: draw instances (``instance.py``); run the real engine (``rewriter.optimize``,
the same code path users run) with a pack holding just that rule; where it rewrote, run
both models in onnxruntime on random inputs and compare every output.  A failure is
shrunk by hypothesis and saved as ``before.onnx``, ``after.onnx``, ``inputs.npz`` and
``report.txt``.  A rule that never applied is reported as unverified: its constraints or
the generator need attention, and it proves nothing.
"""
from __future__ import annotations

import dataclasses
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import onnx
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from ..dsl import Pack, load_pack
from ..errors import RewriterError, RuleError
from .arguments import check_arguments
from .compare import compare_outputs, feeds_tolerance, random_feeds, run_model
from .instance import Reject, draw_instance

DEFAULT_EXAMPLES = 100
SHRINK_SECONDS = 8.0  # time hypothesis may spend shrinking a failure to a smaller one


@dataclass
class RuleVerdict:
    pack: str
    rule: str
    draws: int = 0                 # valid instances tried
    invalid: int = 0               # draws that did not make a valid model
    applied: int = 0               # instances the engine rewrote (and that were compared)
    near_misses: int = 0
    near_misses_refused: int = 0   # near misses the engine left alone
    max_abs: float = 0.0
    max_rel: float = 0.0
    verdict: str = "ok"            # ok | FAIL | unverified
    message: str = ""
    artifacts: Path | None = None
    last_reject: str = ""


class RuleFault(BaseException):
    """The rule itself is at fault (its expressions exceed their budget): not a
    counterexample to shrink.  A BaseException, so hypothesis stops at once."""

    def __init__(self, error: RuleError) -> None:
        super().__init__(str(error))
        self.error = error


class VerificationFailure(Exception):
    """A rewrite changed the numbers (or broke the model); carries the report text."""


def _fail_if(problem: str | None) -> None:
    # one raise site: hypothesis tells failures apart by where they are raised
    if problem is not None:
        raise VerificationFailure(problem)


def _write_artifacts(directory: Path, before: onnx.ModelProto, after: onnx.ModelProto | None,
                     feeds: dict, report: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(before, str(directory / "before.onnx"))
    if after is not None:
        onnx.save(after, str(directory / "after.onnx"))
    elif (directory / "after.onnx").exists():
        (directory / "after.onnx").unlink()
    np.savez(directory / "inputs.npz", **feeds)
    (directory / "report.txt").write_text(report, encoding="utf-8")


def _describe(model: onnx.ModelProto, feeds: dict, draws: list[str], problem: str, rule: str,
              reproduce: str, outputs: dict | None = None) -> str:
    with np.printoptions(precision=6, threshold=64, edgeitems=4, suppress=True):
        lines = [f"rule {rule}: {problem}", "", "reproduce: " + reproduce, "", "instance:"]
        lines += [f"  {d}" for d in draws]
        lines += ["", "inputs:"]
        lines += [f"  {k} ({v.dtype}{list(v.shape)}) = {np.array2string(v)}" for k, v in feeds.items()]
        lines += ["", "constants:"]
        for t in model.graph.initializer:
            value = onnx.numpy_helper.to_array(t)
            lines.append(f"  {t.name} ({value.dtype}{list(value.shape)}) = {np.array2string(value)}")
        if outputs:
            lines += ["", "outputs (before -> after):"]
            for name, (a, b) in outputs.items():
                lines.append(f"  {name}:\n    before {np.array2string(a)}\n    after  {np.array2string(b)}")
    return "\n".join(lines) + "\n"


def verify_rule(pack: Pack, rule_name: str, examples: int = DEFAULT_EXAMPLES, seed: int = 0,
                out: Path | str = "verify-out", shrink_seconds: float = SHRINK_SECONDS) -> RuleVerdict:
    """Fuzz one rule of a pack; see the module docstring."""
    import rewriter

    (rule,) = [r for r in pack.rules if r.name == rule_name]
    single = dataclasses.replace(pack, rules=(rule,), builtins=())
    verdict = RuleVerdict(pack.name, rule.name)
    artifacts = Path(out) / pack.name / rule.name
    failing = {"seen": False, "since": 0.0}
    # outcome per (instance, inputs): shrinking revisits instances; past the shrink budget
    # an unseen instance counts as passing, so the smallest failure found so far is kept
    # (and replays deterministically)
    outcomes: dict[bytes, str | None] = {}
    reproduce = f"rewriter verify {pack.file} --rule {rule.name} --seed {seed} --examples {examples}"

    @hypothesis_seed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)
    @given(st.data())
    def campaign(data) -> None:
        counting = not failing["seen"]
        try:
            instance = draw_instance(data, rule)
        except RuleError as error:
            raise RuleFault(error) from None
        except Reject as why:
            if counting:
                verdict.invalid += 1
                verdict.last_reject = str(why)
            reject()
        inputs_seed = data.draw(st.integers(0, 2**16), label="inputs seed")
        key = instance.model.SerializeToString() + inputs_seed.to_bytes(4, "little")
        if key in outcomes or (failing["seen"] and time.monotonic() - failing["since"] > shrink_seconds):
            _fail_if(outcomes.setdefault(key, None))
            return
        feeds = random_feeds(instance.model, inputs_seed)
        try:
            before_outputs = run_model(instance.model, feeds)
        except Exception as why:  # onnxruntime cannot run this draw (e.g. a missing kernel)
            if counting:
                verdict.invalid += 1
                verdict.last_reject = f"onnxruntime refused the instance: {str(why).splitlines()[0][:160]}"
            reject()
        if counting:
            verdict.draws += 1
            verdict.near_misses += instance.near_miss is not None
        problem, after, outputs = None, None, None
        try:
            result = rewriter.optimize(instance.model, level=pack.level, rules=[single], bundled=False,
                                       providers="CPU")
            after = result.model
            applied = result.report.applied(rule.name) > 0
        except RuleError as error:
            raise RuleFault(error) from None
        except Exception as error:  # the engine itself failed on a valid model
            applied = True
            problem = f"the engine raised {error.__class__.__name__}: {error}"
            if not isinstance(error, RewriterError):
                problem += "\n" + traceback.format_exc()
        outcomes[key] = None
        if not applied:
            if counting and instance.near_miss is not None:
                verdict.near_misses_refused += 1
            return
        if problem is None:
            try:
                onnx.checker.check_model(after, full_check=True)
                after_outputs = run_model(after, feeds)
            except Exception as error:
                problem = f"the rewritten model is invalid: {str(error).splitlines()[0]}"
            else:
                difference, worst_abs, worst_rel = compare_outputs(
                    before_outputs, after_outputs, rule.tolerance, feeds_tolerance(feeds))
                if counting:
                    verdict.applied += 1
                    verdict.max_abs = max(verdict.max_abs, worst_abs)
                    verdict.max_rel = max(verdict.max_rel, worst_rel)
                if difference is not None:
                    problem = difference.message
                    outputs = {name: (before_outputs[name], after_outputs.get(name))
                               for name in [difference.output] if name in after_outputs}
        if problem is not None:
            if not failing["seen"]:
                failing.update(seen=True, since=time.monotonic())
            failing["problem"] = problem  # the last failure written is the shrunk one
            outcomes[key] = problem
            report = _describe(instance.model, feeds, instance.draws, problem, rule.name, reproduce, outputs)
            _write_artifacts(artifacts, instance.model, after, feeds, report)
            _fail_if(problem)

    try:
        campaign()
    except RuleFault as fault:
        raise fault.error from None
    except VerificationFailure as failure:
        verdict.verdict = "FAIL"
        verdict.message = str(failing.get("problem") or failure).splitlines()[0]
        verdict.artifacts = artifacts
        return verdict
    except Unsatisfiable:
        verdict.verdict = "unverified"
        verdict.message = f"no valid instance could be drawn ({verdict.last_reject})"
        return verdict
    if verdict.applied == 0:
        verdict.verdict = "unverified"
        verdict.message = (f"never applied in {verdict.draws} draws" +
                           (f"; last invalid draw: {verdict.last_reject}" if verdict.last_reject else ""))
    return verdict


def collect_packs(paths: Iterable[str | Path] | None) -> list[Pack]:
    """Packs from files and directories (every ``*.rules`` inside); the bundled ones if none."""
    from ..resources import bundled_pack_paths

    files: list[Path] = []
    for item in paths or ():
        path = Path(item)
        if path.is_dir():
            files.extend(sorted(path.glob("*.rules")))
        else:
            files.append(path)
    if not paths:
        files = bundled_pack_paths()
    if not files:
        raise RewriterError(f"no .rules files in {', '.join(map(str, paths or []))}")
    return [load_pack(f) for f in files]


@dataclass
class VerifyReport:
    verdicts: list[RuleVerdict] = field(default_factory=list)

    @property
    def failed(self) -> list[RuleVerdict]:
        return [v for v in self.verdicts if v.verdict == "FAIL"]

    @property
    def unverified(self) -> list[RuleVerdict]:
        return [v for v in self.verdicts if v.verdict == "unverified"]


def verify(paths: Iterable[str | Path] | None = None, rule: str | None = None,
           examples: int = DEFAULT_EXAMPLES, seed: int = 0, out: Path | str = "verify-out",
           on_rule: Callable[[RuleVerdict], None] | None = None,
           packs: Iterable[Pack] | None = None, shrink_seconds: float = SHRINK_SECONDS) -> VerifyReport:
    """Verify every rule of the given packs (or only ``rule``); see the module docstring."""
    check_arguments(paths, rule, examples, seed, out)
    chosen = list(packs) if packs is not None else collect_packs(paths)
    report = VerifyReport()
    names = [(p, r.name) for p in chosen for r in p.rules if rule is None or r.name == rule]
    if rule is not None and not names:
        raise RewriterError(f"no rule named '{rule}' in {', '.join(p.file for p in chosen)}")
    for pack, name in names:
        verdict = verify_rule(pack, name, examples=examples, seed=seed, out=out,
                              shrink_seconds=shrink_seconds)
        report.verdicts.append(verdict)
        if on_rule is not None:
            on_rule(verdict)
    return report
