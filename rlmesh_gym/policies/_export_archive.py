"""What in a ``torch.export`` archive (``.pt2``) would run code when torch loads it.

``torch.export.load`` (torch 2.13) unpickles several records with ``weights_only=False`` (the
sample inputs when a weights-only read fails, weights and constants saved with ``use_pickle``,
opaque objects), loads AOTInductor shared libraries, and parses every symbolic shape expression
with ``sympy.sympify``, which evaluates the string. An archive is loaded without
``allow_pickle`` only when none of these can run anything: every pickle it holds reads with
torch's weights-only unpickler, it holds no compiled code, and every expression is made of
numbers, shape symbols and sympy's arithmetic only.
"""

from __future__ import annotations

import ast
import io
import json
import re
import zipfile
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["archive_records", "rebuilt_archive", "untrusted_content"]

# Functions a serialised shape expression calls: sympy's own arithmetic and relations, and the
# ones torch registers for shapes (the deserializer's ``sympy_functions``).
_SYMPY_FUNCTIONS = frozenset(
    {
        "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Max", "Min", "Abs", "Mod",
        "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan",
        "StrictGreaterThan", "LessThan", "GreaterThan", "And", "Or", "Not", "Piecewise",
        "ExprCondPair", "floor", "ceiling", "sqrt", "FloorDiv", "ModularIndexing", "Where",
        "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv", "LShift", "RShift",
        "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator",
        "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal", "ToFloat", "Identity",
    }
)  # fmt: skip
_SYMPY_CONSTANTS = frozenset({"oo", "zoo", "nan", "true", "false", "S"})
# torch's shape symbols: a short lowercase prefix and a number (s0, u3, zuf0, ...).
_SYMBOL = re.compile(r"[a-z]{1,8}[0-9]{1,9}")
_NUMBER = re.compile(r"[-+]?[0-9]{1,40}(\.[0-9]{0,40})?([eE][-+]?[0-9]{1,4})?")
# Functions whose second argument is an exponent or shift: a constant one must be small, or a
# file could make sympy compute a number of any size.
_EXPONENTIAL = frozenset({"Pow", "PowByNatural", "FloatPow", "LShift"})
_EXPONENT_LIMIT = 64
_INTEGER_LIMIT = 2**64
_EXPRESSION_LIMIT = 10_000  # characters; torch writes a handful of symbols per expression
_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Call, ast.keyword,
    ast.Name, ast.Load, ast.Constant, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
)  # fmt: skip


def _unsafe_expression(text: str) -> str | None:
    """Why sympy could run code (or compute without bound) on ``text``, or ``None``."""
    if len(text) > _EXPRESSION_LIMIT:
        return f"a {len(text)}-character expression"
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"the expression {text[:80]!r}, which is not plain arithmetic"
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            return f"the expression {text[:80]!r} ({type(node).__name__} is not arithmetic)"
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _SYMPY_FUNCTIONS:
                return f"the expression {text[:80]!r}, which calls {ast.unparse(node.func)!r}"
            if node.func.id in _EXPONENTIAL and len(node.args) > 1 and _is_large(node.args[1]):
                return f"the expression {text[:80]!r}, which raises to a large constant power"
            if any(not isinstance(kw.value, ast.Constant) or kw.arg is None for kw in node.keywords):
                return f"the expression {text[:80]!r} (a keyword argument that is not a constant)"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.LShift)):
            if _is_large(node.right):
                return f"the expression {text[:80]!r}, which raises to a large constant power"
        elif isinstance(node, ast.Name):
            if not (_SYMBOL.fullmatch(node.id) or node.id in _SYMPY_FUNCTIONS or node.id in _SYMPY_CONSTANTS):
                return f"the expression {text[:80]!r}, which names {node.id!r}"
        elif isinstance(node, ast.Constant):
            reason = _unsafe_constant(node.value)
            if reason is not None:
                return f"the expression {text[:80]!r} ({reason})"
    return None


