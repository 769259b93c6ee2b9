"""The package's shape, printed: the largest files, the lines in ``src/``, the package's
internal imports and those that point up a layer (``balancebench.LAYERS``).

    uv run python benchmarks/package_shape.py [SRC]     # SRC: default src/

``tests/test_layers.py`` asserts on the same functions (no import points up, at most 10
modules in the package root, no two modules of one base name)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules(src: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under ``src/balancebench``."""
    out = {}
    for path in (src / "balancebench").rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def internal_imports(mods: dict[str, Path]) -> set[tuple[str, str]]:
    """``(importer, imported)`` for every import of a balancebench module by one, at the
    top of the file or inside a function (``from a import b``: ``a.b`` where it is a
    module, else ``a``)."""
    edges = set()
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                full = [f"{node.module}.{a.name}" for a in node.names]
                targets = [t if t in mods else node.module for t in full]
            else:
                continue
            edges |= {(name, t) for t in targets if t.startswith("balancebench")}
    return edges


def layer(module: str, layers: tuple[tuple[str, ...], ...]) -> int:
    part = module.split(".")[1] if "." in module else ""
    for i, members in enumerate(layers):
        if part in members:
            return i
    raise ValueError(f"{module}: in no layer; allowed: one of {layers}")


def imports_that_point_up(
    edges: set[tuple[str, str]], layers: tuple[tuple[str, ...], ...]
) -> list[str]:
    """``importer -> imported`` where the imported module's layer is above the importer's."""
    return sorted(
        f"{a} -> {b}"
        for a, b in edges
        if a != "balancebench" and b != "balancebench" and layer(b, layers) > layer(a, layers)
    )


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src"
    sys.path.insert(0, str(src))
    import balancebench

    mods = modules(src)
    files = sorted(mods.values(), key=lambda p: len(p.read_text().splitlines()), reverse=True)
    lines = sum(len(p.read_text().splitlines()) for p in mods.values())
    print(f"src/: {len(mods)} files, {lines:,} lines")
    print("largest files:")
    for path in files[:5]:
        print(f"  {len(path.read_text().splitlines()):5d}  {path.relative_to(src)}")
    edges = internal_imports(mods)
    root = [p for p in (src / "balancebench").glob("*.py")]
    print(f"modules in the package root: {len(root)}")
    print(f"internal imports: {len(edges)}")
    layers = getattr(balancebench, "LAYERS", None)
    if layers is None:
        print("imports that point up: (no LAYERS in this tree)")
        return
    up = imports_that_point_up(edges, layers)
    print(f"imports that point up: {len(up)}")
    for line in up:
        print(f"  {line}")


if __name__ == "__main__":
    main()
