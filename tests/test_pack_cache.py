"""The pack cache (README.md, "Cache"): a second load reads the disk instead of parsing, a
changed pack or a changed dependency misses, damaged or crafted entries are ignored, many
writers at once leave a whole entry, an unusable directory changes nothing, and the rules
and optimized models are the same with and without it.  No test here times anything:
``pack_cache.counts`` and the entries on disk tell what happened."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import MODELS

import rewriter
from rewriter.disk_cache import CACHE_DIR_VARIABLE, CACHE_SWITCH_VARIABLE, ENTRY_SUFFIX, DiskCache
from rewriter.dsl import declared_level, forget_loaded, load_pack, pack_cache, pack_level, serial, wellformed
from rewriter.dsl import parse as parse_module
from rewriter.errors import RewriterError, RuleError
from rewriter.expr.functions import FUNCTIONS, Function
from rewriter.resources import bundled_pack_paths
from rewriter.text_files import read_text

ROOT = Path(__file__).resolve().parent.parent
SMALL_PACK = """pack mine level 1

# Identity(x) is x
rule IdentityElimination { y = Identity(x) => y = x }

rule DoubleNeg root b {
    a = Neg(x)
    b = Neg(a)
  where single_use(a)
  =>
    b = x
}
"""


def entries(directory: Path) -> list[Path]:
    packs = directory / "packs"
    return sorted(packs.glob("*" + ENTRY_SUFFIX)) if packs.is_dir() else []


def fresh_load(path: Path):
    """``load_pack`` as a new process would do it: nothing remembered in memory."""
    forget_loaded()
    return load_pack(path)


def counted(path: Path) -> tuple[object, dict[str, int]]:
    before = dict(pack_cache.counts)
    pack = fresh_load(path)
    return pack, {k: v - before.get(k, 0) for k, v in pack_cache.counts.items() if v != before.get(k, 0)}


def no_parsing(monkeypatch) -> None:
    """From here on a parse fails the test: a load must come from the cache."""

    def refuse(*args, **kwargs):
        raise AssertionError("the pack was parsed, not read from the cache")

    monkeypatch.setattr(parse_module, "parse_pack", refuse)


def encoded(pack) -> str:
    return json.dumps(serial.encode(pack))


# ------------------------------------------------------------------ used and invalidated


def test_a_second_load_reads_the_cache_and_parses_nothing(cache_dir, tmp_path, monkeypatch):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    first, happened = counted(path)
    assert happened == {"miss": 1, "stored": 1}
    assert len(entries(cache_dir)) == 1
    no_parsing(monkeypatch)
    second, happened = counted(path)
    assert happened == {"hit": 1}
    assert second == first and encoded(second) == encoded(first)


def test_one_changed_character_misses_and_the_new_text_is_used(cache_dir, tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    fresh_load(path)
    path.write_text(SMALL_PACK.replace("DoubleNeg", "DoubleNeG"))
    pack, happened = counted(path)
    assert happened == {"miss": 1, "stored": 1}
    assert [r.name for r in pack.rules] == ["IdentityElimination", "DoubleNeG"]
    path.write_text(SMALL_PACK.replace("# Identity(x) is x", "# Identity(x) is y"))  # a comment counts too
    _, happened = counted(path)
    assert happened == {"miss": 1, "stored": 1}
    assert len(entries(cache_dir)) == 3


def test_the_same_text_under_another_name_is_another_entry(cache_dir, tmp_path):
    """Positions and errors name the file: an entry is for one file name."""
    (tmp_path / "a.rules").write_text(SMALL_PACK)
    (tmp_path / "b.rules").write_text(SMALL_PACK)
    a, b = fresh_load(tmp_path / "a.rules"), fresh_load(tmp_path / "b.rules")
    assert a.rules[0].file.endswith("a.rules") and b.rules[0].file.endswith("b.rules")
    assert len(entries(cache_dir)) == 2


def test_what_the_checker_depends_on_is_in_the_key(cache_dir, tmp_path, monkeypatch):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    text = read_text(path)
    key = pack_cache.cache_key(text, str(path))
    assert '"onnx"' in key and '"onnxruntime"' in key and rewriter.__version__ in key
    # another onnxruntime (its contrib schemas), another parser or checker source
    monkeypatch.setattr(pack_cache, "_library_versions", lambda: (("onnxruntime", "0.0.0"),))
    assert pack_cache.cache_key(text, str(path)) != key
    monkeypatch.undo()
    monkeypatch.setattr(pack_cache, "_code_fingerprint", lambda: "an edited parser")
    assert pack_cache.cache_key(text, str(path)) != key
    monkeypatch.undo()
    # a pack may call a predicate registered from Python: it checks only with it
    monkeypatch.setitem(FUNCTIONS, "my_predicate", Function("my_predicate", lambda g, x: True, 1, 1, True, ""))
    assert pack_cache.cache_key(text, str(path)) != key


def test_a_pack_with_errors_is_not_stored(cache_dir, tmp_path):
    path = tmp_path / "bad.rules"
    path.write_text("pack bad level 1\nrule R { y = NoSuchOp(x) => y = x }\n")
    for _ in range(2):
        with pytest.raises(RuleError, match="NoSuchOp"):
            fresh_load(path)
    assert entries(cache_dir) == []


def test_off_by_environment_and_by_option(tmp_path, monkeypatch, cache_dir):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    monkeypatch.setenv(CACHE_SWITCH_VARIABLE, "0")
    fresh_load(path)
    assert not cache_dir.exists()
    monkeypatch.delenv(CACHE_SWITCH_VARIABLE)
    out = tmp_path / "out.onnx"
    proc = subprocess.run(
        [sys.executable, "-m", "rewriter", "optimize", str(MODELS / "convnet_bn.onnx"), "-o", str(out), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert not cache_dir.exists()


# ------------------------------------------------------------------ damaged and crafted


def _corruptions(entry: bytes, key: str, put):
    """(what, bytes of the entry file, whether the file is whole) for each way an entry can
    be wrong; ``put`` makes a whole entry (header, checksum) around a crafted payload."""
    header, _, payload = entry.partition(b"\n")
    yield "empty", b"", False
    yield "truncated", entry[: len(entry) // 2], False
    yield "one byte changed", entry[:-10] + bytes([entry[-10] ^ 1]) + entry[-9:], False
    yield "no header", payload, False
    yield "garbage", os.urandom(2000), False
    yield "header of another key", header.replace(b'\\"text\\"', b'\\"texT\\"') + b"\n" + payload, False
    data = json.loads(payload)
    crafted = {
        "not JSON": b"{not json",
        "a class the language does not have": json.dumps(["OpInfo", *data[1:]]).encode(),
        "a field of the wrong type": json.dumps([data[0], 7, *data[2:]]).encode(),
        "a list one field short": json.dumps(data[:-1]).encode(),
        "a record where a tuple belongs": json.dumps([*data[:6], ["Name", "x", [1, 1]], *data[7:]]).encode(),
        "nested past the stack": b"[" * 100_000 + b"]" * 100_000,
        "the pack of another file": json.dumps([*data[:7], "elsewhere.rules", *data[8:]]).encode(),
        "a number too big for JSON": json.dumps(data).encode().replace(b'"mine"', b"1" * 5000, 1),
    }
    crafted |= {what: json.dumps(_reshaped(data, change)).encode() for what, change in _SEMANTIC.items()}
    for what, bad in crafted.items():
        yield what, put(bad), True


def _reshaped(data: list, change) -> list:
    """A copy of a pack's JSON (``SMALL_PACK``'s) with ``change`` applied to it."""
    copy = json.loads(json.dumps(data))
    change(copy)
    return copy


_AT = [1, 1]  # a position


def _rule(data: list) -> list:
    """SMALL_PACK's second rule, DoubleNeg: [Rule, name, root, equations, wheres, lets, replacement, ...]."""
    return data[6][1]


