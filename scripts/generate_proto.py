"""Regenerate the protobuf and gRPC Python modules from ``rlmesh_gym/proto/schema``.

Run ``python scripts/generate_proto.py`` after editing a ``.proto`` file (needs
``grpcio-tools``, in the ``dev`` extra). ``--check`` regenerates into a temporary
directory and exits non-zero when the committed modules differ; the test suite uses it.

protoc writes absolute imports (``from rlmesh.spaces.v1 import ...``); they are rewritten
to point inside this package so the generated code never collides with the real
``rlmesh`` distribution installed beside it.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent.parent / "rlmesh_gym" / "proto"
SCHEMA_DIR = PROTO_DIR / "schema"
GENERATED_DIR = PROTO_DIR / "_generated"
GENERATED_PACKAGE = "rlmesh_gym.proto._generated"
_IMPORT = re.compile(r"^from rlmesh(\.[\w.]+) import ", re.MULTILINE)
_MODULE_NAME = re.compile(r"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, ')rlmesh\.")


def generate(out_dir: Path) -> None:
    """Write the generated modules for every ``.proto`` under the schema dir into ``out_dir``."""
    from grpc_tools import protoc  # dev-only dependency

    protos = sorted(str(p.relative_to(SCHEMA_DIR)) for p in SCHEMA_DIR.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{SCHEMA_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for path in out_dir.rglob("*.py*"):
        if path.name.endswith("_pb2_grpc.py"):
            proto = SCHEMA_DIR / path.relative_to(out_dir).with_name(
                path.name[: -len("_pb2_grpc.py")] + ".proto"
            )
            if "\nservice " not in proto.read_text():
                path.unlink()  # the grpc plugin emits an empty module for service-less files
                continue
        text = _IMPORT.sub(rf"from {GENERATED_PACKAGE}.rlmesh\1 import ", path.read_text())
        text = _MODULE_NAME.sub(rf"\1{GENERATED_PACKAGE}.rlmesh.", text)
        path.write_text(text)
    for directory in [out_dir, *(p for p in out_dir.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    _write_package_modules(out_dir)


_TOP_LEVEL = re.compile(r"^(message|enum|service) (\w+)", re.MULTILINE)
_ENUM_VALUE = re.compile(r"^  ([A-Z][A-Z0-9_]*) = \d+;", re.MULTILINE)


def _write_package_modules(out_dir: Path) -> None:
    """Write one short-import module per proto package (``env_pb2`` for ``rlmesh.env.v1``)."""
    for package_dir in sorted(p for p in SCHEMA_DIR.glob("rlmesh/*/v1")):
        short = package_dir.parent.name
        lines = [f'"""Every message and enum of the ``rlmesh.{short}.v1`` protobuf package."""', ""]
        grpc_lines = [f'"""gRPC stubs of the ``rlmesh.{short}.v1`` package (needs ``grpcio``)."""', ""]
        exported: list[str] = []
        grpc_exported: list[str] = []
        for proto in sorted(package_dir.glob("*.proto")):
            text = proto.read_text()
            module = f"{GENERATED_PACKAGE}.rlmesh.{short}.v1.{proto.stem}_pb2"
            names = [name for kind, name in _TOP_LEVEL.findall(text) if kind != "service"]
            names += _ENUM_VALUE.findall(text)
            if names:
                lines += [f"from {module} import (", *(f"    {n}," for n in names), ")"]
                exported += names
            for service in (name for kind, name in _TOP_LEVEL.findall(text) if kind == "service"):
                names = [f"{service}Stub", f"{service}Servicer", f"add_{service}Servicer_to_server"]
                grpc_lines += [f"from {module}_grpc import (", *(f"    {n}," for n in names), ")"]
                grpc_exported += names
        lines += ["", "__all__ = [", *(f'    "{n}",' for n in exported), "]", ""]
        (out_dir / f"{short}_pb2.py").write_text("\n".join(lines))
        if grpc_exported:
            grpc_lines += ["", "__all__ = [", *(f'    "{n}",' for n in grpc_exported), "]", ""]
            (out_dir / f"{short}_pb2_grpc.py").write_text("\n".join(grpc_lines))


def _differences(left: Path, right: Path) -> list[str]:
    """Relative paths that exist in only one tree or differ in content."""
    names = {
        str(p.relative_to(root))
        for root in (left, right)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    return sorted(
        n
        for n in names
        if not (
            (left / n).is_file() and (right / n).is_file() and filecmp.cmp(left / n, right / n, shallow=False)
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed modules are stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        if args.check:
            stale = _differences(fresh, GENERATED_DIR)
            if stale:
                print("generated protobuf modules are out of date:", *stale, sep="\n  ", file=sys.stderr)
                print("run: python scripts/generate_proto.py", file=sys.stderr)
                return 1
            return 0
        shutil.rmtree(GENERATED_DIR, ignore_errors=True)
        shutil.copytree(fresh, GENERATED_DIR)
    print(f"wrote {GENERATED_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
