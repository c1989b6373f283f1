"""CSV files of the experiment scripts: rows are dicts (read back: every
value a string); the header is the first row's keys unless given."""
import contextlib
import csv
import sys


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fields_of(rows):
    """Every key of the rows, in first-seen order."""
    return list(dict.fromkeys(k for r in rows for k in r))


def write(path, rows, fields=None):
    """All rows at once; path "-" is stdout."""
    rows = list(rows)
    with _open(path) as f:
        w = csv.DictWriter(f, fieldnames=fields or fields_of(rows))
        w.writeheader()
        w.writerows(rows)


class Writer:
    """Rows written as they come, each flushed: an interrupted experiment
    keeps what it measured."""

    def __init__(self, path, fields):
        self.file = open(path, "w", newline="")
        self.csv = csv.DictWriter(self.file, fieldnames=fields)
        self.csv.writeheader()
        self.file.flush()

    def row(self, r):
        self.csv.writerow(r)
        self.file.flush()

    def close(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def _open(path):
    if path == "-":
        yield sys.stdout
        return
    with open(path, "w", newline="") as f:
        yield f