def _where(data: list, expr: list) -> None:
    _rule(data)[4][0][1] = expr


# Well-typed JSON that no parse makes: each crashed the engine when read from the cache (the
# matcher indexing a root no equation produces, the evaluator an operator it has no table
# entry for, the rewriter unpacking a replacement's first output...)
_SEMANTIC = {
    "a root no equation produces": lambda d: _rule(d).__setitem__(2, "nope"),
    "a pattern node without ops": lambda d: _rule(d)[3][0].__setitem__(2, []),
    "a pattern in two pieces": lambda d: _rule(d)[3][1][2][0][3][0].__setitem__(1, "elsewhere"),
    "a replacement without outputs": lambda d: _rule(d)[6][0].__setitem__(1, []),
    "a comparison the grammar lacks": lambda d: _where(d, ["Compare", ["<>"], [["Num", 1, _AT], ["Num", 2, _AT]], _AT]),
    "a comparison missing an operand": lambda d: _where(d, ["Compare", ["<"], [["Num", 1, _AT]], _AT]),
    "a boolean operator the grammar lacks": lambda d: _where(d, ["BoolOp", "xor", [["Num", 1, _AT]] * 2, _AT]),
    "a slice outside an index": lambda d: _where(d, ["Slice", None, ["Num", 2, _AT], _AT]),
    "an op call in a where": lambda d: _where(d, ["Call", "Relu", [["Name", "a", _AT]], None, _AT]),
    "an unknown builtin": lambda d: d.__setitem__(5, ["rm_rf"]),
    "a level no pipeline has": lambda d: d.__setitem__(2, 99),
}


