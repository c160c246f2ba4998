"""Drive `torchnative chat` through a real pseudo-terminal, as a person would.

Usage: python3 drive_chat.py BINARY MODEL
Types a question whose answer is long, presses Ctrl-C once the answer streams, then /reset, a
short question, and Ctrl-D. Prints a JSON report of what the screen showed.
"""
import json
import os
import pty
import select
import sys
import time

binary, model = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "chat", model, "--max-tokens", "400"])

screen = b""


def read_for(seconds, until=None):
    global screen
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return False
            if not chunk:
                return False
            screen += chunk
            if until is not None and until(screen):
                return True
    return True


def type_line(text):
    os.write(fd, text.encode() + b"\r")


report = {}
read_for(30, lambda s: b"> " in s)
report["prompt_shown"] = b"> " in screen
type_line("Write a long story about a dragon who learns to cook.")
before = len(screen)
read_for(30, lambda s: len(s) > before + 200)
report["answer_streamed"] = len(screen) > before + 200
os.write(fd, b"\x03")  # Ctrl-C
read_for(15, lambda s: s.count(b"> ") >= 2)
report["prompt_after_ctrl_c"] = screen.count(b"> ") >= 2
type_line("/reset")
read_for(10, lambda s: b"conversation cleared" in s)
report["reset"] = b"conversation cleared" in screen
mark = len(screen)
type_line("What is 2 plus 2?")
read_for(60, lambda s: s[mark:].count(b"> ") >= 1 and b"tokens/s" in s[mark:])
report["second_answer"] = screen[mark:].decode("utf-8", "replace")
os.write(fd, b"\x04")  # Ctrl-D at the prompt: clean exit
exit_status = None
for _ in range(100):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        exit_status = os.waitstatus_to_exitcode(status)
        break
    read_for(0.1)
    time.sleep(0.1)  # read_for returns at once when the terminal has closed
report["exit_code"] = exit_status
print(json.dumps(report))
