#!/usr/bin/python3
"""Fills a folder with N seeded distractor JPEGs for bench/distractor_curve.sh.

usage: make_distractors.py OUT_DIR N --devset DIR --make-photos BIN [--seed S] [--threads T]

Run by make_distractors.sh, which installs the Debian packages read here
(python3-opencv, python3-numpy and the image packages in SOURCE_DIRS).

Distractor i is OUT_DIR/NNNN/d_NNNNNNN.jpg (1000 per folder). It depends only
on (seed, i) and on the source list, so the first N of a larger run are the
N of a smaller one (the curve's databases are nested) and existing files are
kept: re-running with the same or a larger N only writes what is missing.

Kinds, by position in a cycle of 10: slots 0 and 1 are generated photo-like
images (bench/make_photos, its image number g = the generated slots before
i); slots 2..9 are real. Real slot j (counting real slots only) uses source
j mod S; its first use (j < S) is the whole picture re-encoded, every later
one a transformed crop (crop of 15-80 % of the area, any aspect, mirror,
rotation, scale, brightness / contrast / gamma / saturation / hue, sometimes
grey, blur or noise, JPEG quality 70-95), seeded by (seed, i).

Sources: raster images of at least 240 px a side from the packages in
SOURCE_DIRS, plus sampled frames of the videos and image sequences there.
Excluded: every Debian file that sources.csv names as the origin of a dev-set
image (db or query), with every file of the same package whose name starts
with the same stem family (graf1 -> graf*, adwaita-l -> adwaita*,
left01 -> left*, parrot -> parrot_mask); and every candidate whose 32x32
grey thumbnail correlates at SAME_CONTENT (0.9) or more with a dev db or
query image's, or its mirror's (the dev set's own copies of its pictures,
resized, blurred, re-encoded, recoloured or greyed, score 0.95 to 1; text
or logo overlays bring some down to 0.84; unrelated smooth wallpapers reach
0.83; a 9x8 dHash was tried first and flagged 105 unrelated pictures as
dev images, since near-flat pictures all hash alike). Sources are
de-duplicated among themselves by the same test, keeping the largest file
(a wallpaper shipped at 11 resolutions is one source). Every written
distractor is tested again and re-drawn (next attempt's parameters) if it
correlates with a dev image.
The chosen list is kept in OUT_DIR/sources.tsv and reused as is; a source
list that no longer matches the stamp there is an error, never a silent
change of the cached images. OUT_DIR/manifest.tsv says what each file is.
"""
import argparse
import csv
import glob
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from multiprocessing import Pool

import cv2
import numpy as np

VERSION = 1
SAME_CONTENT = 0.9        # thumbnail correlation from which two images are one
MIN_SIDE = 240
MAX_SOURCE_SIDE = 3200    # sources are decoded and kept at most this large
FRAMES_PER_SEQUENCE = 12  # frames sampled from one video or one folder sequence
SEQUENCE_MIN_FILES = 20   # a folder with more numbered images is a sequence

# package -> folders whose image files (from `dpkg -L`) are sources; videos
# and numbered sequences are sampled for frames.
SOURCE_DIRS = {
    "plasma-workspace-wallpapers": ["/usr/share/wallpapers/"],
    "mate-backgrounds": ["/usr/share/backgrounds/"],
    "ukui-wallpapers": ["/usr/share/backgrounds/"],
    "lomiri-wallpapers": ["/usr/share/backgrounds/"],
    "sway-backgrounds": ["/usr/share/backgrounds/"],
    "desktop-base": ["/usr/share/desktop-base/", "/usr/share/plymouth/themes/"],
    "gnome-backgrounds": ["/usr/share/backgrounds/"],
    "opencv-doc": ["/usr/share/doc/opencv-doc/examples/data/"],
    "cimg-examples": ["/usr/share/doc/cimg-dev/examples/img/"],
    "python3-skimage": ["/usr/lib/python3/dist-packages/skimage/data/"],
    "python3-imageio": ["/usr/lib/python3/dist-packages/imageio/resources/images/"],
    "visp-images-data": ["/usr/share/visp-images-data/ViSP-images/"],
}
IMAGE_EXT = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".ppm", ".pgm", ".tif", ".tiff")
VIDEO_EXT = (".avi", ".mp4")


def log(msg):
    print("make_distractors: " + msg, file=sys.stderr, flush=True)


