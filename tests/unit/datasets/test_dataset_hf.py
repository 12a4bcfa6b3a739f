"""vLLM's ``hf`` text datasets, from local copies loaded with the ``datasets`` library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.datasets.hf import find_hf_dataset, load_hf_rows, sample_hf_requests
from loadgen.text.chat_template import load_chat_template


def local_copy(tmp_path: Path, rows: list[dict]) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(tmp_path)


def rows_of(path: str, hub_id: str, *, seed: int = 0, streaming: bool = True):
    family = find_hf_dataset(path, hub_id)
    return family, load_hf_rows(path, family, None, "train", streaming, seed, False)


def test_datasets_are_found_by_hub_id_or_hf_name() -> None:
    assert find_hf_dataset("openai/gsm8k", None).subset == "main"
    assert find_hf_dataset("/local/copy", "philschmid/mt-bench").output_len == 256
    with pytest.raises(ValueError, match="Unsupported dataset path: nobody/unknown-dataset"):
        find_hf_dataset("nobody/unknown-dataset", None)


@pytest.mark.parametrize("streaming", [True, False])
def test_instructcoder_prompts_are_templated_with_the_default_output(tok, tmp_path, streaming):
    rows = [{"instruction": f"Fix {i}", "input": f"x = {i}", "output": ""} for i in range(30)]
    path = local_copy(tmp_path, rows)
    family, data = rows_of(path, "likaixin/InstructCoder", streaming=streaming)
    template = load_chat_template("loadgen-mock")
    render = template.render_user_prompt
    ds = sample_hf_requests(data, family, tok, 10, None, 0, template)
    assert ds.output_lens.tolist() == [200] * 10
    texts = {f"x = {i}\n\nFix {i} Just output the code, do not include any explanation."
             for i in range(30)}  # fmt: skip
    assert all(p.startswith("<|begin_of_text|>user: ") for p in ds.prompts)
    assert {p.removeprefix("<|begin_of_text|>user: ").removesuffix("\nassistant: ")
            for p in ds.prompts} <= texts  # fmt: skip
    assert ds.prompt_lens.tolist() == [len(tok.encode_batch([p])[0]) + 1 for p in ds.prompts]
    # Shuffled with the seed: not the file's first ten, and the same ten again.
    assert ds.prompts != [render(t) for t in sorted(texts)][:10]
    again = sample_hf_requests(rows_of(path, "likaixin/InstructCoder", streaming=streaming)[1],
                               family, tok, 10, None, 0, template)  # fmt: skip
    assert again.prompts == ds.prompts


def test_conversations_need_two_turns_and_size_the_output(tok, tmp_path):
    rows = [
        {"conversations": [{"value": "the " * (5 + i)}, {"value": "a " * (6 + i)}]}
        for i in range(8)
    ]
    rows.append({"conversations": [{"value": "only one turn here"}]})
    rows.append({"conversations": [{"value": "hi"}, {"value": "a " * 10}]})  # prompt < 4
    family, data = rows_of(local_copy(tmp_path, rows), "Aeala/ShareGPT_Vicuna_unfiltered")
    ds = sample_hf_requests(data, family, tok, 8, None, 0, template=None, no_oversample=True)
    assert len(ds.prompts) == 8  # the one-turn and the too-short rows are left out
    assert all(p.startswith("the ") for p in ds.prompts)  # never templated
    completions = [len(tok.encode_batch(["a " * (6 + i)])[0]) + 1 for i in range(8)]
    assert sorted(ds.output_lens.tolist()) == completions  # the completion's tokens + BOS
    topped = sample_hf_requests(
        rows_of(local_copy(tmp_path, rows), "Aeala/ShareGPT_Vicuna_unfiltered")[1],
        family, tok, 12, 5, 0, template=None,
    )  # fmt: skip
    assert len(topped.prompts) == 12 and topped.output_lens.tolist() == [5] * 12


def test_blazedit_keeps_the_edit_distance_window(tok, tmp_path):
    rows = [
        {"code": f"x = {i}", "change_request": "rename x", "norm_distance": i / 10}
        for i in range(10)
    ]
    family, data = rows_of(local_copy(tmp_path, rows), "vdaita/edit_5k_char")
    ds = sample_hf_requests(
        data, family, tok, 10, None, 0, None, no_oversample=True, distance_range=(0.3, 0.6)
    )
    assert sorted(p.split("x = ")[1][0] for p in ds.prompts) == ["3", "4", "5", "6"]
    assert ds.prompts[0].startswith("Given a code file, please apply the change requests")
    assert ds.output_lens.tolist() == [4000] * 4


def test_zeta_outputs_are_the_editable_region_and_mlperf_is_always_templated(tok, tmp_path):
    zeta = [{"events": "e", "input": "i", "output": "head <|editable_region_start|> body"}]
    family, data = rows_of(local_copy(tmp_path / "z", zeta), "zed-industries/zeta")
    ds = sample_hf_requests(data, family, tok, 1, 999, 0, None)  # --hf-output-len is ignored
    expected = len(tok.encode_batch(["<|editable_region_start|> body"])[0]) + 1
    assert ds.output_lens.tolist() == [expected]
    assert ds.prompts[0].endswith("### User Excerpt:\n\ni\n\n### Response:\n\n")
    mlperf = [{"system_prompt": "Be brief.", "question": "the " * 6, "output": "a " * 9}]
    family, data = rows_of(local_copy(tmp_path / "m", mlperf), "mgoin/mlperf-inference-llama2-data")
    template = load_chat_template("loadgen-mock")
    ds = sample_hf_requests(data, family, tok, 1, None, 0, template)
    assert ds.prompts == [
        template.render([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "the " * 6},
        ])
    ]  # fmt: skip
    assert ds.output_lens.tolist() == [len(tok.encode_batch(["a " * 9])[0])]  # no BOS here
