"""transformers' `generate` timed on whichever torch runs it (the face or upstream).

usage: gen_time.py GGUF_PATH THREADS REPS NEW_TOKENS [capture]  -> JSON on stdout

One greedy `generate` per repetition, forced to NEW_TOKENS new tokens (EOS ignored). A streamer
stamps each token as `generate` hands it out: time to first token is the stamp of the first new
token minus the call's start (the prompt's prefill and one sampling step); decode speed is the
remaining tokens over the time between the first and the last stamp. The token ids come back
too, so the driver can check that both sides generated the same text.

With `capture` (the face only), the model is handed to the native runtime with
`torchnative_face.capture` and its `generate` is timed instead: time to first token is a
one-token `generate`, decode speed the remaining tokens of a full one over the time beyond that
(EOS does not stop it, as `min_new_tokens` keeps transformers going).
"""

import json
import os
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.generation.streamers import BaseStreamer

PROMPT = ("The history of the printing press begins in the fifteenth century, when Johannes "
          "Gutenberg combined movable metal type, oil-based ink and a wooden screw press. Explain "
          "in plain words why this mattered for science, religion and ordinary readers.")


class Stamps(BaseStreamer):
    def __init__(self):
        self.times = []

    def put(self, value):
        self.times.append(time.perf_counter())

    def end(self):
        pass


def main():
    path, threads, reps, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    use_capture = sys.argv[5:] == ["capture"]
    torch.set_num_threads(threads)
    d, f = os.path.dirname(path), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    ids = tok.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    options = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False)
    ttft, decode, tokens = [], [], None
    if use_capture:
        import torchnative_face

        captured = torchnative_face.capture(model)
        prompt = ids["input_ids"]
        captured.generate(prompt, max_new_tokens=4, eos_token_id=[])  # warm-up
        for _ in range(reps):
            start = time.perf_counter()
            captured.generate(prompt, max_new_tokens=1, eos_token_id=[])
            first = time.perf_counter() - start
            start = time.perf_counter()
            out = captured.generate(prompt, max_new_tokens=new, eos_token_id=[])
            total = time.perf_counter() - start
            ttft.append(first)
            decode.append((new - 1) / (total - first))
            tokens = out[0, prompt.shape[1]:].tolist()
    model.generate(**ids, max_new_tokens=4, do_sample=False)  # warm-up
    for _ in range(0 if use_capture else reps):
        stamps = Stamps()
        start = time.perf_counter()
        out = model.generate(**ids, streamer=stamps, **options)
        # stamps.times[0] is the prompt going in; [1] the first new token.
        first, last = stamps.times[1], stamps.times[-1]
        ttft.append(first - start)
        decode.append((len(stamps.times) - 2) / (last - first))
        tokens = out[0, ids["input_ids"].shape[1]:].tolist()
    json.dump({
        "torch": torch.__version__,
        "torch_file": torch.__file__,
        "threads": torch.get_num_threads(),
        "prompt_tokens": ids["input_ids"].shape[1],
        "new_tokens": len(tokens),
        "ttft_s": statistics.median(ttft),
        "ttft_all": ttft,
        "decode_tok_s": statistics.median(decode),
        "decode_all": decode,
        "tokens": tokens,
        "eos": tok.eos_token_id,
    }, sys.stdout)


if __name__ == "__main__":
    main()
