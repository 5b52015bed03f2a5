#!/usr/bin/env python3
"""kernel_spread — how far qgate's numbers move between kernel sets.

usage: tools/kernel_spread.py [--qgate build/qgate] [--shared ../shared]
                              [--chunks 400] [--tokens 48]

Runs, under every kernel set this CPU runs (QG_CPU=portable ... the best;
see backends/kernel_set.h), one lockstep perplexity run of every shared
stories260K GGUF and every simulated format against its F32 original (ctx
128 on TinyStories, as llama-perplexity's reference runs), and greedy
generations of every model. Prints, per model, the PPL under each set, the
worst relative PPL and absolute KLD difference between any two sets, and whether the
greedy texts agree; then the worst case over all models: the figures
docs/engine.md states and the tests' tolerances rest on.
"""
import argparse
import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile

SIMULATED = ["w=fp8", "w=int8", "w=int4", "w=mxfp4", "w=nvfp4", "a=int8", "w=nvfp4&a=nvfp4",
             "w=nvfp4&a=nvfp4&kv=nvfp4", "w=mxfp6&a=mxfp8"]
PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went"]


def sets_of(qgate):
    out = subprocess.run([qgate, "--version"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("cpu sets:"):
            return line.split(":", 1)[1].split()
    sys.exit("kernel_spread: qgate --version printed no 'cpu sets:' line")


def groups(shared):
    """(name, baseline path, [(model name, spec)]) per lockstep run"""
    g = []
    d = os.path.join(shared, "models/stories260K/gguf")
    base = os.path.join(d, "stories260K-F32.gguf")
    ms = [(f[len("stories260K-"):-5], os.path.join(d, f)) for f in sorted(os.listdir(d))
          if f.endswith(".gguf") and f != "stories260K-F32.gguf"]
    ms += [(n + "?a=llamacpp", p + "?a=llamacpp") for n, p in ms if n in ("F16", "Q4_K_M")]
    g.append(("stories260K", base, ms))
    d = os.path.join(shared, "models/stories260K-pad256")
    base = os.path.join(d, "stories260K-pad256-F32.gguf")
    ms = [(f[len("stories260K-pad256-"):-5], os.path.join(d, f)) for f in sorted(os.listdir(d))
          if f.endswith(".gguf") and not f.endswith("-F32.gguf")]
    ms += [(n + "?a=llamacpp", p + "?a=llamacpp") for n, p in ms if n in ("Q8_0", "Q4_K_M",
                                                                          "Q2_K")]
    ms += [("F32?" + q, base + "?" + q) for q in SIMULATED]
    g.append(("stories260K-pad256", base, ms))
    return g


def lockstep(qgate, kset, text, base, models, chunks, tmp):
    data = open(text, "rb").read()
    suite = {"name": "spread", "tasks": [{
        "name": "ppl", "kind": "perplexity", "data": text,
        "sha256": hashlib.sha256(data).hexdigest(), "protocol": "llamacpp", "ctx": 128,
        "chunks": chunks}]}
    sp = os.path.join(tmp, "suite.json")
    json.dump(suite, open(sp, "w"))
    db = os.path.join(tmp, "spread-%s.db" % kset)
    if os.path.exists(db):
        os.remove(db)
    args = [qgate, "run", "--suite", sp, "--db", db, "-q", "--cpu", kset, "--model",
            "F32=" + base]
    for i, (_, spec) in enumerate(models):
        args += ["--model", "m%d=%s" % (i, spec)]
    subprocess.run(args, check=True)
    con = sqlite3.connect(db)
    res = {}
    for model, nll, ntok, kld in con.execute(
            "SELECT model, sum(nll), sum(n_tokens), sum(kld_sum) FROM item_results "
            "GROUP BY model"):
        res[model] = (math.exp(nll / ntok), (kld or 0) / ntok)
    return res


def generations(qgate, kset, spec, n):
    out = []
    for p in PROMPTS:
        r = subprocess.run([qgate, "generate", spec, "-p", p, "-n", str(n), "--cpu", kset],
                           check=True, capture_output=True, text=True)
        out.append(r.stdout)
    return out


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--qgate", default=os.path.join(here, "..", "build", "qgate"))
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--chunks", type=int, default=400)
    ap.add_argument("--tokens", type=int, default=48)
    a = ap.parse_args()
    text = os.path.join(a.shared, "data/tinystories_valid_head.txt")
    if not os.path.exists(text):
        sys.exit("kernel_spread: %s is absent" % text)
    ksets = sets_of(a.qgate)
    print("kernel sets: %s; ctx 128, %d chunks of %s" % (", ".join(ksets), a.chunks, text))
    worst_ppl = worst_kld = 0.0
    n_models = n_same_text = 0
    with tempfile.TemporaryDirectory() as tmp:
        for gname, base, models in groups(a.shared):
            per = {k: {} for k in ksets}
            for b in range(0, len(models), 30):  # qgate runs at most 32 models at once
                part = models[b:b + 30]
                for k in ksets:
                    r = lockstep(a.qgate, k, text, base, part, a.chunks, tmp)
                    per[k]["F32"] = r["F32"]
                    per[k].update({"m%d" % (b + i): r["m%d" % i] for i in range(len(part))})
            print("\n%s (KLD against %s)" % (gname, os.path.basename(base)))
            print("%-28s " % "model" + " ".join("%12s" % k for k in ksets) +
                  " %10s %10s %10s %6s" % ("PPL rel", "KLD", "KLD abs", "text"))
            names = [("F32", base)] + [("m%d" % i, spec) for i, (_, spec) in enumerate(models)]
            labels = ["F32"] + [n for n, _ in models]
            for (key, spec), label in zip(names, labels):
                ppl = [per[k][key][0] for k in ksets]
                kld = [per[k][key][1] for k in ksets]
                dp = (max(ppl) - min(ppl)) / min(ppl)
                dk = max(kld) - min(kld)
                texts = [generations(a.qgate, k, spec, a.tokens) for k in ksets]
                same = all(t == texts[0] for t in texts)
                n_models += 1
                n_same_text += same
                worst_ppl, worst_kld = max(worst_ppl, dp), max(worst_kld, dk)
                print("%-28s " % label + " ".join("%12.7f" % p for p in ppl) +
                      " %10.2e %10.2e %10.2e %6s" % (dp, max(kld), dk, "same" if same else "DIFF"))
    print("\nworst over %d models: PPL %.2e relative, KLD %.2e absolute; greedy texts "
          "identical under every set for %d of %d" % (n_models, worst_ppl, worst_kld,
                                                       n_same_text, n_models))


if __name__ == "__main__":
    main()
