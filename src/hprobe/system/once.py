"""A value taken once per process, however many threads ask for it first.

`functools.cache` lets two threads that ask together both compute (a
fetched release's thread and the main one each hashed hprobe's code and
listed sys.path's distributions, 30-60 ms of a warm check). Here the first
caller computes under a lock and the others wait for its value. The lock is
made new in a forked child: a probe split forks while another thread may
hold it, and the child would otherwise wait on it forever."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    """`compute`, as a decorator: taken once per process (see the module's note)."""

    def __init__(self, compute: Callable[[], T]):
        self.__wrapped__ = compute
        self._lock = threading.Lock()
        self._value: list[T] = []  # empty until taken
        functools.update_wrapper(self, compute)
        os.register_at_fork(after_in_child=self._new_lock)

    def __call__(self) -> T:
        with self._lock:
            if not self._value:
                self._value.append(self.__wrapped__())
            return self._value[0]

    def cache_clear(self) -> None:
        """Forget the value: the next caller computes it again."""
        with self._lock:
            self._value.clear()

    def _new_lock(self) -> None:
        self._lock = threading.Lock()
