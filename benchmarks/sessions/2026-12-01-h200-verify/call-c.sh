#!/usr/bin/env bash
# Call C on the lent H200: the GUI (stripped PySide6, offscreen) — Live with one card under two backends.
set -u
H=benchmarks/results/gpu/h200-verify
exec > >(tee -a /tmp/call-c.log) 2>&1
bash $H/setup.sh || exit 1
source $H/env.sh
if [ ! -d /tmp/site/PySide6 ]; then
  tar xJf .h200gui/pyside6-stripped.tar.xz -C /tmp/site || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200gui/whl/*.whl || exit 1
  mkdir -p /tmp/debs /tmp/dl /tmp/fc
  for f in .h200gui/debs/*.deb; do
    case $(basename $f) in libegl1_*|libglvnd0_*|libopengl0_*|libgl1_*|libglx0_*|libgles2_*) dpkg -x $f / ;; *) dpkg -x $f /tmp/debs ;; esac
  done
  ldconfig
  export LD_LIBRARY_PATH=/tmp/dl
  for pass in 1 2 3; do
    for so in /tmp/site/PySide6/Qt/lib/*.so.* /tmp/site/PySide6/Qt/plugins/*/*.so /tmp/site/PySide6/*.so* /tmp/dl/*; do
      ldd "$so" 2>/dev/null | awk '/not found/{print $1}'
    done | sort -u | while read -r lib; do
      f=$(find /tmp/debs -name "$lib" | head -1); [ -n "$f" ] && ln -sf "$(readlink -f "$f")" /tmp/dl/$lib
    done
  done
  printf '<?xml version="1.0"?>\n<fontconfig><dir>/tmp/debs/usr/share/fonts</dir><cachedir>/tmp/fc/cache</cachedir></fontconfig>\n' > /tmp/fc/fonts.conf
fi
export LD_LIBRARY_PATH=/tmp/dl FONTCONFIG_FILE=/tmp/fc/fonts.conf QT_QPA_FONTDIR=/tmp/debs/usr/share/fonts/truetype/dejavu QT_QPA_PLATFORM=offscreen
timeout 240 python3 $H/live_shot.py $OUT
cp /tmp/call-c.log $OUT/
