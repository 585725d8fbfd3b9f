B=/tmp/lcb/build/bin M=/tmp/m/qwen3-1b-q4_k_m.gguf
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LLM_TUNER_LLAMA_SERVER=$B/llama-server LLM_TUNER_LLAMA_BENCH=$B/llama-bench LLM_TUNER_LLAMA_FIT_PARAMS=$B/llama-fit-params
export LLM_TUNER_RPC_SERVER=$B/ggml-rpc-server  # llama-perplexity is found next to llama-server
export LLM_TUNER_DATA_DIR=/tmp/ltd LLM_TUNER_DEMO_MODEL=$M
