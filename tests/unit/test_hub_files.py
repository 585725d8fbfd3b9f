"""A repository's file list as models: quantisation from names, split sets grouped, projectors apart."""

from __future__ import annotations

import pytest

from llm_tuner.core.hub_files import RemoteFile, gguf_models, quant_from_name


@pytest.mark.parametrize(("name", "quant"), [
    ("Qwen3-8B-Q4_K_M.gguf", "Q4_K_M"),
    ("gemma-3-270m-it-q8_0.gguf", "Q8_0"),
    ("Llama-3.3-70B-Instruct-IQ2_XXS.gguf", "IQ2_XXS"),
    ("UD-Q4_K_XL/DeepSeek-R1-UD-Q4_K_XL-00001-of-00003.gguf", "Q4_K_XL"),
    ("Qwen3-4B-BF16.gguf", "BF16"),
    ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
    ("model-IQ4_NL.gguf", "IQ4_NL"),
    ("Q5_K_S/model-f16.gguf", "F16"),  # the file's own name wins over its folder
    ("mmproj-model.gguf", None),
    ("Q4-things.gguf", None),
])
def test_quant_from_name(name, quant):
    assert quant_from_name(name) == quant


def test_split_sets_are_one_model_projectors_last_other_files_left_out():
    files = [RemoteFile("README.md", 10), RemoteFile("mmproj-F16.gguf", 5, "a" * 64),
             RemoteFile("Q4_K_M/m-Q4_K_M-00002-of-00002.gguf", 20, "b" * 64),
             RemoteFile("Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", 30, "c" * 64),
             RemoteFile("Q8_0/m-Q8_0-00001-of-00002.gguf", 40),  # its second part is missing
             RemoteFile("m-Q2_K.gguf", 7, None)]
    models = gguf_models("o/r", "abc", files)
    assert [(m.name, m.size_bytes, m.quant, m.complete, m.has_checksums, m.is_projector) for m in models] == [
        ("Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", 50, "Q4_K_M", True, True, False),
        ("Q8_0/m-Q8_0-00001-of-00002.gguf", 40, "Q8_0", False, False, False),
        ("m-Q2_K.gguf", 7, "Q2_K", True, False, False),
        ("mmproj-F16.gguf", 5, "F16", True, True, True),
    ]
    assert [f.path for f in models[0].files] == ["Q4_K_M/m-Q4_K_M-00001-of-00002.gguf",
                                                "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf"]
    assert models[0].file_name == "m-Q4_K_M-00001-of-00002.gguf"
