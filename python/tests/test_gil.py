"""Model work releases the GIL: another Python thread keeps running during a generation."""

from __future__ import annotations

import threading
import time

from conftest import RAW_PROMPTS


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop:
            self.count += 1


def test_other_threads_run_while_generating(llm):
    counter = Counter()
    counter.thread.start()
    try:
        # The counter's rate with the main thread idle (sleeping releases the GIL).
        c0 = counter.count
        time.sleep(0.3)
        rate = (counter.count - c0) / 0.3
        start_count, start = counter.count, time.perf_counter()
        llm.generate(RAW_PROMPTS[1], max_new_tokens=64)
        elapsed = time.perf_counter() - start
        during = counter.count - start_count
    finally:
        counter.stop = True
        counter.thread.join()
    assert elapsed > 0.05, "the generation was too short to tell"
    # Had the GIL been held, the counter could only run in the few milliseconds around the
    # call (one switch interval), not for a good part of the whole generation.
    assert during > 0.2 * rate * elapsed, (during, rate, elapsed)