def test_damaged_or_crafted_entries_are_ignored_and_the_pack_parsed(cache_dir, tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    good = fresh_load(path)
    (entry,) = entries(cache_dir)
    original = entry.read_bytes()
    key = pack_cache.cache_key(read_text(path), str(path))
    store = DiskCache(cache_dir / "packs", pack_cache.MAX_BYTES, pack_cache.MAX_ENTRY_BYTES)

    def put(payload: bytes) -> bytes:
        assert store.put(key, payload)
        return entry.read_bytes()

    for what, damaged, whole in list(_corruptions(original, key, put)):
        entry.write_bytes(damaged)
        hits, rejected = pack_cache.counts["hit"], pack_cache.counts["rejected"]
        pack = fresh_load(path)  # no exception, whatever the entry holds
        assert pack_cache.counts["hit"] == hits, what
        assert pack_cache.counts["rejected"] == rejected + whole, what  # (read, then refused)
        assert encoded(pack) == encoded(good), what
        assert entry.read_bytes() == original, what  # and a good entry replaces it


def test_every_pack_the_parser_makes_is_well_formed():
    # what serial.decode holds a cache entry to (dsl/wellformed.py) is true of every parse
    # (of the bundled packs too: test_bundled_packs_read_back_exactly_as_parsed parses them)
    paths = sorted((ROOT / "docs" / "tutorial").glob("*.rules"))
    paths += sorted((ROOT / "tests" / "mutants").glob("*.rules"))
    paths += sorted((ROOT / "tests" / "fixtures").glob("*.rules"))  # (matrix products among them)
    for path in paths:
        forget_loaded()
        pack = parse_module.parse_pack(read_text(path), str(path))
        assert list(wellformed.problems(pack)) == [], path
    assert len(paths) > 5
    approximate = parse_module.parse_pack(
        "pack a level 1\nrule L root y {\n    y = LeakyRelu(x) {alpha: ~0.01}\n  =>\n    y = Relu(x)\n}\n", "a.rules"
    )
    assert list(wellformed.problems(approximate)) == []


_RICH_PACK = """pack fuzz level 1
rule ReshapeTwice root b {
    a = Reshape(x, s1) {allowzero: _}
    b = Reshape(a, s2) {allowzero: z}
  where const(s2) and (z ?? 0) == 0 and (len(shape(x)) >= 1 or not single_use(a))
  where shape(x)[-1:] != [0] and list(value(s2))[0] in [1, 2, -1]
  let t = list(value(s2))
  =>
    b = Reshape(x, array(t, int64)) {allowzero: 0}
}
rule DoubleNeg root b {
    a = Neg(x)
    b = Neg(a) | Abs(a)
  where single_use(a) and rank(x) > 0
  =>
    b = Identity(x)
}
"""


def _rich_model():
    from helpers import init, model, tensor
    from onnx import helper

    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Reshape", ["a", "s2"], ["b"]),
        helper.make_node("Neg", ["b"], ["n"]),
        helper.make_node("Neg", ["n"], ["y"]),
    ]
    shapes = [init("s1", np.array([4, 2], np.int64)), init("s2", np.array([2, 4], np.int64))]
    return model(nodes, [tensor("x", shape=[8])], [tensor("y", shape=[2, 4])], shapes)


