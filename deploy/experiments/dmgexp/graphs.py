"""Graph SPECs as the experiment scripts take them: a generator
(kron:S[:D], urand:S[:D]) as is; a file by path, or by name in the graphs
folder ($DMG_GRAPHS_DIR, default ../shared/graphs beside the checkout)."""
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
GENERATOR = re.compile(r"(kron|urand):\d+(:\d+)?")


class GraphNotFound(ValueError):
    """A graph file that is not there: one line."""


def graphs_dir():
    return Path(os.environ.get("DMG_GRAPHS_DIR") or REPO.parent / "shared" / "graphs")


def is_generator(spec):
    return bool(GENERATOR.fullmatch(spec))


def resolve(spec, folder=None, here=True, extensions=(".el", ".wel")):
    """A generator as is; a file as an absolute path: $VARS and ~ expanded,
    a relative one looked up in the current folder (unless here=False),
    then in folder (default graphs_dir()); "road-NY" is also found as
    road-NY.el or road-NY.wel (extensions)."""
    if is_generator(spec):
        return spec
    s = os.path.expanduser(os.path.expandvars(spec))
    if os.path.isabs(s):
        if not os.path.exists(s):
            raise GraphNotFound(f"{spec}: no such file")
        return s
    where = f"{folder}" if folder else f"{graphs_dir()} ($DMG_GRAPHS_DIR)"
    folder = Path(folder) if folder else graphs_dir()
    candidates = ([Path.cwd() / s] if here else []) + [folder / s]
    for c in candidates + [c.with_name(c.name + e) for c in candidates for e in extensions]:
        if c.exists():
            return str(c.resolve())
    raise GraphNotFound(f"{spec}: not found {'here nor ' if here else ''}in {where}")


def label(spec):
    """How plots and the CSV name a graph: a generator as is, a file by name."""
    return spec if is_generator(spec) else os.path.basename(spec)


def slug(text):
    """text as part of a file name: kron:16 -> kron16."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "", text.replace(":", "")) or "x"
