"""The condition syntax of the DSL: parse model-written text safely, evaluate it against a state.

Conditions appear in `termination.conditions` and `reward.conditions[*].if`, e.g.
`"game.game_over == true"` or `"agent.energy <= 0 or len(board.free_cells) == 0"`.

Grammar (a small subset of Python's expression syntax):

    condition  := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | comparison
    comparison := sum (COMPARE sum)*          COMPARE: == != < <= > >= in "not in"
    sum        := term (("+" | "-") term)*
    term       := factor (("*" | "/" | "%") factor)*
    factor     := "-" factor | atom
    atom       := path | literal | "len(" condition ")" | "(" condition ")"
                | "[" [condition ("," condition)*] "]"
    path       := NAME ("." NAME | "[" INTEGER "]")*      e.g. agent.pos[0]
    literal    := NUMBER | STRING | true | false | null     (True/False/None also accepted)

The text is parsed with `ast.parse` and every node is checked against this grammar; nothing is
ever evaluated by Python. Anything else (calls other than len, attribute access on literals,
`is`, lambdas, comprehensions, assignment) is a syntax error with the offending column.
"""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from envforge.dsl_schema.pyparse import parse

MAX_LENGTH = 1000

LITERAL_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class ConditionSyntaxError(ValueError):
    """The text is not a condition in the DSL syntax. `column` is 1-based, or None."""

    def __init__(self, message: str, column: int | None = None):
        super().__init__(message if column is None else f"{message} at column {column}")
        self.reason = message
        self.column = column


class ConditionError(ValueError):
    """A parsed condition could not be evaluated against a state (missing path, bad types)."""


# Parsed form: small immutable nodes, independent of the `ast` module.
@dataclass(frozen=True)
class Path:
    parts: tuple[str | int, ...]

    def __str__(self) -> str:
        return "".join(f"[{p}]" if isinstance(p, int) else ("." if i else "") + p for i, p in enumerate(self.parts))


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class ListOf:
    items: tuple[Any, ...]


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    operands: tuple[Any, ...]


@dataclass(frozen=True)
class Compare:
    left: Any
    ops: tuple[str, ...]
    rights: tuple[Any, ...]


@dataclass(frozen=True)
class Arith:
    op: str  # + - * / %
    left: Any
    right: Any


@dataclass(frozen=True)
class Unary:
    op: str  # not - len
    operand: Any


_COMPARE_OPS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in",
}
_ARITH_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
_UNARY_OPS = {ast.Not: "not", ast.USub: "-"}


def parse_condition(text: Any) -> Any:
    """Parse condition text into nodes; raise ConditionSyntaxError if it is not in the grammar."""
    if not isinstance(text, str):
        raise ConditionSyntaxError(f"a string, not {type(text).__name__}")
    if not text.strip():
        raise ConditionSyntaxError("an empty condition")
    if len(text) > MAX_LENGTH:
        raise ConditionSyntaxError(f"a condition of {len(text)} characters (limit {MAX_LENGTH})")
    source = text.strip()
    try:
        tree = parse(source, mode="eval")
        return _convert(tree.body)
    except SyntaxError as exc:
        raise ConditionSyntaxError(exc.msg or "invalid syntax", exc.offset) from None
    except (RecursionError, MemoryError):
        raise ConditionSyntaxError("an expression nested too deeply") from None
    except ValueError as exc:  # e.g. null bytes in the source
        if isinstance(exc, ConditionSyntaxError):
            raise
        raise ConditionSyntaxError(str(exc)) from None


def _reject(node: ast.AST, what: str) -> ConditionSyntaxError:
    column = getattr(node, "col_offset", None)
    return ConditionSyntaxError(what, None if column is None else column + 1)


def _convert(node: ast.AST) -> Any:
    if isinstance(node, ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        return BoolOp(op, tuple(_convert(v) for v in node.values))
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY_OPS:
            raise _reject(node, f"unsupported operator {type(node.op).__name__}")
        return Unary(_UNARY_OPS[type(node.op)], _convert(node.operand))
    if isinstance(node, ast.Compare):
        ops = []
        for op in node.ops:
            if type(op) not in _COMPARE_OPS:
                raise _reject(node, "unsupported comparison 'is' (use == or !=)")
            ops.append(_COMPARE_OPS[type(op)])
        return Compare(_convert(node.left), tuple(ops), tuple(_convert(c) for c in node.comparators))
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _ARITH_OPS:
            raise _reject(node, f"unsupported operator {type(node.op).__name__}")
        return Arith(_ARITH_OPS[type(node.op)], _convert(node.left), _convert(node.right))
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return Literal(node.value)
        raise _reject(node, f"unsupported literal {node.value!r}")
    if isinstance(node, (ast.List, ast.Tuple)):
        return ListOf(tuple(_convert(e) for e in node.elts))
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "len":
            if len(node.args) != 1 or node.keywords:
                raise _reject(node, "len(...) takes exactly one argument")
            return Unary("len", _convert(node.args[0]))
        raise _reject(node, "a function call (only len(...) is allowed)")
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Name) and node.id in LITERAL_NAMES:
            return Literal(LITERAL_NAMES[node.id])
        return Path(tuple(_path_parts(node)))
    raise _reject(node, f"unsupported syntax ({type(node).__name__})")