def thumb(img):
    """32x32 grey thumbnail, zero mean, unit norm: a dot product of two is
    their correlation, blind to scale, JPEG, brightness, contrast and colour."""
    g = img if img.ndim == 2 else cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    t = cv2.resize(g, (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)
    t -= t.mean()
    return (t / (np.linalg.norm(t) + 1e-6)).flatten()


def near(t, thumbs):
    """True if thumbnail t correlates at SAME_CONTENT or more with a row of thumbs."""
    return len(thumbs) > 0 and float(np.max(thumbs @ t)) >= SAME_CONTENT


def to_bgr(img):
    if img is None:
        return None
    if img.dtype != np.uint8:  # 16-bit PNG/TIFF/PGM
        img = cv2.convertScaleAbs(img, alpha=255.0 / max(1.0, float(img.max())))
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    if img.shape[2] == 4:  # composite on mid grey
        a = img[:, :, 3:4].astype(np.float32) / 255.0
        return (img[:, :, :3] * a + 128 * (1 - a)).astype(np.uint8)
    return img[:, :, :3]


def bound(img, side=MAX_SOURCE_SIDE):
    s = side / max(img.shape[:2])
    return img if s >= 1 else cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)


def load_source(ref):
    """Decoded BGR image of a source reference 'PATH' or 'PATH#frame=K'."""
    path, _, frame = ref.partition("#frame=")
    if frame:
        cap = cv2.VideoCapture(path)
        cap.set(cv2.CAP_PROP_POS_FRAMES, int(frame))
        ok, img = cap.read()
        cap.release()
        img = img if ok else None
    else:
        img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    img = to_bgr(img)
    return None if img is None else bound(img)


def family(stem):
    """'graf1' -> 'graf', 'adwaita-l' -> 'adwaita', 'aloeL' -> 'aloe', 'left01' -> 'left'."""
    s = re.sub(r"(?<=[a-z])[LRAB]$", "", stem).lower()
    s = re.sub(r"[-_ ]?[0-9]+$", "", s)
    s = re.sub(r"[-_][a-z]$", "", s)
    return s or stem.lower()


def dev_exclusions(devset):
    """(package -> set of excluded paths, package -> stem families) from sources.csv."""
    paths, fams = {}, {}
    with open(os.path.join(devset, "sources.csv"), newline="") as f:
        for row in csv.DictReader(f):
            m = re.match(r"debian:([^=]+)=[^:]*:(.*)$", row["origin"].strip())
            if not m:
                continue
            pkg, path = m.group(1), "/" + m.group(2).lstrip("/")
            paths.setdefault(pkg, set()).add(path)
            fams.setdefault(pkg, set()).add(family(os.path.splitext(os.path.basename(path))[0]))
    return paths, fams


def dev_thumbs(devset):
    """Thumbnails of every dev db and query image and of their mirror images."""
    rows = []
    for sub in ("db", "queries"):
        for p in sorted(glob.glob(os.path.join(devset, sub, "**", "*"), recursive=True)):
            img = to_bgr(cv2.imread(p, cv2.IMREAD_UNCHANGED)) if os.path.isfile(p) else None
            if img is not None:
                rows += [thumb(img), thumb(img[:, ::-1])]
    if not rows:
        sys.exit("make_distractors: no images under %s/db or queries" % devset)
    return np.stack(rows)


