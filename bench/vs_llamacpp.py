#!/usr/bin/env python3
"""vs_llamacpp — qgate against llama.cpp on the same files, side by side.

usage: bench/vs_llamacpp.py --llama BUILD_DIR [--qgate build/qgate] [--threads T]
                            [--reps N] [--text FILE] [--ctx C] [--chunks K]
                            [--tokens N] [--no-decode] [--no-prefill] [--a-llamacpp]
                            MODEL.gguf...
       bench/vs_llamacpp.py --a-vs-plain [options as above, no --llama] MODEL.gguf...

For every model, N rounds, each running the two programs one after the
other (qgate first in even rounds, llama.cpp first in odd ones), with the
same thread count:

- prefill: whole-process wall time of `qgate ppl MODEL --text FILE --ctx C
  --chunks K --threads T` against `llama-perplexity -m MODEL -f FILE -c C
  --chunks K -t T -b C` (load, tokenization and scoring included on both
  sides); the ratio is llama.cpp's time over qgate's (above 1: qgate is
  faster);
- decode: llama-bench's `tg` tokens/s (`-p 0 -n N -t T -r 1`) against
  qgate's, measured as (N - 1) / (wall(generate -n N) - wall(generate -n 1))
  with a fixed prompt, so load and prompt cancel; a model that stops early
  (end of sequence) is reported as such, not timed.

--no-decode and --no-prefill leave a phase out. --a-llamacpp runs qgate
as MODEL?a=llamacpp (llama.cpp's 8-bit activations and f16 attention
sums, the same arithmetic as llama.cpp's).

--a-vs-plain puts qgate's plain mode where llama.cpp stood: qgate as
MODEL?a=llamacpp against qgate as MODEL, alternately, the same phases and
ratios (above 1: a=llamacpp is faster than plain); no llama.cpp needed.

Prints one table row per model and phase: min, median and max of the
per-round ratios, and each side's median. BUILD_DIR is a llama.cpp CMake
build folder (its bin/ holds llama-perplexity and llama-bench). Exit 0, or
1 when a program fails (its stderr tail is printed).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")  # random models print any bytes
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}\n")
        sys.exit(1)
    return dt, p.stdout + p.stderr


def qgate_model(a, model, plain=False):
    return model + "?a=llamacpp" if (a.a_llamacpp or a.a_vs_plain) and not plain else model


def qgate_decode(a, model, plain=False):
    base = [a.qgate, "generate", qgate_model(a, model, plain), "--prompt", "Once upon a time", "--threads",
            str(a.threads)]
    t1, o1 = run(base + ["-n", "1"])
    tn, on = run(base + ["-n", str(a.tokens)])
    if len(on) <= len(o1) or tn <= t1:
        return None
    return (a.tokens - 1) / (tn - t1)


def llama_decode(a, model):
    if a.a_vs_plain:
        return qgate_decode(a, model, plain=True)
    _, out = run([os.path.join(a.llama, "bin", "llama-bench"), "-m", model, "-p", "0", "-n",
                  str(a.tokens), "-t", str(a.threads), "-r", "1"])
    m = re.search(r"\|\s*tg\d+\s*\|\s*([\d.]+)", out)
    if not m:
        sys.stderr.write(f"llama-bench printed no tg figure:\n{out[-2000:]}\n")
        sys.exit(1)
    return float(m.group(1))


def prefill(a, model, which):
    if which == "qgate" or a.a_vs_plain:
        return run([a.qgate, "ppl", qgate_model(a, model, which != "qgate"), "--text", a.text, "--ctx", str(a.ctx), "--chunks",
                    str(a.chunks), "--threads", str(a.threads)])[0]
    return run([os.path.join(a.llama, "bin", "llama-perplexity"), "-m", model, "-f", a.text,
                "-c", str(a.ctx), "--chunks", str(a.chunks), "-t", str(a.threads), "-b",
                str(a.ctx)])[0]


def row(name, phase, ratios, q, l, unit):
    if not ratios:
        print(f"| {name} | {phase} | stopped early | | | | |")
        return
    print(f"| {name} | {phase} | {min(ratios):.2f} | {statistics.median(ratios):.2f} | "
          f"{max(ratios):.2f} | {statistics.median(q):.3g} {unit} | "
          f"{statistics.median(l):.3g} {unit} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama")
    ap.add_argument("--qgate", default="build/qgate")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--text", default="../shared/data/tinystories_valid_head.txt")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--no-decode", action="store_true")
    ap.add_argument("--no-prefill", action="store_true")
    ap.add_argument("--a-llamacpp", action="store_true")
    ap.add_argument("--a-vs-plain", action="store_true")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    if not a.llama and not a.a_vs_plain:
        ap.error("--llama BUILD_DIR is needed (or --a-vs-plain)")
    if a.a_vs_plain:
        print(f"threads {a.threads}, {a.reps} rounds; ratio = plain time / a=llamacpp time "
              f"(above 1: a=llamacpp faster)")
        print("| model | phase | min | median | max | a=llamacpp | plain |")
    else:
        print(f"threads {a.threads}, {a.reps} rounds; ratio = llama.cpp time / qgate time "
              f"(above 1: qgate faster){'; qgate as a=llamacpp' if a.a_llamacpp else ''}")
        print("| model | phase | min | median | max | qgate | llama.cpp |")
    print("|---|---|---|---|---|---|---|")
    for model in a.models:
        name = os.path.basename(model)
        pr, pq, pl, dr, dq, dl = [], [], [], [], [], []
        for r in range(a.reps):
            order = ("qgate", "llama") if r % 2 == 0 else ("llama", "qgate")
            if not a.no_prefill:
                t = {w: prefill(a, model, w) for w in order}
                pq.append(t["qgate"]), pl.append(t["llama"]), pr.append(t["llama"] / t["qgate"])
            if a.no_decode:
                continue
            s = {}
            for w in order:
                s[w] = qgate_decode(a, model) if w == "qgate" else llama_decode(a, model)
            if s["qgate"] is not None and s["llama"] is not None:
                dq.append(s["qgate"]), dl.append(s["llama"]), dr.append(s["qgate"] / s["llama"])
        if not a.no_prefill:
            row(name, "prefill (s)", pr, pq, pl, "s")
        if not a.no_decode:
            row(name, "decode (tok/s)", dr, dq, dl, "tok/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
