"""The Prometheus pages of each server, parsed and mapped to common names (no sockets).

The pages are small but as each server writes them: the metric names, types and labels of
vLLM (V1 and V0), SGLang, llama.cpp's --metrics, TGI, an NVIDIA DCGM exporter and a node
exporter, with the histograms and ``_created`` samples prometheus_client's servers add.
"""

from __future__ import annotations

import pytest

from loadgen.server.metric_names import PageError, parse_page

VLLM_V1 = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.4375
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 2.0
vllm:num_preemptions_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7649e+09
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 51200.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 20480.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 102400.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 25600.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen3-8B"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="Qwen/Qwen3-8B"} 90.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 100.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 100.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 21.5
"""

VLLM_V0 = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.5
"""

SGLANG = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 24.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0075
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct"} 1812.5
"""

LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 33065
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 7801
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 140.26
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.125
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
"""

# As llama-server 0.5.0-dev (commit 0c1e570) wrote it with --metrics (some lines left out): no
# KV-cache gauge, a counter of prompt tokens found in the cache, a counter without "_total".
LLAMACPP_2026 = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 45140
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 20652
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 7104
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 320
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 3
"""

TGI = """\
# TYPE tgi_queue_size gauge
tgi_queue_size 5
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 16
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="100"} 2
tgi_request_input_length_bucket{le="+Inf"} 10
tgi_request_input_length_sum 4096
tgi_request_input_length_count 10
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="+Inf"} 10
tgi_request_generated_tokens_sum 1280
tgi_request_generated_tokens_count 10
"""

DCGM = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",modelName="NVIDIA H100",Hostname="n1"} 12
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 612.5
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 74512
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 64
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 1980
"""

NODE = """\
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1 3.5
# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 1234.5
node_cpu_seconds_total{cpu="0",mode="user"} 99.25
"""

ENGINE = (("engine", "0"), ("model_name", "Qwen/Qwen3-8B"))


def test_vllm_v1_maps_every_known_series_and_drops_buckets_and_created() -> None:
    samples = parse_page(VLLM_V1).samples
    assert samples == {
        ("requests_running", ENGINE): 12.0,
        ("requests_waiting", ENGINE): 3.0,
        ("kv_cache_usage", ENGINE): 0.4375,
        ("preemptions", ENGINE): 2.0,
        ("prefix_cache_queries", ENGINE): 51200.0,
        ("prefix_cache_hits", ENGINE): 20480.0,
        ("prompt_tokens", ENGINE): 102400.0,
        ("generation_tokens", ENGINE): 25600.0,
        ("vllm:time_to_first_token_seconds_count", ENGINE): 100.0,
        ("vllm:time_to_first_token_seconds_sum", ENGINE): 21.5,
    }


def test_help_lines_are_not_parsed_whatever_they_say() -> None:
    # Left out before the parse: the same samples with or without them, even with a HELP
    # the parser would stumble on (an escape it does not know, a line that is not a name).
    without_help = "\n".join(line for line in VLLM_V1.split("\n") if not line.startswith("# HELP"))
    odd = VLLM_V1.replace("# HELP vllm:num_requests_running", '# HELP \\q {x="\n# HELP')
    expected = parse_page(without_help).samples
    assert expected and parse_page(VLLM_V1).samples == expected == parse_page(odd).samples


def test_vllm_v0_names_map_to_the_same_common_names() -> None:
    labels = (("model_name", "m"),)
    assert parse_page(VLLM_V0).samples == {
        ("kv_cache_usage", labels): 0.25,
        ("prefix_cache_hit_rate", labels): 0.5,
    }


def test_sglang() -> None:
    labels = (("model_name", "meta-llama/Llama-3.1-8B-Instruct"),)
    samples = parse_page(SGLANG).samples
    assert samples[("requests_running", labels)] == 24.0
    assert samples[("requests_waiting", labels)] == 7.0
    assert samples[("kv_cache_usage", labels)] == 0.28
    assert samples[("prefix_cache_hit_rate", labels)] == 0.0075
    assert samples[("prompt_tokens", labels)] == 8.128902e06
    assert samples[("generation_tokens", labels)] == 7.557572e06
    assert samples[("sglang:gen_throughput", labels)] == 1812.5  # unknown: its own name


def test_llamacpp() -> None:
    assert parse_page(LLAMACPP).samples == {
        ("prompt_tokens", ()): 33065.0,
        ("generation_tokens", ()): 7801.0,
        ("llamacpp:prompt_tokens_seconds", ()): 140.26,
        ("kv_cache_usage", ()): 0.125,
        ("requests_running", ()): 4.0,
        ("requests_waiting", ()): 1.0,
    }


def test_llamacpp_2026_maps_its_cache_hits_and_keeps_the_rest() -> None:
    assert parse_page(LLAMACPP_2026).samples == {
        ("prompt_tokens", ()): 45140.0,
        ("prefix_cache_hits", ()): 20652.0,
        ("generation_tokens", ()): 7104.0,
        ("requests_running", ()): 4.0,
        ("requests_waiting", ()): 3.0,
        # prometheus_client's parser names a counter's sample with "_total" when it lacks it
        ("llamacpp:n_tokens_max_total", ()): 320.0,
    }


def test_tgi_token_totals_are_its_histograms_sums() -> None:
    assert parse_page(TGI).samples == {
        ("requests_waiting", ()): 5.0,
        ("requests_running", ()): 16.0,
        ("prompt_tokens", ()): 4096.0,
        ("tgi_request_input_length_count", ()): 10.0,
        ("generation_tokens", ()): 1280.0,
        ("tgi_request_generated_tokens_count", ()): 10.0,
    }


def test_dcgm_keeps_only_the_gpu_label_of_every_gpu_series() -> None:
    samples = parse_page(DCGM).samples
    assert samples == {
        ("gpu_utilization_pct", (("gpu", "0"),)): 97.0,
        ("gpu_utilization_pct", (("gpu", "1"),)): 12.0,
        ("gpu_power_w", (("gpu", "0"),)): 612.5,
        ("gpu_memory_used_mib", (("gpu", "0"),)): 74512.0,
        ("gpu_temperature_c", (("gpu", "0"),)): 64.0,
        ("DCGM_FI_DEV_SM_CLOCK", (("gpu", "0"),)): 1980.0,
    }


def test_node_exporter_kept_as_it_is() -> None:
    assert parse_page(NODE).samples == {
        ("node_load1", ()): 3.5,
        ("node_cpu_seconds_total", (("cpu", "0"), ("mode", "idle"))): 1234.5,
        ("node_cpu_seconds_total", (("cpu", "0"), ("mode", "user"))): 99.25,
    }


def test_the_cap_keeps_common_names_first_and_counts_the_rest() -> None:
    many = "".join(f"other_metric_{i} {i}\n" for i in range(20))
    page = parse_page(many + LLAMACPP, max_series=8)
    assert len(page.samples) == 8
    assert page.dropped == 20 + 6 - 8
    common = {"prompt_tokens", "generation_tokens", "kv_cache_usage"}
    common |= {"requests_running", "requests_waiting"}
    assert common <= {name for name, _ in page.samples}
    assert ("llamacpp:prompt_tokens_seconds", ()) not in page.samples


@pytest.mark.parametrize(
    "page",
    [
        "<html><body>Not Found</body></html>",
        "\x00\x01\x02 binary",
        "metric{label=unquoted} 1\n",
        "metric not_a_number\n",
        "",
        "# only a comment\n",
    ],
)
def test_a_page_that_is_not_prometheus_text_is_refused(page: str) -> None:
    with pytest.raises(PageError):
        parse_page(page)
