"""`Progress`: phase names with elapsed time on one line of a terminal (the CLI, `optimize(progress=...)`)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import Any, TextIO


# ---------------------------------------------------------------------------------------------------
# progress on a terminal


class Progress:
    """Phase names with elapsed time on one line of a terminal, redrawn while a phase runs:

        eqsat: model.onnx  load 0.01 s > fold 0.21 s > encode 0.20 s > saturate 3.4 s ...   [3.9 s]

    Call it with each phase's name as the phase starts (`optimize(..., progress=p)` does). Nothing is
    written unless the stream is a terminal, and nothing before `delay` seconds, so short runs and
    captured output (tests, pipes, CI logs) stay exactly as they were. The line is erased on exit.
    """

    def __init__(
        self, label: str = "", stream: TextIO | None = None, *, delay: float = 0.5, interval: float = 0.1
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label, self.delay, self.interval = label, delay, interval
        self.enabled = _is_terminal(self.stream)
        self.phases: list[tuple[str, float]] = []  # (name, start)
        self._start = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = 0

    def __call__(self, phase: str) -> None:
        with self._lock:
            self.phases.append((phase, time.perf_counter()))

    def line(self, now: float | None = None, width: int = 10_000) -> str:
        """The status line, at most `width` characters: the oldest phases are dropped first."""
        now = time.perf_counter() if now is None else now
        parts = []
        for k, (name, start) in enumerate(self.phases):
            end = self.phases[k + 1][1] if k + 1 < len(self.phases) else now
            parts.append(f"{name} {end - start:.2f} s" + (" ..." if k + 1 == len(self.phases) else ""))
        head = f"eqsat: {os.path.basename(self.label)}  " if self.label else "eqsat: "
        tail = f"   [{now - self._start:.1f} s]"
        shown, dropped = list(parts), False
        while len(shown) > 1 and len(head) + len(" > ".join(shown)) + len(tail) + 6 > width:
            shown.pop(0)
            dropped = True
        text = head + ("... > " if dropped else "") + " > ".join(shown) + tail
        return text if len(text) <= width else text[: max(0, width - 3)] + "..."

    def _draw(self) -> None:
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        with self._lock:
            text = self.line(width=width)
        self.stream.write("\r" + text.ljust(self._drawn))
        self.stream.flush()
        self._drawn = len(text)

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            self._draw()
            self._stop.wait(self.interval)

    def __enter__(self) -> "Progress":
        self._start = time.perf_counter()
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="eqsat-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self._drawn:
                self.stream.write("\r" + " " * self._drawn + "\r")
                self.stream.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # closed or not a real file
        return False
