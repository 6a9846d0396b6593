#!/usr/bin/env python3
"""Precision and recall of search's match levels (search/match_level.h).

usage: score_levels.py DEVSET EDITS_TSV RUN_DIR... [--json]

Each RUN_DIR holds one database's results (`search -k 10 --format json`):
devset.jsonl (the development set's queries), edits.jsonl (the edits
bench/make_edits wrote, listed in EDITS_TSV) and mirrored.jsonl (the
development set's queries flipped left to right); its name labels the row
(e.g. n0, n10000).

The truth of a (query, hit) pair is a level:
  - a development-set copy query and its original: copy; a multi-view query
    and each of its relevant images: view. The one exception is the
    copy-move forgery pair (source opencv_ela/ela_modified): its query is
    the database photo with a region copied within it, an edit, so copy;
  - an edit and its source: the level EDITS_TSV gives (identical, copy,
    part); a mirrored copy query and its original: copy;
  - any query and a database image of the same scene as its relevant images
    (the multi-view relevant lists, joined; and EXTRA_SCENES): view;
  - anything else (other dev images, the unrelated images): none.
A pair missing from a query's results counts as labelled none.

For each level L (identical, copy, part, view) the table gives, over every
(query, hit) pair with label >= L or truth >= L: precision = share of pairs
labelled >= L whose truth is >= L (what `search --min-level L` returns is
right), and recall = share of pairs with truth >= L labelled >= L. "At least
L" is what --min-level keeps, so a crop labelled part counts as a correct
part and a missed copy.
"""
import csv
import json
import os
import sys

LEVELS = ["none", "view", "part", "copy", "identical"]
RANK = {name: i for i, name in enumerate(LEVELS)}


def dev_key(path):
    """'db/<relative path>' for a development-set image, else None."""
    marker = "/db/"
    at = path.rfind(marker)
    if at < 0 or "/distractors/" in path:
        return None
    return "db/" + path[at + len(marker):]


# Database images of one scene that the development set's relevant lists do
# not join (they are not relevant to any query): two photos of OpenCV's
# calibration chessboard.
EXTRA_SCENES = [["db/opencv/left01.jpg", "db/opencv/right07.jpg"]]


