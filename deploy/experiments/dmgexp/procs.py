"""Child processes of the experiment scripts: each started in its own
process group, so that everything it starts in turn goes with it; killed
on a timeout, on Ctrl-C, SIGTERM or SIGHUP (unwind_on_signals) and, as a
last resort, when the script exits."""
import atexit
import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

_live = set()


def start(argv, **popen_args):
    """Popen in a new session; stop() or the script's exit ends it."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True,
                         **popen_args)
    _live.add(p)
    return p


def stop(p, grace=5):
    """SIGTERM to the process group, SIGKILL after grace seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    _live.discard(p)


@atexit.register
def _stop_all():
    for p in list(_live):
        stop(p)


def run_logged(argv, log, timeout):
    """Runs argv with its output appended to log (its first line: the
    command); kills its process group on a timeout or an interrupt.
    Returns (exit code, or None after a timeout; seconds)."""
    begin = time.time()
    with open(log, "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        p = start(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            rc = p.wait(timeout=timeout)
            _live.discard(p)
        except subprocess.TimeoutExpired:
            stop(p)
            out.write(f"[killed after {timeout} s]\n".encode())
            return None, time.time() - begin
        except BaseException:
            stop(p)
            raise
    return rc, time.time() - begin


def tail_line(log):
    """The last line of a log that names an error (else its last line)."""
    try:
        lines = [l for l in Path(log).read_text(errors="replace").splitlines()
                 if l.strip() and not l.startswith("$ ")]
    except FileNotFoundError:
        return ""
    errs = [l for l in lines if "error" in l.lower()]
    return (errs or lines or [""])[-1].strip()[:300]


def unwind_on_signals():
    """SIGTERM (a batch system, `kill`) and SIGHUP (the terminal went away)
    unwind like Ctrl-C, through every finally: daemons stop, temporary
    files go. SIGINT explicitly too: a shell starts background jobs with it
    ignored."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, interrupt)


@contextlib.contextmanager
def signals_held():
    """A second Ctrl-C must not cut a teardown short: it would leave daemons."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = [signal.signal(s, signal.SIG_IGN) for s in sigs]
    try:
        yield
    finally:
        for s, h in zip(sigs, old):
            signal.signal(s, h)
