# Included by llama.cpp's CMake (CMAKE_PROJECT_INCLUDE, from the Makefile's LLAMA_BASE_ARGS): leaves the tools
# llm-tuner never runs out of the default build, so `make setup` and CI compile less. Kept: llama-server,
# llama-bench, llama-fit-params, llama-perplexity (a tune's quality check), llama-quantize, ggml-rpc-server and
# the libraries they link (mtmd: the server's multimodal support). The llama.cpp package's setup.py runs
# `cmake --build .` (every default target) and ships whatever is in build/bin, so a target left out here is
# neither built nor shipped. Each name is checked with if(TARGET): a llama.cpp that renames one builds it.
include_guard(GLOBAL)

function(_llm_tuner_trim)
    foreach(target IN ITEMS
            llama-app llama-cli llama-cli-impl llama-completion llama-completion-impl
            llama-batched-bench llama-batched-bench-impl llama-gguf-split llama-imatrix llama-tokenize
            llama-tts llama-mtmd-cli llama-llava-cli llama-gemma3-cli llama-minicpmv-cli llama-qwen2vl-cli
            llama-mtmd-debug llama-cvector-generator llama-export-lora llama-results)
        if(TARGET ${target})
            set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
        endif()
    endforeach()
endfunction()

# at the end of the top-level CMakeLists.txt, once every tool's target exists
if(CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)
    cmake_language(DEFER CALL _llm_tuner_trim)
endif()