def _unsafe_constant(value: object) -> str | None:
    # A string argument is sympified again by most sympy functions: only names and numbers pass.
    if isinstance(value, str):
        if _SYMBOL.fullmatch(value) or _NUMBER.fullmatch(value):
            return None
        return f"the string {value[:40]!r}"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if abs(value) < _INTEGER_LIMIT else "an integer out of range"
    if isinstance(value, float):
        return None
    return f"a {type(value).__name__} constant"


def _is_large(node: ast.expr) -> bool:
    """Whether an exponent is not a shape symbol or a small integer constant."""
    if isinstance(node, ast.Name):
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Symbol":
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Integer":
        node = node.args[0] if len(node.args) == 1 else node
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return not (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and abs(node.value) <= _EXPONENT_LIMIT
    )


def _expressions(value: Any) -> Iterator[str]:
    """Every ``expr_str`` in a parsed JSON document (torch's serialised sympy expressions)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if key == "expr_str" and isinstance(inner, str):
                    yield inner
                else:
                    stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


def _reads_weights_only(data: bytes) -> bool:
    try:
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:  # any refusal or damage: torch would retry it with the full unpickler
        return False
    return True


def _pickled_payloads(config_name: str, config_bytes: bytes) -> Iterator[tuple[str, bool]]:
    """(record, whether a weights-only read may stand for torch's) of each weight or constant that
    the payload config ``config_name`` says torch unpickles."""
    try:
        config = json.loads(config_bytes)
    except (ValueError, RecursionError):
        return  # torch refuses a config that is not JSON before unpickling anything
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        return
    folder = config_name[: config_name.rindex("/") + 1] if "/" in config_name else ""
    for entry in entries.values():
        if not isinstance(entry, dict):
            continue
        path_name = str(entry.get("path_name", ""))
        if path_name.startswith(("custom_obj", "opaque_obj")):  # read with torch's or Python's unpickler
            yield folder + path_name, False
        elif entry.get("use_pickle"):
            yield folder + path_name, True


def archive_records(data: bytes) -> dict[str, bytes]:
    """The records of the zip archive ``data``, by name.

    Raises:
        ValueError: the archive is damaged, names a record twice (torch and Python could read
            different ones) or declares a record larger than the file.
    """
    records: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                if info.filename in records:
                    raise ValueError(f"it holds two records named {info.filename}")
                if info.file_size > len(data):
                    raise ValueError(
                        f"its record {info.filename} declares {info.file_size} bytes, more than the file"
                    )
                records[info.filename] = archive.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as error:
        raise ValueError(f"it is not a readable zip archive: {error}") from error
    return records


def rebuilt_archive(records: dict[str, bytes]) -> bytes:
    """A fresh uncompressed zip of ``records``: torch reads exactly what was checked."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, content in records.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def untrusted_content(records: dict[str, bytes]) -> str | None:
    """What in a ``.pt2`` archive's ``records`` would execute code when torch loads it, or ``None``.

    The answer completes "the file ..." (for :func:`~rlmesh_gym.policies._trust.pickle_refusal`).
    """
    for name, content in records.items():
        if "/aotinductor/" in f"/{name}":
            return f"holds AOTInductor compiled code ({name}), which torch would load as a shared library"
        if name.endswith(".pt") and not _reads_weights_only(content):
            return f"holds a pickled Python object in {name}"
        if name.endswith(".json"):
            try:
                document = json.loads(content)
            except (ValueError, RecursionError):
                continue  # torch refuses it as a broken program before evaluating anything
            for expression in _expressions(document):
                reason = _unsafe_expression(expression)
                if reason is not None:
                    return f"holds {reason} in {name}, which torch would evaluate"
        if name.endswith(("_weights_config.json", "_constants_config.json")):
            for record, weights_only in _pickled_payloads(name, content):
                payload = records.get(record)
                if not (weights_only and payload is not None and _reads_weights_only(payload)):
                    return f"holds a pickled Python object in {record}"
    return None
