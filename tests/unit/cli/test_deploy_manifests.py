"""deploy/ stays true to the CLI: every `loadgen` command in deploy/kubernetes/ and in
deploy/README.md's code blocks is one the real click CLI accepts, and the manifests agree with
each other (the Service's name and port, K, each pod's key Secret)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import click
import pytest
import yaml
from helpers import ROOT

from loadgen.cli import cli

DEPLOY = ROOT / "deploy"
MANIFESTS = DEPLOY / "kubernetes"
README = DEPLOY / "README.md"
DOCKERFILE = DEPLOY / "Dockerfile"
SHELLS = ("sh", "bash")
NUMBER = re.compile(r"^-\d")  # -1 is a value, not an option


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script, each as its words (comments and operators dropped)."""
    commands: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in lexer:
            if set(token) <= set(lexer.punctuation_chars):  # ; && | > ... end a command
                commands.append(words)
                words = []
            else:
                words.append(token)
        commands.append(words)
    return [words for words in commands if words]


def loadgen_argvs(commands: list[list[str]]) -> list[list[str]]:
    """The argv after `loadgen` of each command that runs it."""
    argvs = []
    for words in commands:
        while words and (words[0] == "exec" or re.match(r"^[A-Za-z_]\w*=", words[0])):
            words = words[1:]
        if words and PurePosixPath(words[0]).name == "loadgen":
            argvs.append(words[1:])
    return argvs


def image_entrypoint() -> list[str]:
    """deploy/Dockerfile's ENTRYPOINT: what a container without `command` runs."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("ENTRYPOINT")]
    return json.loads(lines[-1].removeprefix("ENTRYPOINT"))


def container_argvs(container: dict) -> list[list[str]]:
    """`loadgen`'s argv in each command a container runs, directly or in an `sh -c` script."""
    argv = [*(container.get("command") or image_entrypoint()), *container.get("args", [])]
    if PurePosixPath(argv[0]).name in SHELLS and argv[1:2] == ["-c"]:
        return loadgen_argvs(shell_commands(argv[2]))
    return loadgen_argvs([argv])


def cli_problems(argv: list[str]) -> list[str]:
    """Why `loadgen ARGV` does not fit the real CLI's subcommand and options; empty if it fits."""
    if not argv:
        return ["no subcommand"]
    command = cli.get_command(click.Context(cli), argv[0])
    if command is None:
        return [f"no subcommand {argv[0]!r}"]
    options = [param for param in command.params if isinstance(param, click.Option)]
    by_name = {name: option for option in options for name in option.opts + option.secondary_opts}
    problems, positional, given = [], [], set()
    i = 1
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":
            positional += argv[i:]
            break
        if not word.startswith("-") or word == "-" or NUMBER.match(word):
            positional.append(word)
            continue
        name, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        option = by_name.get(name)
        if option is None:
            problems.append(f"loadgen {argv[0]}: no option {name}")
            continue
        given.add(option.name)
        takes_value = name in option.opts and not option.is_flag and not option.count
        if not takes_value:
            if eq:
                problems.append(f"loadgen {argv[0]}: {name} takes no value")
            continue
        values = [value] if eq else argv[i : i + option.nargs]
        i += 0 if eq else len(values)
        if len(values) < option.nargs or any(v == "" or v in by_name for v in values):
            problems.append(f"loadgen {argv[0]}: {name} needs a value")
    for option in options:
        if option.required and option.name not in given:
            problems.append(f"loadgen {argv[0]}: {option.opts[0]} is required")
    arguments = [param for param in command.params if isinstance(param, click.Argument)]
    if not any(argument.nargs == -1 for argument in arguments):
        most = sum(argument.nargs for argument in arguments)
        if len(positional) > most:
            problems.append(f"loadgen {argv[0]}: unexpected argument(s) {positional[most:]}")
    fewest = sum(max(argument.nargs, 1) for argument in arguments if argument.required)
    if len(positional) < fewest:
        problems.append(
            f"loadgen {argv[0]}: {fewest} argument(s) expected, {len(positional)} given"
        )
    return problems


