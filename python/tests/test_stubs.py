"""The type stubs and docstrings cover every public name."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import grist
from grist import _grist

STUB = Path(grist.__file__).with_name("_grist.pyi")


def _stub_names() -> dict[str, set]:
    """Top-level names of _grist.pyi, with each class's members."""
    tree = ast.parse(STUB.read_text())
    out: dict[str, set] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
            }
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = set()
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = set()
    return out


def test_the_extension_stub_lists_every_name_and_member():
    stub = _stub_names()
    public = {n for n in dir(_grist) if not n.startswith("__") or n == "__version__"}
    assert public <= set(stub), public - set(stub)
    for name in public:
        obj = getattr(_grist, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            members = {m for m in vars(obj) if not m.startswith("_") or m.startswith("__arrow")}
            members |= {m for m in ("__len__",) if m in vars(obj)}
            assert members <= stub[name], (name, members - stub[name])


def test_every_public_name_of_grist_is_documented_and_typed():
    assert (Path(grist.__file__).parent / "py.typed").exists()
    for name in grist.__all__:
        obj = getattr(grist, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member, value in vars(obj).items():
                if member.startswith("_"):
                    continue
                assert inspect.getdoc(value), f"{name}.{member}"
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            assert sig.return_annotation is not inspect.Signature.empty, name
