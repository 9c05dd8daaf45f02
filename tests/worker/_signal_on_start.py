"""A spawn context whose child gets a signal the moment it exists, for the start-up window test.

Its own small module: the spawned child unpickles :class:`SignalOnStartProcess` (it imports this module),
so nothing heavy (pytest) comes with it.
"""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any


class SignalOnStartProcess(SpawnProcess):
    """A spawned process that sends itself ``signum`` from the parent as soon as its pid is known: right
    after ``start`` returns, while the child interpreter is still starting up."""

    signum: int = 0

    def start(self) -> None:
        super().start()
        assert self.pid is not None
        os.kill(self.pid, self.signum)
        SignalOnStartContext.signalled.append(self.pid)


class SignalOnStartContext:
    """Stands in for the process worker's ``spawn`` context: real pipes, real spawned processes."""

    signalled: list[int] = []  # noqa: RUF012  # the pids signalled, in the test's process only

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self._spawn = multiprocessing.get_context("spawn")

    def Pipe(self, duplex: bool = True) -> tuple[Connection, Connection]:  # multiprocessing's name
        return self._spawn.Pipe(duplex=duplex)

    def Process(self, **kwargs: Any) -> SignalOnStartProcess:  # multiprocessing's name
        process = SignalOnStartProcess(**kwargs)
        process.signum = self.signum
        return process