def _mutated(data: list, rng: random.Random) -> list:
    """``data`` with one to three random edits: a string, number or flag changed, a list
    emptied, shortened, lengthened or reordered."""
    data = json.loads(json.dumps(data))
    words = [
        "",
        "x",
        "a",
        "zz",
        "-",
        "not",
        "**",
        "??",
        "==",
        "in",
        "and",
        "Neg",
        "Relu",
        "single_use",
        "shape",
        "Name",
    ]
    for _ in range(rng.choice([1, 1, 2, 3])):
        spots: list[tuple[list, int]] = []
        stack = [data]
        while stack:
            node = stack.pop()
            for i, child in enumerate(node):
                spots.append((node, i))
                if isinstance(child, list):
                    stack.append(child)
        parent, i = rng.choice(spots)
        value = parent[i]
        if isinstance(value, list):
            edit = rng.randrange(4)
            if edit == 0:
                parent[i] = []
            elif edit == 1 and value:
                del value[rng.randrange(len(value))]
            elif edit == 2 and value:
                value.append(json.loads(json.dumps(rng.choice(value))))
            elif len(value) > 1:
                rng.shuffle(value)
        elif isinstance(value, bool):
            parent[i] = not value
        elif isinstance(value, str):
            parent[i] = rng.choice(words)
        elif isinstance(value, int):
            parent[i] = rng.choice([0, 1, -1, 2, 5, 10**9])
        elif value is None:
            parent[i] = rng.choice([0, "x", True])
    return data


def test_an_entry_edited_into_another_well_typed_pack_is_refused_or_harmless(tmp_path):
    # what serial.decode accepts the engine must take without an exception of its own:
    # hundreds of random edits of a pack's JSON, each refused (NotAPack: the pack is parsed)
    # or run and explained with at most the library's own errors
    path = tmp_path / "fuzz.rules"
    path.write_text(_RICH_PACK)
    good = parse_module.parse_pack(_RICH_PACK, str(path))
    data, m = serial.encode(good), _rich_model()
    assert [n.op_type for n in rewriter.optimize(m, rules=[good], bundled=False).model.graph.node] == [
        "Reshape",
        "Identity",
    ]  # both applied
    rng = random.Random(5)
    accepted = 0
    for _ in range(300):
        try:
            pack = serial.decode(_mutated(data, rng), str(path))
        except serial.NotAPack:
            continue
        accepted += 1
        try:
            rewriter.optimize(m, rules=[pack], bundled=False)
            rewriter.explain(m, rules=[pack], bundled=False)
        except RewriterError:
            pass
    assert accepted > 30  # (the edits reach the engine, not only the reader)


