#!/usr/bin/env bash
# Second call on the lent H200: finish prep if needed, install the stripped PySide6 and its libraries, then
# (a) the quiet 2-core CPU run of benchmarks/live_load.py and (b) the same benchmark against a CUDA server.
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
PREP_WAIT_S=300 bash .h200/common/prep.sh || { echo PREP FAILED; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 QT_QPA_PLATFORM=offscreen
if [ ! -d /tmp/site/PySide6 ]; then
  step "PySide6 (stripped) + shiboken6 + pyqtgraph"
  tar xJf .h200/c2/pyside6-stripped.tar.xz -C /tmp/site || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200/c2/whl/*.whl || exit 1
  mkdir -p /tmp/debs /tmp/dl /tmp/fc
  for f in .h200/c2/debs/*.deb; do
    case $(basename $f) in libegl1_*|libglvnd0_*|libopengl0_*|libgl1_*|libglx0_*|libgles2_*) dpkg -x $f / ;; *) dpkg -x $f /tmp/debs ;; esac
  done
  ldconfig
  export LD_LIBRARY_PATH=/tmp/dl
  for pass in 1 2 3; do  # only the libraries the image lacks, and what those need in turn
    for so in /tmp/site/PySide6/Qt/lib/*.so.* /tmp/site/PySide6/Qt/plugins/*/*.so /tmp/site/PySide6/*.so* /tmp/dl/*; do
      ldd "$so" 2>/dev/null | awk '/not found/{print $1}'
    done | sort -u | while read -r lib; do
      f=$(find /tmp/debs -name "$lib" | head -1); [ -n "$f" ] && ln -sf "$(readlink -f "$f")" /tmp/dl/$lib && echo "  from debs: $lib"
    done
  done
  printf '<?xml version="1.0"?>\n<fontconfig><dir>/tmp/debs/usr/share/fonts</dir><cachedir>/tmp/fc/cache</cachedir></fontconfig>\n' > /tmp/fc/fonts.conf
fi
export LD_LIBRARY_PATH=/tmp/dl FONTCONFIG_FILE=/tmp/fc/fonts.conf QT_QPA_FONTDIR=/tmp/debs/usr/share/fonts/truetype/dejavu
python3 -c "
from PySide6.QtWidgets import QApplication; import PySide6, pyqtgraph
from llm_tuner.ui.panels.live_panel import LivePanel
app = QApplication([]); print('Qt OK', PySide6.__version__, pyqtgraph.__version__, app.platformName())" || exit 1
B=/tmp/lcb/build/bin
export LLM_TUNER_LLAMA_SERVER=$B/llama-server LLM_TUNER_DEMO_MODEL=/tmp/m/gemma3-shape-q4_k_m.gguf LLM_TUNER_DATA_DIR=/tmp/ltd
step "machine"; nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node0|Flags" | cut -c1-300
lscpu -e | head -6; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv; uptime
step "(a) quiet 2-core CPU run (taskset -c 0,1, CUDA_VISIBLE_DEVICES empty; extra: '$(cat /tmp/cpu_extra)')"
CUDA_VISIBLE_DEVICES= timeout 420 taskset -c 0,1 python3 benchmarks/live_load.py --minutes 5 --phase-seconds 30 \
  --label h200-quiet2core --extra-args "$(cat /tmp/cpu_extra)" 2>&1 | tee $OUT/a-quiet2core.txt
EL=$(( $(date +%s) - T0 )); MIN=2; [ $EL -gt 380 ] && MIN=1
[ $EL -gt 480 ] && { echo "no time left for (b) in this call (elapsed $EL s)"; exit 0; }
TB=$(( 585 - EL )); [ $TB -gt $(( MIN * 60 + 80 )) ] && TB=$(( MIN * 60 + 80 ))
step "(b) GPU server -ngl 99, $MIN min of 15 s phases (elapsed $EL s)"
nvidia-smi dmon -s um -d 1 > $OUT/b-dmon.txt 2>&1 & DM=$!
timeout $TB python3 benchmarks/live_load.py --minutes $MIN --phase-seconds 15 --warmup-s 3 --threads 4 \
  --extra-args "-ngl 99" --label h200-gpu 2>&1 | tee $OUT/b-gpu.txt
kill $DM
step "done after $(( $(date +%s) - T0 )) s"
