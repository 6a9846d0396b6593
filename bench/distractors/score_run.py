#!/usr/bin/env python3
"""Scores one `lookalike search --format json` run of the dev-set queries for
bench/distractor_curve.sh, overall, per group and per half of a fixed split.
Python 3 standard library only.

usage: score_run.py DEVSET RESULTS_JSONL OUT_DIR   one table row (JSON) on stdout
       score_run.py DEVSET --print-split            the split, one query a line

Writes OUT_DIR/results.tsv (the `--format tsv` lines: query, rank, path,
score, in the engine's order), OUT_DIR/per_query.tsv (AP and first relevant
rank, from evaluate.py), OUT_DIR/hits.tsv (rank, inliers, similarity,
colour of every hit, to study what a distractor displaced) and, per half,
OUT_DIR/{tune,report}/{gt.csv,results.tsv,scores.json}.

The split (documented in bench/README.md, "Distractors"): queries are
grouped by what they must find. Two queries are in one group when their
`relevant` db images (queries_meta.csv) overlap, transitively, so all copies
of one db picture, and all views of one scene, fall in the same half and no
db image is relevant in both. A group's key is its smallest relevant db
path; the group is "tune" if the first byte of SHA-256(key) is even, else
"report". Settings may be chosen on "tune" only; "report" is the
out-of-sample figure for anything chosen that way.
"""
import csv
import hashlib
import json
import os
import subprocess
import sys


def split_halves(devset):
    """query path (as in gt.csv) -> 'tune' | 'report'."""
    with open(os.path.join(devset, "queries_meta.csv"), newline="") as f:
        meta = list(csv.DictReader(f))
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for row in meta:
        rel = [r for r in row["relevant"].split("|") if r]
        for r in rel[1:]:
            parent[find(r)] = find(rel[0])
    members = {}
    for row in meta:
        rel = [r for r in row["relevant"].split("|") if r]
        members.setdefault(find(rel[0]), set()).update(rel)
    half = {}
    for row in meta:
        rel = [r for r in row["relevant"].split("|") if r]
        key = min(members[find(rel[0])])
        even = hashlib.sha256(key.encode()).digest()[0] % 2 == 0
        half[row["query"]] = "tune" if even else "report"
    return half


def evaluate(scorer, gt, results, groups=None, per_query=None):
    cmd = [sys.executable, scorer, gt, results]
    if groups:
        cmd += ["--groups", groups]
    if per_query:
        cmd += ["--per-query", per_query]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv):
    if len(argv) == 3 and argv[2] == "--print-split":
        for q, h in sorted(split_halves(argv[1]).items()):
            print("%s\t%s" % (q, h))
        return 0
    if len(argv) != 4:
        sys.exit(__doc__)
    devset, results_jsonl, out = argv[1:]
    scorer = os.path.join(os.path.dirname(os.path.abspath(devset)), "evaluate.py")
    os.makedirs(out, exist_ok=True)

    seconds, tsv, hits = [], [], []
    with open(results_jsonl, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            q = json.loads(line)
            if "error" in q:
                print("score_run: query failed: %s" % line.strip(), file=sys.stderr)
                continue
            seconds.append(q["seconds"])
            for h in q["results"]:
                tsv.append("%s\t%d\t%s\t%.6f\n" % (q["query"], h["rank"], h["path"], h["score"]))
                hits.append("%s\t%d\t%s\t%.6f\t%d\t%.6f\t%.4f\n" % (
                    q["query"], h["rank"], h["path"], h["score"], h.get("inliers", -1),
                    h["similarity"], h.get("colour", -1)))
    with open(os.path.join(out, "results.tsv"), "w", encoding="utf-8") as f:
        f.writelines(tsv)
    with open(os.path.join(out, "hits.tsv"), "w", encoding="utf-8") as f:
        f.write("query\trank\tpath\tscore\tinliers\tsimilarity\tcolour\n")
        f.writelines(hits)

    gt = os.path.join(devset, "gt.csv")
    meta = os.path.join(devset, "queries_meta.csv")
    full = evaluate(scorer, gt, os.path.join(out, "results.tsv"), meta,
                    os.path.join(out, "per_query.tsv"))
    groups = full.get("by_group", {})
    row = {
        "mAP": full["mAP"],
        "copy": groups.get("copy", {}).get("mAP"),
        "copy:hard": groups.get("copy:hard", {}).get("mAP"),
        "mv": groups.get("mv", {}).get("mAP"),
        "n_queries": full["n_queries"],
        "no_results": full["no_results"],
    }

    # Per half: the ground truth and results of its queries only, scored
    # with --root at the set so paths match as in the full run.
    half = split_halves(devset)
    with open(gt, newline="") as f:
        gt_rows = list(csv.reader(f))
    for name in ("tune", "report"):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        keep = {q for q, h in half.items() if h == name}
        with open(os.path.join(d, "gt.csv"), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(gt_rows[0])
            w.writerows(r for r in gt_rows[1:] if r and r[0] in keep)
        with open(os.path.join(d, "results.tsv"), "w", encoding="utf-8") as f:
            f.writelines(l for l in tsv if "queries/" + os.path.basename(l.split("\t", 1)[0]) in keep)
        cmd = [sys.executable, scorer, os.path.join(d, "gt.csv"), os.path.join(d, "results.tsv"),
               "--root", devset]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        with open(os.path.join(d, "scores.json"), "w") as f:
            json.dump(res, f)
        row[name] = res["mAP"]
        row["n_" + name] = res["n_queries"]

    s = sorted(seconds)
    row["query_ms_p50"] = round(1000 * s[len(s) // 2], 1) if s else None
    row["query_ms_p90"] = round(1000 * s[int(len(s) * 0.9)], 1) if s else None
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
