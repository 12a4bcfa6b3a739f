"""`loadgen run`'s traffic section: what is sent and when (the request count, rate, concurrency
and ramp-up, the bodies' extras and sampling parameters, conversations) and by whom (the worker
processes, local, remote or on Ray).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from loadgen.backends import GENERATION_BACKENDS
from loadgen.config.errors import ConfigError
from loadgen.config.flag_terms import (
    ABOVE,
    AT_LEAST,
    LOADGEN,
    NOT_RERANK,
    available_cores,
    sampling,
)
from loadgen.config.gates import parse_slo
from loadgen.config.parsers import (
    parse_duration,
    parse_json_object,
    parse_listen,
    parse_names,
)
from loadgen.config.sweep_lists import parse_concurrency, parse_rate
from loadgen.flag import flag
from loadgen.schedule import RAMP_UP_STRATEGIES

RAMP_UP_RATES_MISSING = (
    "When using --ramp-up-strategy, both --ramp-up-start-rps and --ramp-up-end-rps must be "
    "specified"
)


@dataclasses.dataclass(frozen=True)
class RampUp:
    """A ramp-up: --ramp-up-strategy from --ramp-up-start-rps to --ramp-up-end-rps."""

    strategy: str
    start_rps: int
    end_rps: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Traffic:
    """The traffic: the schedule, the requests, the workers that send them, the campaign."""

    # --- the schedule ---
    num_prompts: int = flag("--num-prompts", int, 1000)
    seed: int = flag("--seed", int, 0)
    request_rate: float | tuple[float, ...] = flag(
        "--request-rate",
        default="inf",
        minimum=0,
        min_open=True,
        range_words=ABOVE,
        parse=parse_rate,
        help="Requests per second; inf sends all at t0. A comma list (1,2,inf) runs each in turn "
        "(a campaign).",
    )
    burstiness: float = flag(
        "--burstiness",
        float,
        1.0,
        minimum=0,
        min_open=True,
        range_words=ABOVE,
        help="Gamma shape of the arrival gaps; 1 is Poisson.",
    )
    max_concurrency: int | tuple[int, ...] | None = flag(
        "--max-concurrency",
        minimum=0,
        min_open=True,
        range_words="{name} must be greater than 0",
        parse=parse_concurrency,
        help="Most requests in flight at once, across all workers. A comma list (1,4,16) runs "
        "each in turn (a campaign; with a --request-rate list, every pair).",
    )
    ramp_up_strategy: str | None = flag(
        "--ramp-up-strategy",
        choices=RAMP_UP_STRATEGIES,
        help="Ramp the request rate per request from --ramp-up-start-rps to --ramp-up-end-rps "
        "over the run; leave --request-rate at inf.",
    )
    ramp_up_start_rps: int | None = flag(
        "--ramp-up-start-rps", int, help="Ramp-up: the first request's rate."
    )
    ramp_up_end_rps: int | None = flag(
        "--ramp-up-end-rps", int, help="Ramp-up: the last request's rate."
    )
    # --- a run bounded by time, and its steady window ---
    duration: float | None = flag(
        "--duration",
        parse=parse_duration,
        group=LOADGEN,
        metavar="TIME",
        help="Send requests until this much time has passed since t0 (90, 90s, 5m, 1h): at a "
        "paced --request-rate one seeded schedule of rate x duration requests; at rate inf "
        "(with --max-concurrency, a closed loop) requests until the time is up. Requests are "
        "prepared in blocks (--duration-block) sent to the workers before they run out, each "
        "block's prompts drawn with a seed of its own. With --num-prompts given too, whichever "
        "bound comes first ends the run. At the deadline nothing new is sent; requests in "
        "flight have --duration-grace-s to finish, then are cancelled (counted as cancelled, "
        "not failed).",
    )
    duration_block: int | None = flag(
        "--duration-block",
        int,
        group=LOADGEN,
        minimum=1,
        help="With --duration: requests per prepared block (default: 10 s of a paced rate, "
        "at least 1024 and 4 x --max-concurrency; a campaign: its points' largest); the "
        "coordinator holds a few blocks, whatever the run's length.",
    )
    duration_grace_s: float = flag(
        "--duration-grace-s",
        float,
        30.0,
        group=LOADGEN,
        minimum=0,
        help="With --duration: how long requests in flight at the deadline may take to finish "
        "before they are cancelled.",
    )
    warmup_s: float = flag(
        "--warmup-s",
        float,
        0.0,
        group=LOADGEN,
        reporting=True,
        minimum=0,
        help="Requests sent in the first this many seconds after t0 are outside the steady "
        "window, whose figures every view reports beside the whole run's (`loadgen report "
        "RECORDS --warmup-s W` draws it again).",
    )
    cooldown_s: float = flag(
        "--cooldown-s",
        float,
        0.0,
        group=LOADGEN,
        reporting=True,
        minimum=0,
        help="Requests that ended in the run's last this many seconds are outside the steady "
        "window.",
    )
    # --- the requests ---
    ignore_eos: bool = flag(
        "--ignore-eos", bool, False, help="Send ignore_eos (always on for random)."
    )
    logprobs: int | None = flag(
        "--logprobs", int, readers=GENERATION_BACKENDS, help="logprobs sent with completions."
    )
    use_beam_search: bool = flag(
        "--use-beam-search",
        bool,
        False,
        help="Accepted as upstream accepts it; it has no effect there either (warns).",
    )
    extra_body: dict[str, Any] | None = flag(
        "--extra-body",
        parse=parse_json_object,
        readers=NOT_RERANK,
        help="JSON object merged into every request body.",
    )
    request_id_prefix: str | None = flag(
        "--request-id-prefix", help="x-request-id prefix (default bench-<8 hex>-)."
    )
    lora_modules: list[str] | None = flag(
        "--lora-modules",
        default=(),
        parse=parse_names,
        multiple=True,
        nargs="+",
        metavar="NAME",
        help="LoRA adapters; each request names one as its model. Several may follow one flag.",
    )
    lora_assignment: str = flag(
        "--lora-assignment",
        default="random",
        choices=("random", "round-robin"),
        help="How requests get their adapter: seeded random choice or round-robin.",
    )
    # --- beside the run ---
    probe_request_rate: float = flag(
        "--probe-request-rate",
        float,
        0.0,
        minimum=0,
        maximum=sys.float_info.max,  # finite
        range_words="{name} must be a finite rate >= 0, got {value}",
        help="Single-token probes per second, one at a time beside the run and outside "
        "--max-concurrency; their E2EL is reported apart (0: none).",
    )
    num_warmups: int = flag(
        "--num-warmups",
        int,
        0,
        minimum=0,
        range_words=AT_LEAST,
        help="Copies of the first request sent before the timed run (capped by "
        "--max-concurrency), not measured.",
    )
    # --- the workers: local, joining at --listen, or Ray actors ---
    workers: int = flag(
        "--workers",
        int,
        default_factory=available_cores,
        group=LOADGEN,
        help="Worker processes (default: one per available core; at most 4 per core). With "
        "--ray: Ray actors, one per worker, over the cluster's nodes. 0 with --remote-workers: "
        "every worker joins by hand.",
    )
    listen: tuple[str, int] | None = flag(
        "--listen",
        str,
        None,
        group=LOADGEN,
        parse=parse_listen,
        help="HOST:PORT where workers on other hosts join this run (`loadgen worker --connect "
        "tcp://HOST:PORT --key worker.key`), over CurveZMQ with --key's keys; port 0: any free "
        "one (printed). Needs --remote-workers and --key.",
    )
    remote_workers: int = flag(
        "--remote-workers",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="Workers that join by hand at --listen; the run waits for them all before t0. "
        "They mix with --workers local ones.",
    )
    key: str | None = flag(
        "--key",
        str,
        None,
        group=LOADGEN,
        help="The coordinator's key file (coordinator.key from `loadgen keygen DIR`): only "
        "workers holding the worker.key written with it may join at --listen.",
    )
    ray: str | None = flag(
        "--ray",
        str,
        None,
        group=LOADGEN,
        help="Place the --workers as Ray actors on the cluster at this address ('auto': the "
        "local one, as `ray start` left it); needs the [ray] extra. Keys are made for the run.",
    )
    workers_per_node: int | None = flag(
        "--workers-per-node",
        int,
        None,
        group=LOADGEN,
        minimum=1,
        help="With --ray: workers on each node, filling nodes in order (default: spread the "
        "workers round the nodes).",
    )
    # --- conversations: the Rust client's --multi-turn family, and loadgen's think time ---
    multi_turn: bool = flag(
        "--multi-turn",
        bool,
        False,
        group=LOADGEN,
        help="Run conversations (openai-chat; --dataset-name random or sharegpt): "
        "--num-prompts of them, each turn sent when the one before it ended, with the "
        "conversation so far (the server's answers included) and an X-Session-ID; conversations "
        "start on the --request-rate schedule; a failed turn ends its conversation.",
    )
    multi_turn_num_turns: int = flag(
        "--multi-turn-num-turns",
        int,
        3,
        group=LOADGEN,
        minimum=1,
        help="With --multi-turn and random: turns per conversation.",
    )
    multi_turn_min_turns: int = flag(
        "--multi-turn-min-turns",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn and random: the fewest turns a conversation has, each drawn "
        "from [min, max] with --seed (0: --multi-turn-num-turns).",
    )
    multi_turn_max_turns: int = flag(
        "--multi-turn-max-turns",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn: the most turns a conversation has (random: 0 is "
        "--multi-turn-num-turns; sharegpt: 0 keeps every turn of a conversation).",
    )
    multi_turn_concurrency: int | None = flag(
        "--multi-turn-concurrency",
        int,
        None,
        group=LOADGEN,
        minimum=1,
        sets=("max_concurrency",),
        help="With --multi-turn: the most turns in flight at once, over all conversations "
        "(the same cap as --max-concurrency, which it sets); a conversation thinking between "
        "turns holds no slot.",
    )
    multi_turn_delay_ms: float = flag(
        "--multi-turn-delay-ms",
        float,
        0.0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn: think time between a turn's end and the next turn, in ms.",
    )
    multi_turn_delay_distribution: str = flag(
        "--multi-turn-delay-distribution",
        str,
        "fixed",
        group=LOADGEN,
        choices=("fixed", "exponential"),
        help="With --multi-turn: each think time is --multi-turn-delay-ms (fixed) or drawn with "
        "that mean (exponential, with --seed).",
    )
    per_turn_input_len: int = flag(
        "--per-turn-input-len",
        int,
        0,
        group=LOADGEN,
        minimum=0,
        help="With --multi-turn and random: input tokens of each turn after the first "
        "(0: --random-input-len).",
    )
    # --- the run as a whole: a plan without a run, failing fast, campaigns ---
    dry_run: bool = flag(
        "--dry-run",
        bool,
        False,
        group=LOADGEN,
        help="Print the plan (the dataset's token lengths, the schedule and its hash, each "
        "worker's requests and credits) and exit 0: no worker started, no request sent.",
    )
    fail_fast: bool = flag(
        "--fail-fast",
        bool,
        True,
        secondary="--no-fail-fast",
        group=LOADGEN,
        help="Stop the run when its first 20 requests (or all of a smaller run) fail with the "
        "same 4xx and message (not 408 or 429), naming the likely fix.",
    )
    same_prompts: bool = flag(
        "--same-prompts",
        bool,
        False,
        group=LOADGEN,
        help="In a campaign, send every point and run the prompts --seed draws. By default each "
        "run draws its own from a seed derived from --seed, the point and the run (in its result "
        "JSON as loadgen.seed), so no point is served from what an earlier one left in the "
        "server's prefix cache.",
    )
    reset_prefix_cache: bool = flag(
        "--reset-prefix-cache",
        bool,
        False,
        group=LOADGEN,
        help="Empty the server's prefix cache before the run (each run of a campaign): vLLM's "
        "POST /reset_prefix_cache (served with VLLM_SERVER_DEV_MODE=1), SGLang's POST "
        "/flush_cache. Refused at the start when the server has neither (docs/servers.md).",
    )
    num_runs: int = flag(
        "--num-runs",
        int,
        1,
        group=LOADGEN,
        minimum=1,
        help="Runs of each point (each --max-concurrency and --request-rate pair); more than 1 "
        "makes a campaign, whose summary.csv gives each metric's mean and 95 % interval.",
    )
    steady_state: bool = flag(
        "--steady-state",
        bool,
        False,
        group=LOADGEN,
        help="Run as a campaign whose summary.csv counts only each run's requests sent after "
        "its first request ended and ended before its last one was sent, and says how many "
        "it trimmed.",
    )
    # --- the SLO, and the search for the most load within it (loadgen/session/search.py) ---
    slo: tuple[str, ...] = flag(
        "--slo",
        default=(),
        parse=parse_slo,
        multiple=True,
        metavar="CONDITIONS",
        group=LOADGEN,
        help="Conditions each point must meet, --fail-on's grammar, comma-separated (e.g. "
        "'p99_ttft_ms<=500,p99_itl_ms<=50') on summary.csv's metrics: each run is marked as "
        "meeting it or not, and the highest-throughput point that does is named. Makes a "
        "campaign.",
    )
    search: str | None = flag(
        "--search",
        choices=("rate", "concurrency"),
        group=LOADGEN,
        help="Find the highest --request-rate (or --max-concurrency) that meets --slo: double "
        "from --search-start until it fails, then bisect, repeating a probe near the line, "
        "until the bracket is within --search-tolerance.",
    )
    search_start: float = flag(
        "--search-start",
        float,
        1.0,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="With --search: the first load probed (requests per second, or concurrency). A "
        "probe at rate r lasts --num-prompts / r seconds: start within a few doublings of "
        "the answer.",
    )
    search_max: float = flag(
        "--search-max",
        float,
        1024.0,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="With --search: the highest load probed; a search whose every probe meets the SLO "
        "stops there and says so.",
    )
    search_tolerance: float = flag(
        "--search-tolerance",
        float,
        0.1,
        group=LOADGEN,
        minimum=0,
        maximum=1,
        min_open=True,
        help="With --search: stop when the bracket's width is at most this fraction of its "
        "lower end.",
    )
    search_repeats: int = flag(
        "--search-repeats",
        int,
        2,
        group=LOADGEN,
        minimum=0,
        help="With --search: extra runs of a probe whose measured value's 95 % interval holds "
        "an SLO threshold (run-to-run noise could flip its verdict).",
    )
    # --- the sampling parameters ---
    top_p: float | None = sampling("--top-p", float, "top_p sent with every request.")
    top_k: int | None = sampling("--top-k", int, "top_k sent with every request.")
    min_p: float | None = sampling("--min-p", float, "min_p sent with every request.")
    temperature: float | None = sampling("--temperature", float, "temperature sent.")
    frequency_penalty: float | None = sampling(
        "--frequency-penalty", float, "frequency_penalty sent."
    )
    presence_penalty: float | None = sampling("--presence-penalty", float, "presence_penalty sent.")
    repetition_penalty: float | None = sampling(
        "--repetition-penalty", float, "repetition_penalty sent (completions carry 1.0 otherwise)."
    )

    @property
    def rate(self) -> float:
        """--request-rate of one run: a list is a campaign's, whose points each have one."""
        if isinstance(self.request_rate, tuple):
            raise TypeError("--request-rate is a list: each point of the campaign has one rate")
        return self.request_rate

    @property
    def concurrency(self) -> int | None:
        """--max-concurrency of one run: a list is a campaign's, whose points each have one."""
        if isinstance(self.max_concurrency, tuple):
            raise TypeError("--max-concurrency is a list: each point of the campaign has one")
        return self.max_concurrency

    @property
    def ramp_up(self) -> RampUp | None:
        """The ramp-up, or None without --ramp-up-strategy (a strategy without both rates is
        refused, as validate() refuses it)."""
        if self.ramp_up_strategy is None:
            return None
        if self.ramp_up_start_rps is None or self.ramp_up_end_rps is None:
            raise ConfigError(RAMP_UP_RATES_MISSING)
        return RampUp(self.ramp_up_strategy, self.ramp_up_start_rps, self.ramp_up_end_rps)
