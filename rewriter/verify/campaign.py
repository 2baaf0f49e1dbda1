"""``rewriter verify``: fuzz every rule with hypothesis and check it keeps the numbers.

Per rule: draw instances (``instance.py``); run the real engine (``rewriter.optimize``,
the same code path users run) with a pack holding just that rule; where it rewrote, run
both models in onnxruntime on random inputs and compare every output.  A failure is
shrunk by hypothesis and saved as ``before.onnx``, ``after.onnx``, ``inputs.npz`` and
``report.txt``.  A rule that never applied is reported as unverified, with the reason the
draws failed: its constraints or the generator need attention, and it proves nothing.  A
rule the static checker refuses (``rewriter check``) fails without a draw.

Stratified: a rule's examples are shared among strata that force what a free draw rarely
reaches together (dynamic axes; hinted shapes, values and attributes varied; high ranks),
each a hypothesis campaign of its own.

Repeatable: each rule's campaign is seeded from ``--seed`` and the rule's name (the same
counterexample whichever worker runs it, whatever else is verified), and shrinking stops
after a number of attempts, not a time.  Bounded: a rule's campaign, drawing and shrinking
together, takes at most ``budget_seconds`` (a failure is reported within that; past it the
verdict says drawing stopped).  Rules run in parallel worker processes (``jobs``).
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import shutil
import sys
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np
import onnx
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ..dsl import Pack, load_pack_checked
from ..errors import RewriterError, RuleError
from ..expr.functions import registered_predicates
from ..onnx_facts.validity import check_model
from ..pipeline import optimize
from ..resources import bundled_pack_paths
from .arguments import check_arguments
from .artifacts import complete_report, describe, write_artifacts
from .compare import compare_outputs, empty_feeds, empty_result_problem, feeds_tolerance, random_feeds, run_model
from .diagnose import reason_key, summarize, why_not_applied
from .instance import STRATA, Instance, Reject, Stratum, draw_instance

DEFAULT_EXAMPLES = 50  # rewritten instances compared per rule
BUDGET_SECONDS = 30.0  # a rule's campaign, drawing and shrinking together, then it stops
SHRINK_ATTEMPTS = 150  # new instances tried while shrinking a failure, then the best is kept
DIAGNOSED_DRAWS = 12  # draws the engine left alone whose reason is looked for
REFUSED_REWRITES = 8  # draws the original refuses that are rewritten and run, per campaign (see _refused_run)
RUNNING = ".running"  # OUT/PACK/RULE/.running: the rewritten draw being run right now
CRASHED = "onnxruntime crashed the process running the rewritten model"
CRASHED_ORIGINAL = "onnxruntime crashed the process running a drawn instance itself (the original model, not a rewrite)"
CRASHED_EMPTY = "onnxruntime crashed the process running the rewritten model on empty inputs (dynamic dims 0)"
CRASHED_REFUSED = (
    "onnxruntime crashed the process running the rewritten model on inputs the original refuses with an error"
)
CRASHED_ORIGINAL_EMPTY = (
    "onnxruntime crashed the process running a drawn instance itself on empty inputs (dynamic dims 0): "
    "the original model, not a rewrite"
)
# what a rule verified again without the empty-input runs says (after the draw that crashed)
EMPTY_INPUTS_SKIPPED = (
    "empty inputs not compared: onnxruntime crashes running the original on them (its counterexample is kept)"
)


@dataclass
class RuleVerdict:
    pack: str
    rule: str
    draws: int = 0  # valid instances tried
    invalid: int = 0  # draws that did not make a valid model
    applied: int = 0  # instances the engine rewrote (and that were compared)
    near_misses: int = 0
    near_misses_refused: int = 0  # near misses the engine left alone
    max_abs: float = 0.0  # of the compared instances (of the counterexample on FAIL)
    max_rel: float = 0.0
    verdict: str = "ok"  # ok | FAIL | unverified
    message: str = ""
    artifacts: Path | None = None
    last_reject: str = ""
    seconds: float = 0.0
    stopped_early: bool = False  # the time budget ended the drawing
    shrink_cut: bool = False  # the time budget ended the shrinking (not repeatable then)


class RuleFault(BaseException):
    """The rule itself is at fault (its expressions exceed their budget): not a
    counterexample to shrink.  A BaseException, so hypothesis stops at once."""

    def __init__(self, error: RuleError) -> None:
        super().__init__(str(error))
        self.error = error


class _Barren(BaseException):
    """A stratum in which the rule has applied to none of many valid draws: the stratum
    ends there (a rule that never applies is reported without hypothesis's long search;
    a BaseException, so hypothesis stops at once)."""


BARREN_DRAWS = 3  # x a stratum's examples (+ 10): valid draws left alone before it ends


class VerificationFailure(Exception):
    """A rewrite changed the numbers (or broke the model); carries the report text."""


def verify_provider(rule, pack) -> str:
    """The provider an instance is placed on: CPU, unless the rule runs only elsewhere (a
    CUDA-only fusion is placed on CUDA, so the engine checks its kernels there; onnxruntime
    then runs both models on the CPU, which checks the numbers: placement is not part of
    the saved model)."""
    providers = rule.providers or pack.providers
    return "CPU" if not providers or "CPU" in providers else providers[0]


def _empty_inputs_problem(
    instance: Instance, after: onnx.ModelProto, running: Path, rule_name: str, reproduce: str
) -> str | None:
    """With dynamic axes, the draw once more with every symbolic dim 0, then with each alone
    (compare.empty_feeds): where the original gives an empty result, the rewritten model
    must give the same shapes, not fail; where the original refuses these inputs, the
    rewritten model may fail too or give anything, but never crash the process (a server
    would die where it reported an error).  A crash: the parent finds the draw that killed
    the process."""
    for empty in empty_feeds(instance.model, instance.input_shapes):
        # if onnxruntime kills the process running the original, the parent finds that
        # draw, and the instance's fault, not the rule's (no after.onnx beside it): it
        # verifies the rule again without these runs
        write_artifacts(
            running,
            instance.model,
            None,
            empty,
            describe(instance.model, empty, instance.draws, CRASHED_ORIGINAL_EMPTY, rule_name, reproduce, values=False),
        )
        try:
            expected: dict[str, np.ndarray] | None = run_model(instance.model, empty)
        except Exception:  # the original refuses these inputs itself: the rewrite may too
            expected = None
        write_artifacts(
            running,
            instance.model,
            after,
            empty,
            describe(instance.model, empty, instance.draws, CRASHED_EMPTY, rule_name, reproduce, values=False),
        )
        sizes = {name: list(value.shape) for name, value in empty.items()}
        if expected is None:
            try:
                run_model(after, empty)
            except Exception:  # an error where the original's was: fine; a crash is not
                pass
            continue
        try:
            got = run_model(after, empty)
        except Exception as error:
            reason = str(error).splitlines()[0][:200]
            return f"on empty inputs {sizes} the original gives an empty result, the rewritten model fails: {reason}"
        problem = empty_result_problem(expected, got)
        if problem is not None:
            return problem
    return None


def _rewritten(model: onnx.ModelProto, single: Pack, rule, pack: Pack):
    """The engine's run of ``single`` (the pack with the rule alone) on a drawn model, as
    users run it: the rule alone, whatever it costs in nodes (the layout budget is a run's)."""
    return optimize(
        model,
        level=pack.level,
        rules=[single],
        bundled=False,
        providers=verify_provider(rule, pack),
        layout_may_grow=True,
    )


def _refused_run(
    instance: Instance, feeds: dict[str, np.ndarray], single: Pack, rule, pack: Pack, running: Path, reproduce: str
) -> int:
    """A draw the original refuses with an error (a shape its Reshape cannot take, a mask
    of the wrong length): the rewritten model may refuse it too, or give anything, but it
    must not crash the process (a server would die where it reported an error; fused
    kernels check less than the ops they replace).  Run here, where the rule applies: a
    crash kills this process, and the parent finds this draw (``CRASHED_REFUSED``).
    Returns 1 where the rule rewrote the draw (the campaign runs a bounded number)."""
    try:
        result = _rewritten(instance.model, single, rule, pack)
    except Exception:  # the engine's own failures are the regular draws' business
        return 0
    if result.report.applied(rule.name) == 0:
        return 0
    write_artifacts(
        running,
        instance.model,
        result.model,
        feeds,
        describe(instance.model, feeds, instance.draws, CRASHED_REFUSED, rule.name, reproduce, values=False),
    )
    try:
        run_model(result.model, feeds)
    except Exception:  # an error where the original's was: fine
        pass
    return 1


def _fail_if(problem: str | None) -> None:
    # one raise site: hypothesis tells failures apart by where they are raised
    if problem is not None:
        raise VerificationFailure(problem)


class _Options(TypedDict):
    """``verify_rule``'s keyword arguments that every rule of a run shares."""

    examples: int
    seed: int
    out: Path | str
    shrink_attempts: int
    budget_seconds: float
    strata: tuple[str, ...] | None


def chosen_strata(names: Iterable[str] | None) -> tuple[Stratum, ...]:
    """The strata named (every one when None), in their campaign order; an unknown name is
    a one-line error."""
    if names is None:
        return STRATA
    wanted = list(names)
    known = ", ".join(s.name for s in STRATA)
    unknown = [n for n in wanted if n not in {s.name for s in STRATA}]
    if unknown:
        raise RewriterError(f"no verify stratum named '{unknown[0]}' (there are: {known})")
    if not wanted:
        raise RewriterError(f"verify()'s strata names none (there are: {known})")
    return tuple(s for s in STRATA if s.name in wanted)


def rule_seed(seed: int, pack: str, rule: str) -> int:
    """The seed of one rule's campaign: the same whichever worker runs it, and whatever
    other rules are verified (a stable hash, not Python's salted ``hash``)."""
    return zlib.crc32(f"{seed}:{pack}:{rule}".encode()) ^ seed


def verify_rule(
    pack: Pack,
    rule_name: str,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    out: Path | str = "verify-out",
    shrink_attempts: int = SHRINK_ATTEMPTS,
    budget_seconds: float = BUDGET_SECONDS,
    strata: tuple[str, ...] | None = None,
    empty_inputs: bool = True,
) -> RuleVerdict:
    """Fuzz one rule of a pack; see the module docstring.  ``strata``: the names of the
    strata to draw in (all by default), the examples shared among them by their shares.
    ``empty_inputs``: also run each rewritten draw with dynamic dims 0 (off where
    onnxruntime crashes running the original on them: nothing to compare with)."""
    _load_the_engine()  # (the draws must not depend on what else this process imported)
    began = time.monotonic()
    (rule,) = [r for r in pack.rules if r.name == rule_name]
    single = dataclasses.replace(pack, rules=(rule,), builtins=())
    verdict = RuleVerdict(pack.name, rule.name)
    artifacts = Path(out) / pack.name / rule.name
    running = artifacts / RUNNING
    # folders this campaign makes (for the draw being run): removed again unless they end
    # up holding a counterexample
    created = [d for d in (Path(out), Path(out) / pack.name, artifacts) if not d.exists()]
    failing: dict = {"seen": False, "attempts": 0}
    reasons: Counter = Counter()  # why valid draws were left alone (a sample of them)
    # outcome per (instance, inputs): shrinking revisits instances
    outcomes: dict[bytes, str | None] = {}
    reproduce = f"rewriter verify {pack.file} --rule {rule.name} --seed {seed} --examples {examples}"

    tally: Counter = Counter()  # per stratum: draws left alone, draws rewritten
    refused = {"left": REFUSED_REWRITES}  # draws the original refuses still to run rewritten

    def campaign(data, stratum: Stratum, quota: int) -> None:
        counting = not failing["seen"]
        if time.monotonic() - began > budget_seconds:
            verdict.stopped_early = counting
            verdict.shrink_cut = not counting
            reject()  # out of time: the remaining draws (or shrinks) are skipped, cheaply
        if not counting and failing["attempts"] >= shrink_attempts:
            reject()  # shrinking is bounded by attempts (repeatable), then by the budget
        try:
            instance = draw_instance(data, rule, stratum)
        except RuleError as error:
            raise RuleFault(error) from None
        except Reject as why:
            if counting:
                verdict.invalid += 1
                verdict.last_reject = str(why)
            reject()
        inputs_seed = data.draw(st.integers(0, 2**16), label="inputs seed")
        key = instance.model.SerializeToString() + inputs_seed.to_bytes(4, "little")
        if key in outcomes:
            _fail_if(outcomes[key])
            # a draw seen already (other choices, the same model) is no new example: the
            # budget of examples goes to distinct instances
            reject()
        if not counting:
            failing["attempts"] += 1
        try:
            ranges, shapes = instance.input_ranges, instance.input_shapes
            feeds = random_feeds(
                instance.model, inputs_seed, ranges=ranges, shapes=shapes, specials=instance.input_specials
            )
        except ValueError as why:  # a drawn shape no tensor can have (a varied hint gone below zero)
            if counting:
                verdict.invalid += 1
                verdict.last_reject = f"no inputs for the drawn shapes: {why}"
            reject()
        # if onnxruntime kills the process running the draw itself, the parent finds it
        write_artifacts(
            running,
            instance.model,
            None,
            feeds,
            describe(instance.model, feeds, instance.draws, CRASHED_ORIGINAL, rule.name, reproduce, values=False),
        )
        try:
            before_outputs = run_model(instance.model, feeds)
        except Exception as why:  # onnxruntime cannot run this draw (e.g. a missing kernel)
            if counting:
                verdict.invalid += 1
                verdict.last_reject = f"onnxruntime refused the instance: {str(why).splitlines()[0][:160]}"
                if refused["left"] > 0:
                    refused["left"] -= _refused_run(instance, feeds, single, rule, pack, running, reproduce)
            outcomes[key] = None
            reject()
        if counting:
            verdict.draws += 1
            verdict.near_misses += instance.near_miss is not None
        problem, after, outputs, errors = None, None, None, (0.0, 0.0)
        try:
            result = _rewritten(instance.model, single, rule, pack)
            after = result.model
            applied = result.report.applied(rule.name) > 0
            if not applied and sum(r.refused for r in result.report.rules) != 0:
                why_not = why_not_applied(instance.model, single.rules[0])
                if why_not.rule_fault:  # the engine saved this model; a dynamic one it could not
                    applied, after = True, None
                    problem = (
                        "the rule rewrites into something else: "
                        f"{why_not.removeprefix('the engine refused the match: ')} "
                        f"(the engine refused it here, where the shapes are known; with "
                        f"dynamic axes it could not)"
                    )
        except RuleError as error:
            raise RuleFault(error) from None
        except Exception as error:  # the engine itself failed on a valid model
            applied = True
            problem = f"the engine raised {error.__class__.__name__}: {error}"
            if not isinstance(error, RewriterError):
                problem += "\n" + traceback.format_exc()
        outcomes[key] = None
        if counting:
            tally[stratum.name, applied] += 1
        if not applied:
            if counting and not tally[stratum.name, True] and tally[stratum.name, False] >= BARREN_DRAWS * quota + 10:
                raise _Barren()
            if counting and instance.near_miss is not None:
                verdict.near_misses_refused += 1
            elif counting and sum(reasons.values()) < DIAGNOSED_DRAWS:
                reasons[reason_key(why_not_applied(instance.model, single.rules[0]))] += 1
            # a draw the rule does not rewrite verifies nothing: the budget of examples
            # counts rewritten instances (hypothesis allows many such draws per example)
            reject()
        if problem is None:
            try:
                assert after is not None  # (no problem: the engine ran and its model was kept)
                check_model(after, full_check=True)  # (onnxruntime's ONNX-domain ops known)
                # if onnxruntime kills the process running it, the parent finds this draw
                write_artifacts(
                    running,
                    instance.model,
                    after,
                    feeds,
                    describe(instance.model, feeds, instance.draws, CRASHED, rule.name, reproduce, values=False),
                )
                after_outputs = run_model(after, feeds)
            except Exception as error:
                problem = f"the rewritten model is invalid: {str(error).splitlines()[0]}"
            else:
                difference, worst_abs, worst_rel = compare_outputs(
                    before_outputs, after_outputs, rule.tolerance, feeds_tolerance(feeds), rule.integer_tolerance
                )
                errors = (worst_abs, worst_rel)
                if counting:
                    verdict.applied += 1
                    verdict.max_abs = max(verdict.max_abs, worst_abs)
                    verdict.max_rel = max(verdict.max_rel, worst_rel)
                if difference is not None:
                    problem = difference.message
                    outputs = {
                        name: (before_outputs[name], after_outputs.get(name))
                        for name in [difference.output]
                        if name in after_outputs
                    }
                elif empty_inputs:
                    problem = _empty_inputs_problem(instance, after, running, rule.name, reproduce)
        if problem is not None:
            failing["seen"] = True
            # each failure found while shrinking is smaller than the last: the last is kept
            failing.update(problem=problem, errors=errors)
            outcomes[key] = problem
            report = describe(instance.model, feeds, instance.draws, problem, rule.name, reproduce, outputs)
            write_artifacts(artifacts, instance.model, after, feeds, report)
            _fail_if(problem)

    running_strata = chosen_strata(strata)
    shares = sum(s.share for s in running_strata)
    for stratum in running_strata:  # each with its share of the examples
        if failing["seen"] or time.monotonic() - began > budget_seconds:
            break
        index = STRATA.index(stratum)  # (its seed is the same whichever others run)
        quota = max(1, round(examples * stratum.share / shares))
        run = given(st.data())(_for_stratum(campaign, stratum, quota))
        run = settings(
            max_examples=quota,
            database=None,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            print_blob=False,
            # no explain phase: it runs the test hundreds of times more after shrinking (18 of
            # the tutorial's 20 s) for a note we do not print, and each failure it meets would
            # be saved over the shrunk counterexample
            phases=[phase for phase in Phase if phase is not Phase.explain],
        )(run)
        run = hypothesis_seed(rule_seed(seed, pack.name, rule.name) + index)(run)
        try:
            run()
        except RuleFault as fault:
            _tidy(running, created)
            raise fault.error from None
        except VerificationFailure:
            break
        except _Barren:
            continue
        except Exception as error:  # hypothesis gave up (unsatisfiable, flaky replay...)
            if not failing["seen"]:
                verdict.last_reject = verdict.last_reject or f"{error.__class__.__name__}: {error}"
    verdict.seconds = time.monotonic() - began
    _tidy(running, created)
    if failing["seen"]:  # decided by what was seen, however hypothesis ended
        verdict.verdict = "FAIL"
        verdict.message = str(failing["problem"]).splitlines()[0]
        verdict.max_abs, verdict.max_rel = failing["errors"]
        verdict.artifacts = artifacts
    elif verdict.applied == 0:
        verdict.verdict = "unverified"
        if verdict.draws == 0:
            verdict.message = f"no valid instance could be drawn ({verdict.last_reject})"
        else:
            why = summarize(reasons, rule)
            verdict.message = f"never applied in {verdict.draws} draws" + (f": {why}" if why else "")
    if verdict.stopped_early:
        verdict.message = (
            verdict.message + "; " if verdict.message else ""
        ) + f"drawing stopped at the {budget_seconds:g} s budget after {verdict.draws} draws"
    if verdict.shrink_cut and verdict.verdict == "FAIL":
        verdict.message += (
            f" (shrinking stopped at the {budget_seconds:g} s budget: another run may keep another counterexample)"
        )
    return verdict


def _tidy(running: Path, created: list[Path]) -> None:
    """Remove the running draw's folder, and the folders made for it if nothing else is
    in them."""
    shutil.rmtree(running, ignore_errors=True)
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:  # not empty (a counterexample), or gone
            break


def _for_stratum(campaign: Callable, stratum: Stratum, quota: int) -> Callable:
    """``campaign`` for one stratum, as the plain function of one argument hypothesis's
    @given wants."""

    def test(data) -> None:
        campaign(data, stratum, quota)

    return test


def collect_packs(paths: Iterable[str | Path] | None) -> list[tuple[Pack, dict[str, list]]]:
    """Packs from files and directories (every ``*.rules`` inside); the bundled ones if none.
    Each with its rules' static problems (those rules fail without a draw)."""

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
    return [load_pack_checked(f) for f in files]


@dataclass
class VerifyReport:
    verdicts: list[RuleVerdict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[RuleVerdict]:
        return [v for v in self.verdicts if v.verdict == "FAIL"]

    @property
    def unverified(self) -> list[RuleVerdict]:
        return [v for v in self.verdicts if v.verdict == "unverified"]


def default_jobs() -> int:
    """Every core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def verify(
    paths: Iterable[str | Path] | None = None,
    rule: str | Iterable[str] | None = None,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    out: Path | str = "verify-out",
    on_rule: Callable[[RuleVerdict], None] | None = None,
    packs: Iterable[Pack] | None = None,
    jobs: int | None = None,
    budget_seconds: float = BUDGET_SECONDS,
    shrink_attempts: int = SHRINK_ATTEMPTS,
    strata: Iterable[str] | None = None,
    isolated: bool = False,
) -> VerifyReport:
    """Verify every rule of the given packs (or only the named ``rule``s); see the module
    docstring.  ``jobs``: worker processes (default: every core; 1 runs in this process, and
    so does every campaign while predicates registered from Python exist: a worker process
    would not have them).  ``isolated``: worker processes even for one job, so that
    onnxruntime killing the process running a draw fails that rule with the draw, not the
    whole campaign (the command line's choice; in this process is quicker to start).
    ``strata``: draw only in these (by name: ``free``, ``dynamic axes``, ``varied``,
    ``high ranks``); pytest's short campaign draws in two.
    Verdicts come back in the packs' rule order, whichever finished first."""
    check_arguments(paths, rule, examples, seed, out, jobs, strata, isolated)
    running = None if strata is None else tuple(s.name for s in chosen_strata(strata))
    began = time.monotonic()
    if packs is not None:
        chosen = [load_pack_checked(p) for p in packs]
    else:
        chosen = collect_packs(paths)
    wanted = None if rule is None else ([rule] if isinstance(rule, str) else list(rule))
    names = [(p, problems, r.name) for p, problems in chosen for r in p.rules if wanted is None or r.name in wanted]
    missing = [w for w in wanted or () if not any(name == w for _, _, name in names)]
    if missing:
        raise RewriterError(f"no rule named '{missing[0]}' in {', '.join(p.file for p, _ in chosen)}")
    options = _Options(
        examples=examples,
        seed=seed,
        out=out,
        shrink_attempts=shrink_attempts,
        budget_seconds=budget_seconds,
        strata=running,
    )
    report = VerifyReport([None] * len(names))  # type: ignore[list-item]
    tasks = []
    for index, (pack, problems, name) in enumerate(names):
        if name in problems:  # the checker refuses it: no campaign
            first = problems[name][0]
            verdict = RuleVerdict(pack.name, name, verdict="FAIL", message=f"rewriter check: {first}")
            report.verdicts[index] = verdict
            if on_rule is not None:
                on_rule(verdict)
        else:
            tasks.append((index, pack, name))
    # in this process (a crash of onnxruntime ends it): one job not isolated, or predicates
    # registered from Python (workers are new processes: they would not have them)
    if registered_predicates() or (jobs == 1 and not isolated):
        for index, pack, name in tasks:
            report.verdicts[index] = verify_rule(pack, name, **options)
            if on_rule is not None:
                on_rule(report.verdicts[index])
    else:
        _in_workers(tasks, min(jobs or default_jobs(), len(tasks)) or 1, options, report, on_rule)
    report.seconds = time.monotonic() - began
    return report


def _in_workers(
    tasks: list, workers: int, options: _Options, report: VerifyReport, on_rule: Callable[[RuleVerdict], None] | None
) -> None:
    """Verify ``tasks`` in worker processes.  A worker that dies (onnxruntime crashing on a
    rewritten model) breaks the pool: the rules that were running then (each left the draw
    it was on in its folder) are verified one by one, each in a process of its own, and
    the one that crashes again fails with the draw that crashed it as its counterexample;
    the rules not started go on in a new pool (before, every rule not finished ran alone:
    a rule whose original crashes onnxruntime made a whole campaign serial)."""

    def done(index: int, verdict: RuleVerdict) -> None:
        report.verdicts[index] = verdict
        if on_rule is not None:
            on_rule(verdict)

    context = multiprocessing.get_context("spawn")  # not forked: this process may hold
    loaded = tuple(sorted(n for n in sys.modules if n.split(".")[0] == "rewriter" and not n.endswith("__main__")))
    try:  # onnxruntime's thread pools
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_load_the_engine, initargs=(loaded,)
        ) as pool:
            futures = {pool.submit(verify_rule, pack, name, **options): index for index, pack, name in tasks}
            for future in as_completed(futures):
                done(futures[future], future.result())
    except BrokenProcessPool:
        pending = [task for task in tasks if report.verdicts[task[0]] is None]
        out = Path(options["out"])
        suspects = [task for task in pending if (out / task[1].name / task[2] / RUNNING).is_dir()]
        if not suspects:  # nothing tells them apart: every one alone
            suspects = pending
        for index, pack, name in suspects:
            done(index, _verify_alone(pack, name, options, context, loaded))
        rest = [task for task in pending if task not in suspects]
        if rest:
            _in_workers(rest, workers, options, report, on_rule)


def _verify_alone(pack: Pack, name: str, options: _Options, context, loaded: tuple[str, ...]) -> RuleVerdict:
    """One rule in a process of its own.  When onnxruntime kills it running a drawn
    instance on empty inputs (the original, not the rewrite: nothing to compare with), the
    rule is verified once more without the empty-input runs, and says so; the draw that
    crashed stays in its folder."""

    def attempt(empty_inputs: bool) -> RuleVerdict:
        try:
            with ProcessPoolExecutor(
                max_workers=1, mp_context=context, initializer=_load_the_engine, initargs=(loaded,)
            ) as alone:
                return alone.submit(verify_rule, pack, name, **options, empty_inputs=empty_inputs).result()
        except BrokenProcessPool:
            return _crashed(pack.name, name, Path(options["out"]))

    verdict = attempt(True)
    if verdict.message != CRASHED_ORIGINAL_EMPTY:
        return verdict
    again = attempt(False)
    again.message = "; ".join(m for m in (again.message, EMPTY_INPUTS_SKIPPED) if m)
    if again.artifacts is None:
        again.artifacts = verdict.artifacts
    return again


_ENGINE_LOADED = False


def _load_the_engine(also: tuple[str, ...] = ()) -> None:
    """Import every module of the package (``__main__`` aside), and ``also`` these.
    hypothesis draws with the constants it finds in every loaded module of a source checkout
    (its "local constants"), and the package imports its modules when first used: without
    this, what a process happened to import before — another command, earlier tests, a
    worker that imported less than its parent — would change the instances a seed draws.
    The command line is loaded too (by name: nothing here uses it), so that the API and
    ``rewriter verify`` draw alike.  Run by ``verify_rule`` and by each worker first
    (``also``: whatever else its parent has loaded of the package)."""
    global _ENGINE_LOADED
    if not _ENGINE_LOADED:
        import pkgutil

        package = importlib.import_module("rewriter")
        for found in pkgutil.walk_packages(package.__path__, "rewriter."):
            if found.name.rpartition(".")[2] != "__main__":
                importlib.import_module(found.name)
        _ENGINE_LOADED = True
    for name in also:
        importlib.import_module(name)


def _crashed(pack: str, rule: str, out: Path) -> RuleVerdict:
    """The verdict of a rule whose campaign killed its process: the draw being run then is
    its counterexample (kept in OUT/PACK/RULE/.running by ``verify_rule``)."""
    artifacts = out / pack / rule
    running = artifacts / RUNNING
    if not running.is_dir():
        return RuleVerdict(
            pack, rule, verdict="unverified", message="the campaign's process died before any rewritten draw ran"
        )
    rewritten = (running / "after.onnx").exists()  # else the drawn instance itself crashed
    report = running / "report.txt"
    said = report.read_text(errors="replace") if report.exists() else ""
    on_empty = CRASHED_ORIGINAL_EMPTY in said
    for item in running.iterdir():
        item.replace(artifacts / item.name)
    running.rmdir()
    complete_report(artifacts)
    if not rewritten:  # onnxruntime's fault (or the generator's), not the rule's
        message = CRASHED_ORIGINAL_EMPTY if on_empty else CRASHED_ORIGINAL
        return RuleVerdict(pack, rule, verdict="unverified", message=message, artifacts=artifacts)
    message = next((m for m in (CRASHED_REFUSED, CRASHED_EMPTY) if m in said), CRASHED)
    return RuleVerdict(pack, rule, verdict="FAIL", message=message, artifacts=artifacts)