def scene_groups(devset):
    """db key -> frozenset of the db keys of its scene (multi-view relevant
    lists joined, and EXTRA_SCENES)."""
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    with open(os.path.join(devset, "queries_meta.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["part"] != "mv":
                continue
            rel = [r for r in row["relevant"].split("|") if r]
            for r in rel[1:]:
                parent[find(r)] = find(rel[0])
    for scene in EXTRA_SCENES:
        for r in scene[1:]:
            parent[find(r)] = find(scene[0])
    members = {}
    for x in list(parent):
        members.setdefault(find(x), set()).add(x)
    return {x: frozenset(members[find(x)]) for x in parent}


def dev_truth(devset):
    """query basename -> {db key: truth level}."""
    groups = scene_groups(devset)
    truth = {}
    with open(os.path.join(devset, "queries_meta.csv"), newline="") as f:
        for row in csv.DictReader(f):
            rel = [r for r in row["relevant"].split("|") if r]
            level = "copy" if row["part"] == "copy" else "view"
            if row["source"].startswith("opencv_ela/ela_modified"):
                level = "copy"
            t = {}
            for r in rel:
                for g in groups.get(r, ()):
                    t[g] = "view"
            for r in rel:
                t[r] = level
            truth[os.path.basename(row["query"])] = t
    return truth


def edit_truth(devset, edits_tsv):
    """edit basename -> ({db key: truth level}, edit name)."""
    groups = scene_groups(devset)
    truth = {}
    with open(edits_tsv, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            source = "db/" + row["source"]
            t = {g: "view" for g in groups.get(source, ())}
            t[source] = row["level"]
            truth[os.path.basename(row["edit"])] = (t, row["name"])
    return truth


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pairs(results, truth_of):
    """[(truth, label, query, key, rank)] for every hit and every missed true pair."""
    out = []
    for r in results:
        q = os.path.basename(r["query"])
        truth = truth_of(q)
        if truth is None:
            continue
        seen = set()
        for h in r["results"]:
            key = dev_key(h["path"])
            seen.add(key)
            out.append((truth.get(key, "none"), h["level"], q, key, h["rank"]))
        for key, level in truth.items():
            if key not in seen:
                out.append((level, "none", q, key, None))
    return out


def precision_recall(ps, level):
    k = RANK[level]
    labelled = [p for p in ps if RANK[p[1]] >= k]
    true = [p for p in ps if RANK[p[0]] >= k]
    hit = [p for p in labelled if RANK[p[0]] >= k]
    prec = len(hit) / len(labelled) if labelled else None
    rec = sum(1 for p in true if RANK[p[1]] >= k) / len(true) if true else None
    return prec, rec, len(labelled), len(true)


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    devset, edits_tsv, runs = argv[1], argv[2], argv[3:]
    dev = dev_truth(devset)
    copy_queries = set()
    with open(os.path.join(devset, "queries_meta.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["part"] == "copy":
                copy_queries.add(os.path.basename(row["query"]))
    edits = edit_truth(devset, edits_tsv)
    report = {}
    for run in runs:
        name = os.path.basename(os.path.normpath(run))
        sets = {}
        sets["devset"] = pairs(load(os.path.join(run, "devset.jsonl")), dev.get)
        sets["edits"] = pairs(load(os.path.join(run, "edits.jsonl")),
                              lambda q: edits[q][0] if q in edits else None)
        # Mirrored copy queries: each flipped copy query against its original.
        mirror_truth = {}
        for q in copy_queries:
            stem = os.path.splitext(q)[0]
            mirror_truth[stem + "__mirror.jpg"] = {k: v for k, v in dev[q].items()}
        mirrored = load(os.path.join(run, "mirrored.jsonl"))
        sets["mirrored"] = pairs(mirrored, mirror_truth.get)
        sets["all"] = sets["devset"] + sets["edits"] + sets["mirrored"]
        row = {}
        for s, ps in sets.items():
            row[s] = {lv: precision_recall(ps, lv) for lv in ["identical", "copy", "part", "view"]}
        # Per edit: share found at its level or above, and ranked first.
        per_edit = {}
        for r in load(os.path.join(run, "edits.jsonl")):
            q = os.path.basename(r["query"])
            if q not in edits:
                continue
            t, edit = edits[q]
            source = [k for k, v in t.items() if v != "view"][0]
            want = t[source]
            got = "none"
            first = False
            for h in r["results"]:
                if dev_key(h["path"]) == source:
                    got = h["level"]
                    first = h["rank"] == 1
            e = per_edit.setdefault(edit, {"n": 0, "at_level": 0, "at_least": 0, "first": 0,
                                           "level": want})
            e["n"] += 1
            e["at_level"] += got == want
            e["at_least"] += RANK[got] >= RANK[want]
            e["first"] += first
        # Mirrored against unmirrored copy queries: original first with level copy.
        def first_copy(results, key_of):
            n = ok = 0
            for r in results:
                q = key_of(os.path.basename(r["query"]))
                if q not in copy_queries:
                    continue
                n += 1
                original = [k for k, v in dev[q].items() if v == "copy"][0]
                top = r["results"][0] if r["results"] else None
                ok += bool(top and dev_key(top["path"]) == original and
                           RANK[top["level"]] >= RANK["copy"])
            return ok, n
        flipped = first_copy(mirrored, lambda b: b.replace("__mirror", ""))
        straight = first_copy(load(os.path.join(run, "devset.jsonl")), lambda b: b)
        report[name] = {"levels": row, "per_edit": per_edit,
                        "copy_first": {"mirrored": flipped, "unmirrored": straight}}
    if as_json:
        print(json.dumps(report, indent=1))
        return
    f = lambda v: "  -  " if v is None else "%.3f" % v
    print("precision / recall of 'at least L' (pairs labelled >= L / pairs truly >= L)")
    print("%-8s %-9s | %-21s | %-21s | %-21s | %-21s" % (
        "run", "set", "identical", "copy", "part", "view"))
    for name, r in report.items():
        for s in ["devset", "edits", "mirrored", "all"]:
            cells = []
            for lv in ["identical", "copy", "part", "view"]:
                p, rc, nl, nt = r["levels"][s][lv]
                cells.append("%s / %s (%d/%d)" % (f(p), f(rc), nl, nt))
            print("%-8s %-9s | %-21s | %-21s | %-21s | %-21s" % (name, s, *cells))
    print()
    print("generated edits: found at their level / at least it / source ranked first")
    for name, r in report.items():
        items = sorted(r["per_edit"].items(), key=lambda kv: (RANK[kv[1]["level"]], kv[0]),
                       reverse=True)
        print("%-8s " % name + "  ".join(
            "%s(%s) %d/%d/%d of %d" % (e, v["level"], v["at_level"], v["at_least"], v["first"],
                                      v["n"]) for e, v in items))
    print()
    print("copy queries: original ranked first at level copy (or identical)")
    for name, r in report.items():
        m, u = r["copy_first"]["mirrored"], r["copy_first"]["unmirrored"]
        print("%-8s unmirrored %d of %d, mirrored %d of %d" % (name, u[0], u[1], m[0], m[1]))


if __name__ == "__main__":
    main(sys.argv)
