"""llm-tuner: a desktop tuner for llama.cpp's llama-server."""

__version__ = "0.1.0"
