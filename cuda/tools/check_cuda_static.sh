#!/usr/bin/env bash
# Static checks of the CUDA backend that need no GPU (run by ctest when
# WITH_CUDA is ON, test `cuda_static_check`):
#   1. per-kernel resources from ptxas (nvcc --resource-usage) for every
#      configured architecture: registers, shared memory, barriers, stack
#      frame and spills. Fails on any stack frame or spill.
#   2. the PTX of the hand-written kernels has no .local (local memory) and
#      uses the read-only path (ld.global.nc) that __restrict__ allows.
#   3. the architectures embedded in the fat binary of every object of the
#      library (.nv_fatbin read with objcopy; there is no cuobjdump here):
#      SASS and PTX must be exactly what CMAKE_CUDA_ARCHITECTURES asks for,
#      and with the default list that is sm_75, sm_80, sm_86, sm_89, sm_90
#      SASS + compute_90 PTX.
#
# Usage: check_cuda_static.sh --nvcc NVCC --source KERNELS.cu --include DIR
#          --archs "75-real,80-real,86-real,89-real,90" --library LIB.a|MODULE.so
set -euo pipefail

nvcc="" source="" include="" archs="" library=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nvcc) nvcc="$2"; shift 2 ;;
    --source) source="$2"; shift 2 ;;
    --include) include="$2"; shift 2 ;;
    --archs) archs="$2"; shift 2 ;;
    --library) library="$2"; shift 2 ;;
    *) echo "check_cuda_static: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in nvcc source include archs library; do
  [[ -n "${!v}" ]] || { echo "check_cuda_static: --$v is required" >&2; exit 2; }
done
for tool in objcopy ar c++filt python3; do
  command -v "$tool" >/dev/null || { echo "check_cuda_static: needs $tool" >&2; exit 2; }
done

library=$(realpath "$library")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

# Real architectures to inspect with ptxas: the numbers of the list.
IFS=',' read -r -a arch_list <<< "$archs"
sass_archs=()
for a in "${arch_list[@]}"; do
  a="${a// /}"
  case "$a" in
    all|all-major|native) sass_archs=(90); break ;;  # inspect one representative
    *-virtual) ;;
    *) sass_archs+=("${a%-real}") ;;
  esac
done

echo "== per-kernel resources (ptxas) =="
printf '%-6s %-44s %5s %9s %6s %9s %s\n' arch kernel regs smem bars stack "spill st/ld"
for sm in "${sass_archs[@]}"; do
  log="$work/ptxas_$sm.txt"
  "$nvcc" -std=c++17 -arch="sm_$sm" --resource-usage -I"$include" -c "$source" \
    -o "$work/k_$sm.o" > "$log" 2>&1 || { cat "$log"; echo "FAIL: nvcc for sm_$sm"; exit 1; }
  # One line per function: name regs smem bars stack spill_st spill_ld.
  python3 - "$log" "$sm" > "$work/res_$sm.txt" <<'PY'
import re, sys
log, sm = sys.argv[1], sys.argv[2]
funcs, cur = {}, None
for line in open(log):
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        cur = m.group(1); funcs.setdefault(cur, {}); continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and cur:
        funcs[cur].update(stack=int(m.group(1)), st=int(m.group(2)), ld=int(m.group(3))); continue
    m = re.search(r"Used (\d+) registers", line)
    if m and cur:
        f = funcs[cur]; f["regs"] = int(m.group(1))
        s = re.search(r"(\d+) bytes smem", line); f["smem"] = int(s.group(1)) if s else 0
        b = re.search(r"used (\d+) barriers", line); f["bars"] = int(b.group(1)) if b else 0
for name, f in funcs.items():
    print(name, f.get("regs", -1), f.get("smem", 0), f.get("bars", 0),
          f.get("stack", 0), f.get("st", 0), f.get("ld", 0))
PY
  if [[ ! -s "$work/res_$sm.txt" ]]; then
    echo "FAIL: no ptxas resource lines for sm_$sm"; cat "$log"; status=1; continue
  fi
  while read -r mangled regs smem bars stack st ld; do
    name=$(echo "$mangled" | c++filt | sed -E 's/\(anonymous namespace\):://g; s/\(.*//; s/.*::([A-Za-z0-9_]+)$/\1/')
    printf '%-6s %-44s %5s %7s B %6s %7s B %s/%s\n' "sm_$sm" "$name" "$regs" "$smem" "$bars" "$stack" "$st" "$ld"
    if [[ "$stack" != 0 || "$st" != 0 || "$ld" != 0 ]]; then
      echo "FAIL: $name on sm_$sm has a stack frame or spills"; status=1
    fi
  done < "$work/res_$sm.txt"