def _path_parts(node: ast.AST) -> list[str | int]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return _path_parts(node.value) + [node.attr]
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, int) and not isinstance(index.value, bool):
            return _path_parts(node.value) + [index.value]
        if isinstance(index, ast.Constant) and isinstance(index.value, str):
            return _path_parts(node.value) + [index.value]
        raise _reject(node, "a subscript other than a constant index like [0] or ['key']")
    raise _reject(node, "a path must start with a name (like agent.pos)")


def paths(node: Any) -> Iterator[Path]:
    """Every state path a parsed condition reads, in order."""
    if isinstance(node, Path):
        yield node
    elif isinstance(node, Unary):
        yield from paths(node.operand)
    elif isinstance(node, BoolOp):
        for operand in node.operands:
            yield from paths(operand)
    elif isinstance(node, Compare):
        yield from paths(node.left)
        for right in node.rights:
            yield from paths(right)
    elif isinstance(node, Arith):
        yield from paths(node.left)
        yield from paths(node.right)
    elif isinstance(node, ListOf):
        for item in node.items:
            yield from paths(item)


_COMPARE_FUNCS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}
_ARITH_FUNCS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "%": operator.mod,
}
_UNARY_FUNCS: dict[str, Callable[[Any], Any]] = {"not": operator.not_, "-": operator.neg, "len": len}


def evaluate(condition: Any, state: Mapping[str, Any], names: Mapping[str, Any] | None = None) -> Any:
    """Value of a condition (text or parsed) against `state`.

    `names` supplies reserved names such as `t` and `max_steps`; they take precedence over
    state keys of the same name. Raises ConditionSyntaxError or ConditionError, nothing else.
    """
    node = parse_condition(condition) if isinstance(condition, str) else condition
    try:
        return _eval(node, state, names or {})
    except ConditionError:
        raise
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError) as exc:
        raise ConditionError(f"cannot evaluate {condition if isinstance(condition, str) else node}: {exc}") from None


def holds(condition: Any, state: Mapping[str, Any], names: Mapping[str, Any] | None = None) -> bool:
    """True if the condition holds in `state` (see evaluate)."""
    return bool(evaluate(condition, state, names))


def _eval(node: Any, state: Mapping[str, Any], names: Mapping[str, Any]) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Path):
        return resolve(node, state, names)
    if isinstance(node, ListOf):
        return [_eval(item, state, names) for item in node.items]
    if isinstance(node, Unary):
        return _UNARY_FUNCS[node.op](_eval(node.operand, state, names))
    if isinstance(node, BoolOp):
        if node.op == "and":
            return all(_eval(o, state, names) for o in node.operands)
        return any(_eval(o, state, names) for o in node.operands)
    if isinstance(node, Arith):
        return _ARITH_FUNCS[node.op](_eval(node.left, state, names), _eval(node.right, state, names))
    if isinstance(node, Compare):
        left = _eval(node.left, state, names)
        for op, right_node in zip(node.ops, node.rights):
            right = _eval(right_node, state, names)
            if not _COMPARE_FUNCS[op](left, right):
                return False
            left = right
        return True
    raise ConditionError(f"not a parsed condition: {node!r}")


def resolve(path: Path, state: Mapping[str, Any], names: Mapping[str, Any] | None = None) -> Any:
    """Follow a path through nested mappings and lists; ConditionError if a step is missing."""
    head, *rest = path.parts
    if names and head in names:
        value = names[head]
    elif isinstance(state, Mapping) and head in state:
        value = state[head]
    else:
        raise ConditionError(f"{path}: '{head}' is not in the state")
    walked = [head]
    for part in rest:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, (list, tuple)) and isinstance(part, int) and -len(value) <= part < len(value):
            value = value[part]
        else:
            raise ConditionError(f"{path}: {Path(tuple(walked))} has no {part!r}")
        walked.append(part)
    return value