def test_an_entry_that_is_not_a_plain_file_of_ours_is_ignored(cache_dir, tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    good = fresh_load(path)
    (entry,) = entries(cache_dir)
    elsewhere = tmp_path / "elsewhere.entry"
    elsewhere.write_bytes(entry.read_bytes())
    makers = [
        lambda: entry.symlink_to(elsewhere),  # a link, even to a good entry
        lambda: os.mkfifo(entry),  # would block a reader that waits for a writer
        lambda: entry.mkdir(),
    ]
    if os.geteuid() == 0:  # (only root can give a file away) another user's good entry
        makers.append(lambda: (entry.write_bytes(elsewhere.read_bytes()), os.chown(entry, 65534, 65534)))
    for make in makers:
        if entry.is_dir() and not entry.is_symlink():
            entry.rmdir()
        else:
            entry.unlink()
        make()
        before = pack_cache.counts["hit"]
        assert encoded(fresh_load(path)) == encoded(good)
        assert pack_cache.counts["hit"] == before


# ------------------------------------------------------------------------- concurrency


_WRITER = """
import sys
from rewriter.disk_cache import DiskCache
directory, key, me = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = DiskCache(directory, 1 << 26, 1 << 20)
payload = bytes([65 + me]) * (200_000 + 1000 * me)
for _ in range(40):
    assert store.put(key, payload)
"""

_READER = """
import sys
from rewriter.disk_cache import DiskCache
directory, key = sys.argv[1], sys.argv[2]
store = DiskCache(directory, 1 << 26, 1 << 20)
seen = set()
for _ in range(400):
    got = store.get(key)
    if got is not None:
        assert len(set(got)) == 1 and len(got) == 200_000 + 1000 * (got[0] - 65), "a mixed or partial entry"
        seen.add(got[0])
print(len(seen))
"""


def test_concurrent_writers_leave_a_whole_entry_and_readers_never_see_a_partial_one(tmp_path):
    directory, key = str(tmp_path / "cache"), "one key"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, directory, key, str(i)]) for i in range(4)]
    reader = subprocess.run([sys.executable, "-c", _READER, directory, key], capture_output=True, text=True)
    assert all(w.wait(timeout=120) == 0 for w in writers)
    assert reader.returncode == 0, reader.stderr
    got = DiskCache(Path(directory), 1 << 26, 1 << 20).get(key)
    assert got is not None and len(set(got)) == 1
    assert [p.name for p in Path(directory).iterdir() if not p.name.endswith(ENTRY_SUFFIX)] == []  # no temp left


