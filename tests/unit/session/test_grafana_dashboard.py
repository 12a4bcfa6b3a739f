"""deploy/grafana/: every metric the dashboard queries is one loadgen's --prometheus-port serves
or a vLLM name the scraper knows, and the Prometheus config scrapes both."""

from __future__ import annotations

import json
import re

import numpy as np
import yaml
from helpers import ROOT
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.server.metric_names import COMMON_NAMES
from loadgen.session.live_prometheus import LiveMetrics

GRAFANA = ROOT / "deploy" / "grafana"
METRIC = re.compile(r"\b((?:loadgen_|vllm:)[a-z0-9_:]+)")


def served() -> set[str]:
    """The sample names --prometheus-port serves."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LiveMetrics("r", "m", np.zeros(1, dtype=np.int64), None, []))
    page = generate_latest(registry).decode()
    return {s.name for f in text_string_to_metric_families(page) for s in f.samples}


def test_the_dashboard_queries_only_metrics_that_exist() -> None:
    dashboard = json.loads((GRAFANA / "loadgen-vllm.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    names = {name for expr in exprs for name in METRIC.findall(expr)}
    loadgen = {n for n in names if n.startswith("loadgen_")}
    vllm = {n for n in names if n.startswith("vllm:")}
    assert loadgen and loadgen <= served()
    assert vllm and vllm <= set(COMMON_NAMES)
    # The client's rows come first, the server's under them.
    titles = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert titles[0].startswith("loadgen") and titles[1].startswith("vLLM")


def test_the_prometheus_config_scrapes_loadgen_and_vllm() -> None:
    config = yaml.safe_load((GRAFANA / "prometheus.yml").read_text())
    assert {job["job_name"] for job in config["scrape_configs"]} == {"loadgen", "vllm"}
