"""burstgpt as upstream's BurstGPTDataset samples it (pandas' df.sample, drawn without pandas);
without sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.datasets.burstgpt import load_burstgpt, sample_burstgpt, sampled_rows
from loadgen.text.tokenizer import LocalTokenizer

HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def write_trace(path: Path, n: int) -> Path:
    lines = [
        f"{i},{'GPT-4' if i % 3 else 'ChatGPT'},{10 + i},{i % 4},{10 + 2 * i},Conversation log\n"
        for i in range(n)
    ]
    path.write_text(HEADER + "".join(lines))
    return path


def test_only_gpt4_rows_with_a_response_are_kept(tmp_path: Path) -> None:
    rows = load_burstgpt(str(write_trace(tmp_path / "t.csv", 9)))
    assert rows == [(10 + i, i % 4) for i in range(9) if i % 3 and i % 4]


@pytest.mark.parametrize(("n", "seed"), [(3, 0), (5, 7), (40, 1)])
def test_sampling_is_pandas_df_sample(tmp_path: Path, n: int, seed: int) -> None:
    pandas = pytest.importorskip("pandas")
    path = write_trace(tmp_path / "t.csv", 30)
    df = pandas.read_csv(path)
    df = df[(df["Model"] == "GPT-4") & (df["Response tokens"] > 0)]
    expected = df.sample(n=n, random_state=seed, replace=n > len(df)).values.tolist()
    got = sampled_rows(load_burstgpt(str(path)), n, seed)
    assert got == [(int(row[2]), int(row[3])) for row in expected]


def test_prompts_are_decoded_id_runs_counted_as_the_trace_says(tok: LocalTokenizer) -> None:
    rows = [(5, 2), (3, 4)]
    got = sample_burstgpt(rows, tok, 4, 0)
    chosen = sampled_rows(rows, 4, 0)
    assert got.prompt_lens.tolist() == [n for n, _ in chosen]
    assert got.output_lens.tolist() == [out for _, out in chosen]
    vocab = tok.vocab_size
    ids = [[(i + j) % vocab for j in range(n)] for i, (n, _) in enumerate(chosen)]
    assert got.prompts == tok.decode_batch(ids)


def test_a_bad_trace_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "e.csv"
    empty.write_text(HEADER + "1,ChatGPT,3,4,7,x\n")
    with pytest.raises(ValueError, match="no GPT-4 rows"):
        load_burstgpt(str(empty))
    bad = tmp_path / "b.csv"
    bad.write_text(HEADER + "1,GPT-4,three,4,7,x\n")
    with pytest.raises(ValueError, match=r"b\.csv:2: the request and response token counts"):
        load_burstgpt(str(bad))
    with pytest.raises(ValueError, match="Model"):
        (tmp_path / "h.csv").write_text("a,b\n")
        load_burstgpt(str(tmp_path / "h.csv"))
