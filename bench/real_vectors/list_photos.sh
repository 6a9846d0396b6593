#!/bin/sh
# Lists the real photos bench/search_scale's realistic data is fitted to, one
# path per line: the dev set (db and queries) and the photos of Debian
# packages (install them first, as root):
#   apt-get install --no-install-recommends ukui-wallpapers lomiri-wallpapers \
#     lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mate-backgrounds \
#     gnome-backgrounds sway-backgrounds desktop-base plasma-workspace-wallpapers \
#     opencv-doc visp-images-data python3-opencv
# Then (bench/README.md, "Realistic vectors"):
#   bench/real_vectors/list_photos.sh > base.txt
#   /usr/bin/python3 bench/real_vectors/augment.py base.txt photos 4 1234
# usage: list_photos.sh [DEVSET_DIR]   (default ../shared/data/devset from the repository root)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
devset=${1:-$root/../shared/data/devset}
{
  find "$devset/db" "$devset/queries" -type f
  for p in ukui-wallpapers lomiri-wallpapers lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 \
    mate-backgrounds gnome-backgrounds sway-backgrounds desktop-base; do
    dpkg -L $p | grep -iE '\.(jpe?g|png|webp)$'
  done | while read -r f; do [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 30000 ] && echo "$f"; done
  # plasma: the largest rendering of each wallpaper
  for d in /usr/share/wallpapers/*/contents/images; do ls -S "$d"/* 2>/dev/null | head -1; done
  find /usr/share/doc/opencv-doc/examples -type f \( -iname '*.jpg' -o -iname '*.png' \) -size +20k
  find /usr/share/doc/opencv-doc/opencv4/html -type f -iname '*.jpg' -size +20k
  V=/usr/share/visp-images-data/ViSP-images
  find $V/Klimt $V/Solvay $V/calibration $V/AprilTag -type f \
    \( -iname '*.jpg' -o -iname '*.png' -o -iname '*.pgm' -o -iname '*.ppm' \)
  # image sequences: every 15th frame
  for s in cube mbt/cube mbt-depth/castel/castel mbt-depth/Castle-simu/Images mire-2 ellipse-1 line; do
    find $V/$s -maxdepth 1 -type f \
      \( -iname '*.jpg' -o -iname '*.png' -o -iname '*.pgm' -o -iname '*.ppm' \) | sort | awk 'NR%15==1'
  done
} | LC_ALL=C sort -u
