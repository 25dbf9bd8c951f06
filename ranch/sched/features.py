"""sbatch -C/--constraint and --exclusive=user: which nodes a job may be placed on."""

# Slurm's forms that name features node by node: `a`, `a&b`, `a|b`, `a,b` (a comma is `&`),
# `(a|b)&c`. Like slurmctld, operators are read left to right with no precedence between `&`
# and `|` (`a|b&c` is `(a|b)&c`); parentheses group. Bracketed sets (`[a|b]`, every node the
# same one) and counts (`a*2`) are refused with a message naming them: Ranch does not place them.

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from ranch.sched.model import Holder, Node, NodeUse, Pending


class ConstraintError(ValueError):
    """Why a constraint is not one Ranch can use; worded for the submitter."""


@attrs.frozen
class Term:
    name: str


@attrs.frozen
class Op:
    """Left-to-right chain: items[0] op[0] items[1] op[1] ..."""

    items: tuple[Term | Op, ...]
    ops: tuple[str, ...]


Expr = Term | Op


def parse(text: str) -> Expr:
    """The expression of a constraint string; ConstraintError naming what is wrong."""
    src = text.strip().replace(",", "&")
    if not src:
        raise ConstraintError("empty constraint")
    for ch, what in (("[", "bracketed feature sets ([a|b])"), ("*", "feature counts (a*2)")):
        if ch in src:
            raise ConstraintError(f"Ranch does not place {what}; use a, a&b, a|b or (a|b)&c")
    pos = 0

    def chain(depth: int) -> Expr:
        nonlocal pos
        items: list[Expr] = [atom(depth)]
        ops: list[str] = []
        while pos < len(src) and src[pos] in "&|":
            ops.append(src[pos])
            pos += 1
            items.append(atom(depth))
        return items[0] if not ops else Op(tuple(items), tuple(ops))

    def atom(depth: int) -> Expr:
        nonlocal pos
        if pos < len(src) and src[pos] == "(":
            if depth:
                raise ConstraintError(f"nested parentheses in {text!r}")
            pos += 1
            inner = chain(depth + 1)
            if pos >= len(src) or src[pos] != ")":
                raise ConstraintError(f"unbalanced parenthesis in {text!r}")
            pos += 1
            return inner
        start = pos
        while pos < len(src) and src[pos] not in "&|()":
            pos += 1
        name = src[start:pos].strip()
        if not name:
            raise ConstraintError(f"a feature name is missing in {text!r}")
        return Term(name)

    expr = chain(0)
    if pos != len(src):
        raise ConstraintError(f"unexpected {src[pos]!r} in {text!r}")
    return expr


def names(expr: Expr) -> list[str]:
    if isinstance(expr, Term):
        return [expr.name]
    return [n for item in expr.items for n in names(item)]


def matches(expr: Expr, features: Iterable[str]) -> bool:
    have = set(features)

    def ev(e: Expr) -> bool:
        if isinstance(e, Term):
            return e.name in have
        value = ev(e.items[0])
        for op, item in zip(e.ops, e.items[1:], strict=True):
            value = (value and ev(item)) if op == "&" else (value or ev(item))
        return value

    return ev(expr)


def check(text: str, known: Iterable[str]) -> Expr | str:
    """The parsed constraint, or the refusal slurmctld gives ("Invalid feature specification":
    a form Ranch cannot read, or a feature no node of the cluster has)."""
    try:
        expr = parse(text)
    except ConstraintError as exc:
        return f"Invalid feature specification: {exc}"
    unknown = sorted(set(names(expr)) - set(known))
    if unknown:
        return f"Invalid feature specification: no node has feature(s) {','.join(unknown)}"
    return expr


_cache: dict[str, Expr | None] = {}


def _expr(text: str) -> Expr | None:
    """Parsed once per distinct string (a pass looks at every pending job's nodes)."""
    if text not in _cache:
        if len(_cache) > 4096:
            _cache.clear()
        try:
            _cache[text] = parse(text)
        except ConstraintError:
            _cache[text] = None  # submit refused it; a saved job from elsewhere matches nothing
    return _cache[text]


def matches_features(constraint: str, node: Node) -> bool:
    if not constraint:
        return True
    expr = _expr(constraint)
    return expr is not None and matches(expr, node.features)


class NodeFilter:
    """Which nodes a job may be placed on now (`filter(node)`): the node's Features, and
    --exclusive=user against the jobs on it. It reads `uses` as they are at each call, so a
    job placed earlier in the same pass counts. `explain` turns place()'s ReqNodeNotAvail into
    Resources when nodes were only passed over because another user's jobs hold them."""

    def __init__(self, job: Pending, uses: Mapping[str, NodeUse],
                 holders: Mapping[int, Holder]) -> None:
        self.job = job
        self.uses = uses
        self.holders = holders
        self.busy = False

    def __call__(self, node: Node) -> bool:
        if self.job.constraint and not matches_features(self.job.constraint, node):
            return False
        use = self.uses.get(node.name)
        if use is None or not use.jobs or self._shares(use.jobs):
            return True
        self.busy = True
        return False

    def _shares(self, job_ids: Iterable[int]) -> bool:
        """--exclusive=user: may the job share a node with these jobs? Not when either side
        asked for it and the users differ (a job the table no longer has holds nothing)."""
        job, table = self.job, self.holders
        for j in job_ids:
            try:
                other = table[j]
            except KeyError:
                continue
            if other.uid != job.uid and (job.user_exclusive or other.user_exclusive):
                return False
        return True

    def explain(self, why: str) -> str:
        return "Resources" if self.busy and why.startswith("ReqNodeNotAvail") else why