def option_value(argv: list[str], name: str) -> str | None:
    """The value given to option NAME in argv (its last occurrence), or None."""
    found = None
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(name + "="):
            found = word.split("=", 1)[1]
    return found


def manifests() -> list[tuple[str, dict]]:
    """Every YAML document in deploy/kubernetes/, with the file it came from."""
    paths = sorted(MANIFESTS.glob("*.yaml")) + sorted(MANIFESTS.glob("*.yml"))
    return [
        (path.name, document)
        for path in paths
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]


def pod_spec(document: dict) -> dict | None:
    """The pod spec a workload document runs (a Pod's own, or its template's), else None."""
    if document["kind"] == "Pod":
        return document["spec"]
    return document.get("spec", {}).get("template", {}).get("spec")


def loadgen_containers() -> list[tuple[str, dict, dict, list[str]]]:
    """(file, document, container, argv) for each `loadgen` command a manifest's container runs."""
    found = []
    for file, document in manifests():
        spec = pod_spec(document)
        for container in (spec or {}).get("containers", []) + (spec or {}).get(
            "initContainers", []
        ):
            found += [(file, document, container, argv) for argv in container_argvs(container)]
    return found


def the_one(subcommand: str) -> tuple[dict, dict, list[str]]:
    """The workload document, container and argv that run `loadgen SUBCOMMAND`."""
    matches = [(d, c, argv) for _, d, c, argv in loadgen_containers() if argv[:1] == [subcommand]]
    assert len(matches) == 1, f"expected one container running `loadgen {subcommand}`"
    return matches[0]


def readme_commands() -> list[list[str]]:
    """The commands of deploy/README.md's fenced code blocks."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", README.read_text(), re.DOTALL | re.MULTILINE)
    return [words for block in blocks for words in shell_commands(block)]


def created_secrets() -> dict[str, dict[str, str]]:
    """Secret name -> {key in the Secret: file it is made from}, per README's `kubectl create`."""
    secrets = {}
    for words in readme_commands():
        if words[:4] == ["kubectl", "create", "secret", "generic"]:
            sources = [
                w.removeprefix("--from-file=") for w in words if w.startswith("--from-file=")
            ]
            pairs = [s.split("=", 1) if "=" in s else [PurePosixPath(s).name, s] for s in sources]
            secrets[words[4]] = dict(pairs)
    return secrets


def key_secret(spec: dict, container: dict, key_path: str) -> tuple[str, str]:
    """(Secret name, key in it) that the container's file KEY_PATH is mounted from."""
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret and PurePosixPath(mount["mountPath"]) in PurePosixPath(key_path).parents:
            relative = str(PurePosixPath(key_path).relative_to(mount["mountPath"]))
            items = {item["path"]: item["key"] for item in secret.get("items", [])}
            return secret["secretName"], items.get(relative, relative)
    raise AssertionError(f"{key_path} is on no Secret volume of container {container['name']}")


def cpu_cores(quantity: str | int | float) -> float:
    """A Kubernetes CPU quantity in cores ("1", 1, "1000m")."""
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


MANIFEST_COMMANDS = [
    (f"{file}:{container['name']}", argv) for file, _, container, argv in loadgen_containers()
]
README_COMMANDS = loadgen_argvs(readme_commands())


def test_the_checker_refuses_what_the_cli_refuses():
    assert cli_problems(["run", "--model", "m", "--save-result", "--num-prompts=5"]) == []
    assert cli_problems(["no-such-command"])
    assert cli_problems(["run", "--no-such-flag"])
    assert cli_problems(["run", "--model"])
    assert cli_problems(["run", "--model", "--save-result"])
    assert cli_problems(["run", "--save-result=yes"])
    assert cli_problems(["run", "--save-result", "true"])  # a flag given a value leaves a stray


@pytest.mark.parametrize(
    ("where", "argv"), MANIFEST_COMMANDS, ids=[w for w, _ in MANIFEST_COMMANDS]
)
def test_manifest_commands_fit_the_cli(where, argv):
    assert cli_problems(argv) == [], where


