"""A fork server for the SIGTERM trials: imports ``ctxutil_otel`` once, then forks one real
``ctxutil-otel serve`` process per request, so 30 trials do not pay 30 interpreter start-ups and imports
(about 2 s of CPU each). Each child is a fresh process whose main thread runs the CLI's ``main``, exactly
as the console script does; it is signalled and reaped like any other process.

Protocol (lines on stdin / stdout): ``start <key> <stderr-file> <serve args...>`` -> ``started <key>
<pid>``; when a child exits -> ``exited <pid> <status>`` (the exit code, or ``-signal``). EOF on stdin:
the zygote exits once its children have.
"""

from __future__ import annotations

import os
import select
import signal
import sys

import ctxutil_otel.cli  # the import the children share


def _child(stderr_file: str, args: list[str]) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(stderr_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err, 2)
    status = 70
    try:
        status = ctxutil_otel.cli.main(args)
    finally:
        sys.stderr.flush()
        os._exit(status)


def main() -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: set[int] = set()
    open_input = True
    while open_input or children:
        ready, _, _ = select.select([sys.stdin, wake_r] if open_input else [wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                children.discard(pid)
                print(f"exited {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
        if open_input and sys.stdin in ready:
            line = sys.stdin.readline()
            if not line:
                open_input = False
                continue
            _, key, stderr_file, *args = line.split()
            pid = os.fork()
            if pid == 0:
                _child(stderr_file, args)
            children.add(pid)
            print(f"started {key} {pid}", flush=True)


if __name__ == "__main__":
    main()
