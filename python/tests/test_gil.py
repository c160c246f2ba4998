"""Model work releases the GIL: another Python thread keeps running during a generation."""

from __future__ import annotations

import _thread
import signal
import threading
import time

import pytest

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
    # call (one 5 ms switch interval), not for a good part of the whole generation (measured:
    # about half of it on a loaded two-core machine; 0.1 leaves room for heavier load).
    assert during > 0.1 * rate * elapsed, (during, rate, elapsed)


@pytest.fixture
def sigint_handled():
    """Python's own SIGINT handler for the test. A process started as a background job of a
    non-interactive shell (`cmd &`) inherits SIGINT ignored, Python then leaves it ignored, and
    `_thread.interrupt_main` does nothing: Ctrl-C cannot interrupt anything there."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("how", ["generate", "session"])
def test_ctrl_c_interrupts_a_generation(llm, how, sigint_handled):
    # Forced to run to its limit: far longer than the interrupt delay.
    kw = dict(max_new_tokens=1500, min_new_tokens=1500)
    session = llm.session(n_ctx=2048)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        if how == "generate":
            llm.generate(RAW_PROMPTS[1], **kw)
        else:
            session.send("Write a long story.", **kw)
    elapsed = time.perf_counter() - start
    timer.join()
    rate = llm.generate(RAW_PROMPTS[1], max_new_tokens=40, min_new_tokens=40).timings.decode_tokens_per_second
    # Stopped soon after the interrupt, not after decoding all the tokens asked for.
    assert elapsed < 1500 / rate / 3, (elapsed, rate)
    # The interrupted session is usable again (its cache was given back).
    assert session.send("Hi", max_new_tokens=3).usage.completion_tokens <= 3
