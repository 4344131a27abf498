"""Syntax trees kept in the one cache (zynbook/cache.py): a cell run again in a new process
(a notebook's kernel restarted, a script run again) gets its tree without importing lark or
parsing, a tenth of a second of a warm start. The key is the source text and the parser's
own files (its grammar, the tree classes, the tree builder), so a changed parser never reads
an old tree; entries are verified before they are read, and one that does not load as a
tree of this source is discarded and parsed again. Only programs that parse are kept."""
from __future__ import annotations

import functools
import hashlib
import pickle
import re
from pathlib import Path

from .. import cache as kcache
from . import ast as A

_PARSER_FILES = ("grammar.lark", "ast.py", "parser.py")


@functools.lru_cache(maxsize=1)
def _trees() -> kcache.KernelCache:
    return kcache.KernelCache("syntax", suffix=".pickle")


@functools.lru_cache(maxsize=1)
def _parser_digest() -> str:
    h = hashlib.sha256()
    for name in _PARSER_FILES:
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()


def parse(source: str) -> A.Program:
    """The tree of `source` (compiler/parser.py's `parse`), from the cache where it is."""
    # (surrogatepass: a lone surrogate in a string literal is text Python holds)
    key = kcache.CacheKey("syntax", hashlib.sha256(source.encode("utf-8", "surrogatepass"))
                          .hexdigest(),
                          versions=kcache.parts(parser=_parser_digest()))

    def build() -> bytes:
        from .parser import parse as parse_text
        tree = parse_text(source)
        try:
            return pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)
        except RecursionError:      # nested deeper than pickle goes: used, not kept
            raise _Unkept(tree) from None

    def use(payload: bytes) -> A.Program:
        try:
            tree = pickle.loads(payload)
        except Exception as err:
            raise kcache.EntryUnusable(f"not a syntax tree: {err}") from None
        if not isinstance(tree, A.Program) or getattr(tree, "source", None) != source:
            raise kcache.EntryUnusable("the tree of another program")
        return tree
    try:
        tree = _trees().fetch(key, build, use)[0]
    except _Unkept as unkept:
        tree = unkept.tree
    if re.search(r"//[ \t]*\d", source):      # (lark is imported only where it may warn)
        from .parser import warn_floor_division
        warn_floor_division(source)     # each time: a kept tree is not parsed again
    return tree


class _Unkept(Exception):
    """A tree that parsed but cannot be stored."""

    def __init__(self, tree: A.Program):
        super().__init__("a syntax tree too deep to store")
        self.tree = tree
