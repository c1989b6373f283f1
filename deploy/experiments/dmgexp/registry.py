"""What a dmg binary offers, asked of the binary itself: the algorithm
names come from `dmg help`, so that a script never carries a list that a
new algorithm leaves behind."""
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BUILT_DMG = REPO / "build" / "release" / "tools" / "dmg"


class DmgMissing(Exception):
    """No usable dmg binary: one line, naming the path and the way out."""


def default_dmg():
    """$DMG_BIN, else the release build of this checkout."""
    return os.environ.get("DMG_BIN") or str(BUILT_DMG)


def check(dmg):
    """The path of an executable dmg, or DmgMissing."""
    path = dmg if os.path.sep in dmg else shutil.which(dmg)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise DmgMissing(f"dmg: {dmg} is not an executable (build it: cmake --build "
                         "build/release; or give --dmg PATH or $DMG_BIN)")
    return path


# `dmg help` lists them as "  NAME  description" under this heading; a
# description that wraps continues on lines indented further.
HEADING = "algorithms (--algo=NAME):"
ENTRY = re.compile(r"  ([a-z][a-z0-9_]*)  +\S")


def parse_algorithms(help_text):
    names, inside = [], False
    for line in help_text.splitlines():
        if line.strip() == HEADING:
            inside = True
        elif inside and line and not line.startswith(" "):
            break
        elif inside:
            m = ENTRY.match(line)
            if m:
                names.append(m.group(1))
    return names


@functools.lru_cache(maxsize=None)
def algorithms(dmg):
    """The --algo names this dmg knows, in `dmg help`'s order."""
    path = check(dmg)
    try:
        r = subprocess.run([path, "help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DmgMissing(f"dmg: `{dmg} help` failed: {e}")
    names = parse_algorithms(r.stdout)
    if not names:
        raise DmgMissing(f"dmg: `{dmg} help` (exit {r.returncode}) lists no algorithms "
                         f"under {HEADING!r}: is it a dmg binary?")
    return tuple(names)