def test_processes_loading_the_same_pack_at_once_store_one_good_entry(tmp_path):
    # the bundled basic and layout packs (the extended one parses for seconds: the race is
    # the same with the smaller two)
    env = {**os.environ, CACHE_DIR_VARIABLE: str(tmp_path / "cache")}
    env.pop(CACHE_SWITCH_VARIABLE, None)
    paths = [str(p) for p in bundled_pack_paths() if p.stem != "extended"]
    load = f"from rewriter.dsl import load_pack; packs = [load_pack(p) for p in {paths!r}]; "
    code = load + "print(sum(len(p.rules) for p in packs))"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE) for _ in range(3)]
    outputs = {p.communicate(timeout=300)[0] for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(outputs) == 1
    assert len(entries(tmp_path / "cache")) == len(paths) == 2
    check = "import rewriter.dsl.pack_cache as c; " + load + "print(dict(c.counts))"
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == repr({"hit": len(paths)}), done.stderr


# ---------------------------------------------------------------------- unusable places


@pytest.mark.parametrize("where", ["under a file", "is a file"])
def test_an_unusable_cache_directory_changes_nothing(tmp_path, monkeypatch, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(blocker / "cache" if where == "under a file" else blocker))
    monkeypatch.delenv(CACHE_SWITCH_VARIABLE, raising=False)
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    before = dict(pack_cache.counts)
    pack = fresh_load(path)
    assert [r.name for r in pack.rules] == ["IdentityElimination", "DoubleNeg"]
    assert pack_cache.counts["stored"] == before.get("stored", 0)
    assert blocker.read_text() == "not a directory"
    out = tmp_path / "out.onnx"
    run = ["optimize", str(MODELS / "convnet_bn.onnx"), "-o", str(out), "--level", "basic"]  # (one pack parsed)
    proc = subprocess.run(
        [sys.executable, "-m", "rewriter", *run],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    forget_loaded()


def test_the_cache_is_bounded_and_evicts_the_least_recently_used(tmp_path):
    store = DiskCache(tmp_path, max_bytes=5000, max_entry_bytes=2000)
    for i in range(3):
        assert store.put(f"key {i}", bytes(1500))
        os.utime(store.path(f"key {i}"), ns=(i * 10**9, i * 10**9))  # (old, older, oldest: no clock)
    assert store.get("key 0") is not None  # used: now the newest
    assert store.put("key 3", bytes(1500))
    assert store.get("key 1") is None  # the least recently used went
    assert all(store.get(f"key {i}") is not None for i in (0, 2, 3))
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 5000
    assert not store.put("too big", bytes(2001))


# ---------------------------------------------------------------- the same with or without


def test_what_serial_cannot_write_back_equal_is_not_stored(cache_dir, tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(SMALL_PACK)
    pack = fresh_load(path)
    a_list = dataclasses.replace(pack, rules=list(pack.rules))  # where a parse makes a tuple
    with pytest.raises(serial.NotAPack):
        serial.encode(a_list)
    rule = dataclasses.replace(pack.rules[0], tolerance=(0.5,))  # written, but not read back
    a_tuple = dataclasses.replace(pack, rules=(rule, *pack.rules[1:]))
    with pytest.raises(serial.NotAPack):
        serial.decode(json.loads(json.dumps(serial.encode(a_tuple))), pack.file)
    before = pack_cache.counts["stored"]
    for odd in (a_list, a_tuple):
        pack_cache.store(SMALL_PACK + " ", pack.file, odd)
    assert pack_cache.counts["stored"] == before


def _optimized(models: list[Path], level: str) -> list[tuple[bytes, list]]:
    """Each model optimized with the packs this process has loaded."""
    outcomes = []
    for model in models:
        result = rewriter.optimize(str(model), level=level)
        rows = [(r.rule, r.level, r.applied, r.refused) for r in result.report.rules]
        outcomes.append((result.model.SerializeToString(), rows))
    return outcomes


def test_bundled_packs_read_back_exactly_as_parsed(cache_dir):
    """One cold load of the bundled packs (parsing them is the slow part) serves it all: each
    parse is well formed and stored, reads back equal (positions' files too), and optimizes
    the models exactly as the pack read back does."""
    paths = bundled_pack_paths()
    models = [ROOT / "examples" / "convnet_bn.onnx", MODELS / "resnet18_mini_bn.onnx", MODELS / "bert_tiny.onnx"]
    before = dict(pack_cache.counts)
    forget_loaded()
    parsed = [load_pack(path) for path in paths]
    assert pack_cache.counts["stored"] == before.get("stored", 0) + len(paths)
    assert pack_cache.counts["hit"] == before.get("hit", 0)
    for path, pack in zip(paths, parsed):
        assert list(wellformed.problems(pack)) == [], path
    from_parse = _optimized(models, "all")
    forget_loaded()
    again = [load_pack(path) for path in paths]
    assert pack_cache.counts["hit"] == before.get("hit", 0) + len(paths)
    for path, pack, read in zip(paths, parsed, again):
        assert read is not pack and read == pack and encoded(read) == encoded(pack), path
        assert all(r.pos.file == str(path) for r in read.rules)
    from_cache = _optimized(models, "all")
    for model, cached, fresh in zip(models, from_cache, from_parse):
        assert cached == fresh, model.stem


@pytest.mark.parametrize(
    "header, level",
    [
        ("pack a level 2\n", 2),
        ("# a comment\n\n   # another\npack a level 3 providers CPU, CUDA\n", 3),
        ("pack a # the name\n  level 1 # the level\n", 1),
        ("pack a level 04\n", 4),
    ],
)
def test_a_packs_level_is_read_from_its_header_as_the_parser_reads_it(tmp_path, header, level):
    path = tmp_path / "mine.rules"
    path.write_text(header + SMALL_PACK.split("\n", 1)[1])
    assert declared_level(path.read_text()) == level
    forget_loaded()
    assert pack_level(path) == fresh_load(path).level == level


@pytest.mark.parametrize("text", ["pack a level 2x\n", "rule R { y = Relu(x) => y = x }\n", "pack level 1\n", ""])
def test_a_header_the_pattern_does_not_read_is_left_to_the_parser(text):
    assert declared_level(text) is None


def test_a_run_builds_only_the_bundled_packs_up_to_its_level(cache_dir):
    model = str(ROOT / "examples" / "convnet_bn.onnx")
    forget_loaded()
    rewriter.optimize(model, level="basic")  # cold: the basic pack parsed, the others' headers read
    assert len(entries(cache_dir)) == 1
    before = dict(pack_cache.counts)
    forget_loaded()
    result = rewriter.optimize(model, level="basic")
    assert pack_cache.counts["hit"] - before.get("hit", 0) == 1  # basic; extended and layout not built
    assert {r.level for r in result.report.rules} == {1}
    levels = {path.stem: pack_level(path) for path in bundled_pack_paths()}
    assert levels == {"basic": 1, "extended": 2, "layout": 3}
