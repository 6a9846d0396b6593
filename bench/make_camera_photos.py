#!/usr/bin/python3
"""Writes N camera-size JPEGs for indexing-speed runs (bench/index_speed_ab.sh).

usage: make_camera_photos.py OUT_DIR N

Photo i is OUT_DIR/cam_NNNN.jpg: 4000 x 3000 (every other pass over the
sources 3000 x 4000), JPEG quality 90, as a 12-megapixel camera writes them:
a seeded crop of 70-100 % of the largest 4:3 window of a Debian wallpaper
(/usr/share/backgrounds, /usr/share/wallpapers, /usr/share/desktop-base, as
installed by bench/distractors/make_distractors.sh; byte-identical files
once), scaled to size, with mild seeded sensor-like noise (sigma 2.5) so
that the files are about as large as a camera's (1.2-1.5 MB each). The
sources are taken in path order, so a run with the same packages writes
the same files. Run with Debian's /usr/bin/python3 (python3-opencv).
"""
import hashlib
import os
import sys

import cv2
import numpy as np

SOURCE_DIRS = ['/usr/share/backgrounds', '/usr/share/wallpapers', '/usr/share/desktop-base']


def sources():
    seen, paths = set(), []
    for top in SOURCE_DIRS:
        for folder, _, files in os.walk(top, followlinks=True):
            for name in files:
                if name.lower().endswith(('.jpg', '.jpeg', '.png')):
                    real = os.path.realpath(os.path.join(folder, name))
                    if real not in seen:
                        seen.add(real)
                        paths.append(real)
    unique, digests = [], set()
    for path in sorted(paths):
        with open(path, 'rb') as f:
            digest = hashlib.md5(f.read()).hexdigest()
        if digest not in digests:
            digests.add(digest)
            unique.append(path)
    return unique


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    srcs = sources()
    if not srcs:
        sys.exit('make_camera_photos: no wallpapers under ' + ', '.join(SOURCE_DIRS))
    rng = np.random.default_rng(1)
    noise = np.clip(rng.normal(0, 2.5, (4256, 4256, 3)), -8, 8).astype(np.int16)
    os.makedirs(out, exist_ok=True)
    i = k = 0
    while i < n:
        source, rotated = srcs[k % len(srcs)], (k // len(srcs)) % 2
        k += 1
        image = cv2.imread(source, cv2.IMREAD_COLOR)
        if image is None or min(image.shape[:2]) < 300:
            continue
        width, height = (3000, 4000) if rotated else (4000, 3000)
        h, w = image.shape[:2]
        scale = min(w / width, h / height) * rng.uniform(0.7, 1.0)
        cw, ch = int(width * scale), int(height * scale)
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        photo = cv2.resize(image[y:y + ch, x:x + cw], (width, height),
                           interpolation=cv2.INTER_CUBIC)
        ox, oy = int(rng.integers(0, 256)), int(rng.integers(0, 256))
        photo = np.clip(photo.astype(np.int16) + noise[oy:oy + height, ox:ox + width], 0,
                        255).astype(np.uint8)
        cv2.imwrite(os.path.join(out, 'cam_%04d.jpg' % i), photo, [cv2.IMWRITE_JPEG_QUALITY, 90])
        i += 1


if __name__ == '__main__':
    main()