done

echo "== PTX of the hand-written kernels (sm_${sass_archs[0]}) =="
"$nvcc" -std=c++17 -arch="sm_${sass_archs[0]}" -ptx -I"$include" "$source" -o "$work/k.ptx"
locals=$(grep -c '\.local' "$work/k.ptx" || true)
nc=$(grep -c 'ld\.global\.nc' "$work/k.ptx" || true)
echo ".local: $locals   ld.global.nc: $nc"
if [[ "$locals" != 0 ]]; then echo "FAIL: local memory in PTX"; status=1; fi
if [[ "$nc" == 0 ]]; then echo "FAIL: no read-only (ld.global.nc) loads: __restrict__ lost"; status=1; fi

echo "== architectures in the fat binary of $library =="
expected_sass=() expected_ptx=()
for a in "${arch_list[@]}"; do
  a="${a// /}"
  case "$a" in
    all|all-major|native) expected_sass=(); expected_ptx=(); break ;;
    *-real) expected_sass+=("sm_${a%-real}") ;;
    *-virtual) expected_ptx+=("compute_${a%-virtual}") ;;
    *) expected_sass+=("sm_$a"); expected_ptx+=("compute_$a") ;;
  esac
done
expected=$(printf '%s\n' "${expected_ptx[@]}" "${expected_sass[@]}" | sed '/^$/d' | sort -u | paste -sd' ')
if [[ "$archs" == "75-real,80-real,86-real,89-real,90" ]]; then
  # The default list: this is what the release binary must contain.
  [[ "$expected" == "compute_90 sm_75 sm_80 sm_86 sm_89 sm_90" ]] || {
    echo "FAIL: default architectures would give '$expected'"; status=1; }
fi
# A static library's objects one by one; a shared module as one object (its
# .nv_fatbin holds each object's fat binary, one after the other).
mkdir "$work/ar"
case "$library" in
  *.a) (cd "$work/ar" && ar x "$library"); objects=("$work"/ar/*.o) ;;
  *) objects=("$library") ;;
esac
found_any=0
for obj in "${objects[@]}"; do
  if ! objcopy -O binary --only-section=.nv_fatbin "$obj" "$work/fatbin.bin" 2>/dev/null \
      || [[ ! -s "$work/fatbin.bin" ]]; then
    continue  # host-only object
  fi
  found_any=1
  got=$(python3 - "$work/fatbin.bin" <<'PY'
# Fat binary layout (little endian): header {u32 magic 0xBA55ED50, u16
# version, u16 header_size, u64 body_size}, then entries {u16 kind (1 = PTX,
# 2 = ELF/SASS), u16, u32 entry_header_size, u64 payload_size, ..., u32 arch
# at offset 28}. Several fat binaries may follow each other in the section.
import struct, sys
data = open(sys.argv[1], "rb").read()
seen, off = set(), 0
while off + 16 <= len(data):
    magic, _, hsize, size = struct.unpack_from("<IHHQ", data, off)
    if magic != 0xBA55ED50:
        off += 8
        continue
    e, end = off + hsize, off + hsize + size
    while e + 32 <= end:
        kind, _, ehsize, psize = struct.unpack_from("<HHIQ", data, e)
        arch = struct.unpack_from("<I", data, e + 28)[0]
        if kind == 1: seen.add("compute_%d" % arch)
        elif kind == 2: seen.add("sm_%d" % arch)
        if ehsize == 0: break
        e += ehsize + psize
    off = end
print(" ".join(sorted(seen)))
PY
)
  echo "$(basename "$obj"): $got"
  if [[ -n "$expected" && "$got" != "$expected" ]]; then
    echo "FAIL: $(basename "$obj") embeds '$got', expected '$expected'"; status=1
  fi
done
if [[ "$found_any" == 0 ]]; then echo "FAIL: no .nv_fatbin in $library"; status=1; fi

if [[ "$status" == 0 ]]; then echo "static checks: OK"; else echo "static checks: FAILED"; fi
exit "$status"
