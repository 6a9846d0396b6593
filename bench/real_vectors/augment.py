#!/usr/bin/env python3
"""augment.py LIST OUTDIR COPIES SEED (Debian's python3-opencv: run it with
/usr/bin/python3): for every photo in LIST writes it (as JPEG, longest side
<= 1024) to OUTDIR/base/NNNN.jpg and COPIES random
augmentations to OUTDIR/aug/NNNN_c.jpg: each combines a random crop (50-90 %
of each side), a rotation (+-3..20 deg, p 0.6), a colour change (brightness,
contrast, saturation, hue, gamma; greyscale p 0.15), a downscale (0.35-0.9),
a mirror (p 0.15) and JPEG quality 30-90. Byte-identical inputs are skipped."""
import hashlib, os, sys, random
import cv2, numpy as np

lst, out, copies, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out + "/base", exist_ok=True); os.makedirs(out + "/aug", exist_ok=True)
rng = random.Random(seed)
seen = set(); n = 0

def fit(img, side=1024):
    s = side / max(img.shape[:2])
    return cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA) if s < 1 else img

def augment(img):
    h, w = img.shape[:2]
    fx, fy = rng.uniform(0.5, 0.9), rng.uniform(0.5, 0.9)
    cw, ch = int(w * fx), int(h * fy)
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    img = img[y:y + ch, x:x + cw].copy()
    if rng.random() < 0.6:
        a = rng.choice([-1, 1]) * rng.uniform(3, 20)
        M = cv2.getRotationMatrix2D((cw / 2, ch / 2), a, 1.0)
        img = cv2.warpAffine(img, M, (cw, ch), flags=cv2.INTER_LINEAR,
                             borderMode=rng.choice([cv2.BORDER_REFLECT, cv2.BORDER_CONSTANT]))
    if rng.random() < 0.15:
        img = cv2.flip(img, 1)
    hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV).astype(np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-12, 12)) % 180
    hsv[..., 1] = np.clip(hsv[..., 1] * rng.uniform(0.5, 1.5), 0, 255)
    img = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2BGR).astype(np.float32)
    img = img * rng.uniform(0.7, 1.3) + rng.uniform(-30, 30)
    img = 255.0 * (np.clip(img, 0, 255) / 255.0) ** rng.uniform(0.7, 1.4)
    img = img.astype(np.uint8)
    if rng.random() < 0.15:
        img = cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    s = rng.uniform(0.35, 0.9)
    img = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
    return img

for path in open(lst).read().split("\n"):
    if not path: continue
    data = open(path, "rb").read()
    hsh = hashlib.sha1(data).hexdigest()
    if hsh in seen: continue
    seen.add(hsh)
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None or min(img.shape[:2]) < 64: continue
    img = fit(img)
    n += 1
    cv2.imwrite("%s/base/%04d.jpg" % (out, n), img, [cv2.IMWRITE_JPEG_QUALITY, 92])
    for c in range(copies):
        cv2.imwrite("%s/aug/%04d_%d.jpg" % (out, n, c), augment(img),
                    [cv2.IMWRITE_JPEG_QUALITY, rng.randint(30, 90)])
print(n, "base photos,", n * copies, "augmented copies", file=sys.stderr)
