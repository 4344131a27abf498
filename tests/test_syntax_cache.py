"""Syntax trees kept in the one cache (compiler/syntax_cache.py): the kept tree is the
parser's; a new process running a cell again neither imports lark nor parses; a damaged or
foreign entry is parsed again; a program that does not parse keeps its error and nothing."""
from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys

import pytest

from zynbook import cache as kcache
from zynbook.compiler import parser, syntax_cache
from zynbook.errors import ZynMLSyntaxError

SOURCE = "let x = randn([3], seed=1)\nlet y = compute(x) {\n    for i in 0..3:\n        out[i] = x[i] * 2.0\n}\ny\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    syntax_cache._trees.cache_clear()
    yield tmp_path
    syntax_cache._trees.cache_clear()


def _entries(folder):
    return sorted((folder / "syntax").glob("*.pickle"))


def test_the_kept_tree_is_the_parsers(cache_dir):
    first = syntax_cache.parse(SOURCE)
    assert repr(first) == repr(parser.parse(SOURCE)) and len(_entries(cache_dir)) == 1
    syntax_cache._trees.cache_clear()           # as a new process: from the disk
    again = syntax_cache.parse(SOURCE)
    assert again is not first and repr(again) == repr(first) and again.source == SOURCE


def test_a_damaged_or_foreign_entry_is_parsed_again(cache_dir):
    syntax_cache.parse(SOURCE)
    path = _entries(cache_dir)[0]
    for damage in (b"garbage", path.read_bytes()[:-7]):
        path.write_bytes(damage)
        syntax_cache._trees.cache_clear()
        assert repr(syntax_cache.parse(SOURCE)) == repr(parser.parse(SOURCE))
    # a verified entry holding another program's tree
    key = kcache.CacheKey("syntax", hashlib.sha256(SOURCE.encode()).hexdigest(),
                          versions=kcache.parts(parser=syntax_cache._parser_digest()))
    syntax_cache._trees().store(key, pickle.dumps(parser.parse("1\n")))
    syntax_cache._trees.cache_clear()
    assert syntax_cache.parse(SOURCE).source == SOURCE


def test_a_program_that_does_not_parse_keeps_its_error_and_nothing(cache_dir):
    with pytest.raises(ZynMLSyntaxError):
        syntax_cache.parse("let = 1\n")
    assert not _entries(cache_dir)


def test_a_new_process_runs_a_cell_again_without_lark(tmp_path):
    code = ("import sys, zynbook; print(zynbook.run(%r).numpy().tolist()); print('lark' in sys.modules)"
            % SOURCE)
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(tmp_path))

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n")
    first, second = run(), run()
    assert first[0] == second[0] and first[1] == "True" and second[1] == "False"