def package_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def candidates(pkg):
    """Image files and video/sequence frame references of one package, sorted."""
    listed = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.split("\n")
    files = {p for p in listed if any(p.startswith(d) for d in SOURCE_DIRS[pkg])
             and "/Depth/" not in p and os.path.isfile(p)}
    refs, by_dir = [], {}
    for p in sorted(files):
        ext = os.path.splitext(p)[1].lower()
        if ext in VIDEO_EXT:
            n = int(cv2.VideoCapture(p).get(cv2.CAP_PROP_FRAME_COUNT))
            step = max(1, n // FRAMES_PER_SEQUENCE)
            refs.extend("%s#frame=%d" % (p, k) for k in range(step // 2, n, step))
        elif ext in IMAGE_EXT and os.path.getsize(p) >= 8000:
            by_dir.setdefault(os.path.dirname(p), []).append(p)
    for d, ps in sorted(by_dir.items()):
        numbered = [p for p in ps if re.search(r"[0-9]{3,}\.[a-z]+$", p)]
        if len(numbered) >= SEQUENCE_MIN_FILES:  # a camera sequence: sample it
            step = len(numbered) // FRAMES_PER_SEQUENCE
            keep = set(numbered[step // 2::step][:FRAMES_PER_SEQUENCE])
            ps = [p for p in ps if p not in numbered or p in keep]
        refs.extend(ps)
    return refs


def scan_sources(devset, out):
    excl_paths, excl_fams = dev_exclusions(devset)
    devt = dev_thumbs(devset)
    kept, thumbs, stats = [], [], {}
    for pkg in sorted(SOURCE_DIRS):
        st = stats.setdefault(pkg, {"candidates": 0, "dev_source": 0, "dev_content": 0,
                                    "duplicate": 0, "small": 0, "kept": 0})
        version = package_version(pkg)
        if not version:
            log("package %s not installed; its images are not used" % pkg)
            continue
        items = []
        for ref in candidates(pkg):
            st["candidates"] += 1
            path = ref.partition("#")[0]
            stem = os.path.splitext(os.path.basename(path))[0]
            fam = family(stem)
            if path in excl_paths.get(pkg, ()) or any(
                    fam.startswith(f) or stem.lower().startswith(f) for f in excl_fams.get(pkg, ())):
                st["dev_source"] += 1
                continue
            img = load_source(ref)
            if img is None or min(img.shape[:2]) < MIN_SIDE or float(img.std()) < 8:
                st["small"] += 1
                continue
            t = thumb(img)
            if near(t, devt):
                st["dev_content"] += 1
                log("excluded %s: its content matches a dev-set image" % ref)
                continue
            items.append((-img.shape[0] * img.shape[1], ref, t, img.shape))
        for _, ref, t, shape in sorted(items, key=lambda x: x[:2]):  # largest first
            if near(t, np.array(thumbs)):
                st["duplicate"] += 1
                continue
            thumbs.append(t)
            kept.append({"package": pkg, "version": version, "ref": ref,
                         "width": shape[1], "height": shape[0]})
            st["kept"] += 1
    kept.sort(key=lambda s: (s["package"], s["ref"]))
    return kept, stats


def sources_stamp(sources, seed):
    text = json.dumps([VERSION, seed, [(s["package"], s["ref"]) for s in sources]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_or_scan_sources(out, devset, seed):
    path = os.path.join(out, "sources.tsv")
    if os.path.exists(path):
        with open(path) as f:
            header = f.readline().strip()
            rows = list(csv.DictReader(f, delimiter="\t"))
        stamp = header.split("stamp=")[-1]
        missing = [r["ref"] for r in rows if not os.path.exists(r["ref"].partition("#")[0])]
        if missing:
            sys.exit("make_distractors: %d cached sources are gone (e.g. %s): reinstall their "
                     "packages or use a fresh OUT_DIR" % (len(missing), missing[0]))
        if sources_stamp(rows, seed) != stamp:
            sys.exit("make_distractors: %s was made with another seed or version; use a fresh "
                     "OUT_DIR" % path)
        return rows
    log("scanning sources (decodes every candidate once)")
    sources, stats = scan_sources(devset, out)
    if not sources:
        sys.exit("make_distractors: no usable source images (are the packages installed?)")
    for pkg, st in sorted(stats.items()):
        log("  %-28s %s" % (pkg, " ".join("%s=%d" % kv for kv in st.items())))
    with open(path + ".tmp", "w") as f:
        f.write("# seed=%d version=%d stamp=%s\n" % (seed, VERSION, sources_stamp(sources, seed)))
        f.write("package\tversion\tref\twidth\theight\n")
        for s in sources:
            f.write("%(package)s\t%(version)s\t%(ref)s\t%(width)d\t%(height)d\n" % s)
    with open(os.path.join(out, "sources-scan.json"), "w") as f:
        json.dump(stats, f, indent=1)
    os.replace(path + ".tmp", path)
    return sources


def plan(i):
    """('generated', g) or ('real', j) for distractor i."""
    cycle, slot = divmod(i, 10)
    if slot < 2:
        return "generated", cycle * 2 + slot
    return "real", cycle * 8 + slot - 2


def out_path(out, i):
    return os.path.join(out, "%04d" % (i // 1000), "d_%07d.jpg" % i)


def crop_params(seed, i, attempt):
    r = random.Random("%d/%d/%d" % (seed, i, attempt)).random
    return {
        "area": 0.15 + 0.65 * r(),
        "aspect": [4 / 3, 3 / 2, 16 / 9, 1.0][int(r() * 4)],
        "portrait": r() < 0.25,
        "cx": r(), "cy": r(),
        "angle": (r() - 0.5) * 40 if r() < 0.5 else 0.0,
        "flip": r() < 0.5,
        "side": int(480 + 1120 * r()),
        "alpha": 0.7 + 0.6 * r(), "beta": (r() - 0.5) * 60, "gamma": 0.7 + 0.7 * r(),
        "sat": 0.4 + 1.1 * r(), "hue": (r() - 0.5) * 30,
        "grey": r() < 0.1, "blur": (0.5 + 1.5 * r()) if r() < 0.2 else 0.0,
        "noise": (2 + 4 * r()) if r() < 0.2 else 0.0,
        "quality": int(70 + 26 * r()),
        "noise_seed": int(r() * 2**31),
    }


def transformed_crop(src, p):
    h, w = src.shape[:2]
    aspect = 1 / p["aspect"] if p["portrait"] else p["aspect"]
    cw = min(w, np.sqrt(p["area"] * w * h * aspect))
    ch = min(h, cw / aspect)
    cw = min(cw, ch * aspect)
    # The rotated crop's bounding box must lie inside the picture.
    t = np.deg2rad(abs(p["angle"]))
    bw, bh = cw * np.cos(t) + ch * np.sin(t), cw * np.sin(t) + ch * np.cos(t)
    if bw > w or bh > h:
        s = min(w / bw, h / bh)
        cw, ch, bw, bh = cw * s, ch * s, bw * s, bh * s
    cx = bw / 2 + p["cx"] * (w - bw)
    cy = bh / 2 + p["cy"] * (h - bh)
    scale = min(p["side"] / max(cw, ch), 2.0)
    ow, oh = max(64, int(round(cw * scale))), max(64, int(round(ch * scale)))
    # Downscale a margin around the box with INTER_AREA first (no aliasing),
    # then rotate about the centre with the remaining (>= 1/2) scale.
    x0, y0 = int(max(0, cx - bw / 2 - 2)), int(max(0, cy - bh / 2 - 2))
    x1, y1 = int(min(w, cx + bw / 2 + 2)), int(min(h, cy + bh / 2 + 2))
    region = src[y0:y1, x0:x1]
    pre = min(1.0, scale)
    if pre < 1.0:
        region = cv2.resize(region, None, fx=pre, fy=pre, interpolation=cv2.INTER_AREA)
    rest = scale / pre
    m = cv2.getRotationMatrix2D(((cx - x0) * pre, (cy - y0) * pre), p["angle"], rest)
    m[0, 2] += ow / 2 - (cx - x0) * pre
    m[1, 2] += oh / 2 - (cy - y0) * pre
    img = cv2.warpAffine(region, m, (ow, oh), flags=cv2.INTER_LINEAR,
                         borderMode=cv2.BORDER_REFLECT)
    if p["flip"]:
        img = img[:, ::-1]
    hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV).astype(np.float32)
    hsv[:, :, 0] = (hsv[:, :, 0] + p["hue"] / 2) % 180
    hsv[:, :, 1] = np.clip(hsv[:, :, 1] * p["sat"], 0, 255)
    img = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2BGR).astype(np.float32)
    img = np.clip(img * p["alpha"] + p["beta"], 0, 255)
    img = 255.0 * (img / 255.0) ** p["gamma"]
    if p["blur"]:
        img = cv2.GaussianBlur(img, (0, 0), p["blur"])
    if p["noise"]:
        img += np.random.default_rng(p["noise_seed"]).normal(0, p["noise"], img.shape)
    img = np.clip(img, 0, 255).astype(np.uint8)
    if p["grey"]:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    return img


def whole(src, seed, i):
    r = random.Random("%d/%d/whole" % (seed, i)).random
    side = int(800 + 800 * r())
    s = min(1.0, side / max(src.shape[:2]))
    img = src if s >= 1 else cv2.resize(src, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
    return img, {"side": max(img.shape[:2]), "quality": 90}


def write_jpeg(path, img, quality):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise RuntimeError("cannot encode " + path)
    with open(path + ".tmp", "wb") as f:
        f.write(buf.tobytes())
    os.replace(path + ".tmp", path)


def make_real(job):
    """Writes the pending distractors of one source; returns manifest rows."""
    out, seed, ref, todo, devt = job
    cv2.setNumThreads(1)
    src = load_source(ref)
    if src is None:
        raise RuntimeError("cannot decode source " + ref)
    rows = []
    for i, first in todo:
        for attempt in range(50):
            if first and attempt == 0:
                img, p = whole(src, seed, i)
                kind = "whole"
            else:
                p = crop_params(seed, i, attempt)
                img = transformed_crop(src, p)
                kind = "crop"
            if not near(thumb(img), devt):
                break
        else:
            raise RuntimeError("distractor %d: every draw matches a dev image" % i)
        write_jpeg(out_path(out, i), img, p["quality"])
        rows.append((i, kind, ref, attempt, json.dumps(p, sort_keys=True)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("n", type=int)
    ap.add_argument("--devset", required=True)
    ap.add_argument("--make-photos", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sources = read_or_scan_sources(a.out, a.devset, a.seed)
    num_src = len(sources)
    log("%d sources; %d distractors in %s" % (num_src, a.n, a.out))

    plans = [plan(i) for i in range(a.n)]
    # Generated: make_photos writes image g to gen/NNNN/img_NNNNNNN.jpg,
    # which is hard-linked (no copy) to the distractor's name.
    gen_dir = os.path.join(a.out, "generated")
    gens = [(i, g) for i, (k, g) in enumerate(plans) if k == "generated"]
    gen_todo = [(i, g) for i, g in gens if not os.path.exists(out_path(a.out, i))]
    if gen_todo:
        count = max(g for _, g in gen_todo) + 1
        log("generating %d photo-like images (make_photos, seed %d)" % (len(gen_todo), a.seed))
        subprocess.run([a.make_photos, gen_dir, str(count), "--seed", str(a.seed),
                        "--min-side", "640", "--max-side", "1600",
                        "--threads", str(a.threads)], check=True)
        for i, g in gen_todo:
            src = os.path.join(gen_dir, "%04d" % (g // 1000), "img_%07d.jpg" % g)
            dst = out_path(a.out, i)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.link(src, dst)

    by_source = {}
    for i, (k, j) in enumerate(plans):
        if k == "real" and not os.path.exists(out_path(a.out, i)):
            by_source.setdefault(j % num_src, []).append((i, j < num_src))
    rows = []
    if by_source:
        devt = dev_thumbs(a.devset)
        jobs = [(a.out, a.seed, sources[s]["ref"], todo, devt) for s, todo in sorted(by_source.items())]
        pending = sum(len(t) for t in by_source.values())
        log("writing %d real-photo distractors from %d sources (%d threads)"
            % (pending, len(jobs), a.threads))
        done = 0
        with Pool(a.threads) as pool:
            for r in pool.imap_unordered(make_real, jobs):
                rows.extend(r)
                done += len(r)
                if done * 10 // pending != (done - len(r)) * 10 // pending:
                    log("  %d / %d" % (done, pending))

    # The manifest: kept rows of earlier runs plus this run's.
    mpath = os.path.join(a.out, "manifest.tsv")
    old = {}
    if os.path.exists(mpath):
        with open(mpath) as f:
            next(f)
            for line in f:
                old[int(line.split("\t", 1)[0])] = line
    for i, g in gens:
        old.setdefault(i, "%d\tgenerated\tmake_photos --seed %d #%d\t0\t{}\n" % (i, a.seed, g))
    for i, kind, ref, attempt, p in rows:
        old[i] = "%d\t%s\t%s\t%d\t%s\n" % (i, kind, ref, attempt, p)
    with open(mpath + ".tmp", "w") as f:
        f.write("index\tkind\tsource\tredraws\tparams\n")
        f.writelines(old[i] for i in sorted(old))
    os.replace(mpath + ".tmp", mpath)
    have = sum(1 for i in range(a.n) if os.path.exists(out_path(a.out, i)))
    if have != a.n:
        sys.exit("make_distractors: only %d of %d distractors exist" % (have, a.n))
    kinds = {}
    for i in range(a.n):
        k = old[i].split("\t")[1] if i in old else "?"
        kinds[k] = kinds.get(k, 0) + 1
    log("done: %s" % ", ".join("%s %d" % kv for kv in sorted(kinds.items())))


if __name__ == "__main__":
    main()