@pytest.mark.parametrize(
    "argv", README_COMMANDS, ids=[" ".join(argv[:2]) for argv in README_COMMANDS]
)
def test_readme_commands_fit_the_cli(argv):
    assert cli_problems(argv) == []


def test_the_example_runs_a_coordinator_and_workers():
    assert {argv[0] for _, argv in MANIFEST_COMMANDS} >= {"run", "worker"}
    assert [argv[0] for argv in README_COMMANDS].count("keygen") == 1


def test_workers_connect_to_the_service_the_coordinator_listens_on():
    services = [d for _, d in manifests() if d["kind"] == "Service"]
    assert len(services) == 1
    service = services[0]
    coordinator_job, coordinator, run_argv = the_one("run")
    _, _, worker_argv = the_one("worker")
    connect = urlsplit(option_value(worker_argv, "--connect") or "")
    listen_host, _, listen_port = (option_value(run_argv, "--listen") or "").rpartition(":")
    [port] = service["spec"]["ports"]
    assert service["spec"].get("clusterIP") == "None"  # headless: the name is the pod's IP
    assert connect.scheme == "tcp"
    assert connect.hostname == service["metadata"]["name"]
    assert connect.port == port["port"] == port.get("targetPort", port["port"])
    assert listen_host == "0.0.0.0" and int(listen_port) == port["port"]
    labels = coordinator_job["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    declared = [p["containerPort"] for p in coordinator.get("ports", [])]
    assert declared in ([], [port["port"]])


def test_remote_workers_is_the_worker_jobs_size():
    _, _, run_argv = the_one("run")
    worker_job, _, _ = the_one("worker")
    k = int(option_value(run_argv, "--remote-workers") or 0)
    assert worker_job["kind"] == "Job"
    assert worker_job["spec"]["completionMode"] == "Indexed"
    assert k == worker_job["spec"]["completions"] == worker_job["spec"]["parallelism"]
    assert option_value(run_argv, "--workers") == "0"  # every worker is a remote one


def test_each_pod_mounts_only_its_own_key_from_keygen():
    [keygen_argv] = [argv for argv in README_COMMANDS if argv[0] == "keygen"]
    keys_dir = PurePosixPath(keygen_argv[1])
    created = created_secrets()
    secret_of = {}
    for subcommand, key_file in (("run", "coordinator.key"), ("worker", "worker.key")):
        document, container, argv = the_one(subcommand)
        spec = pod_spec(document)
        secret, key = key_secret(spec, container, option_value(argv, "--key") or "")
        assert created[secret][key] == str(keys_dir / key_file), f"{secret} must hold {key_file}"
        mounted = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        assert mounted == {secret}, f"the {subcommand} pod must mount only {secret}"
        secret_of[subcommand] = secret
    assert secret_of["run"] != secret_of["worker"]


def test_workers_take_one_core_each_and_spread_over_nodes():
    document, container, _ = the_one("worker")
    spec = pod_spec(document)
    resources = container["resources"]
    assert cpu_cores(resources["requests"]["cpu"]) == cpu_cores(resources["limits"]["cpu"]) == 1
    spread = [c["topologyKey"] for c in spec.get("topologySpreadConstraints", [])]
    anti = spec.get("affinity", {}).get("podAntiAffinity", {})
    anti_keys = [
        term.get("podAffinityTerm", term).get("topologyKey")
        for terms in anti.values()
        for term in terms
    ]
    assert "kubernetes.io/hostname" in spread + anti_keys


def test_the_coordinator_saves_its_result_on_a_volume():
    _, container, argv = the_one("run")
    assert "--save-result" in argv
    result_dir = PurePosixPath(option_value(argv, "--result-dir") or "/nowhere")
    mounts = [PurePosixPath(m["mountPath"]) for m in container.get("volumeMounts", [])]
    assert any(result_dir == m or m in result_dir.parents for m in mounts)
