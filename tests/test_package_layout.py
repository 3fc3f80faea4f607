"""The package layout's dependency rules: each layer imports only the layers below it.

server -> network -> protocol/record/config/errors; storage and the cleaner beneath the server,
never the network (the cleaner over storage). The rules are read from the source with ``ast``
(imports inside functions and ``TYPE_CHECKING`` blocks count too), so a new import against
them fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "odradek"

ABOVE_RECORD_AND_CONFIG = (
    "protocol",
    "network",
    "storage",
    "cleaner",
    "server",
    "client",
    "cli",
    "spark",
)

FORBIDDEN = {
    "network": ("storage", "cleaner", "server", "client", "cli", "spark"),
    "storage": ("network", "server", "cleaner", "client", "cli", "spark"),
    "cleaner": ("network", "server", "client", "cli", "spark"),
    "protocol": ("network", "storage", "server", "cleaner", "client", "cli", "spark"),
    "record": ABOVE_RECORD_AND_CONFIG,
    "config": ABOVE_RECORD_AND_CONFIG,
}
"""Each package of odradek, and the packages it must not import."""


def imported_modules(root: Path, path: Path) -> set[str]:
    """Every absolute module name ``path`` (a module under the package ``root``) imports,
    relative imports resolved."""
    package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            modules.add(module)
            modules.update(f"{module}.{alias.name}" for alias in node.names)
    return modules


def violations(root: Path, package: str, forbidden: tuple[str, ...]) -> list[str]:
    """The imports of ``package`` (under ``root``) of any package in ``forbidden``."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for module in sorted(imported_modules(root, path)):
            parts = module.split(".")
            if len(parts) > 1 and parts[0] == "odradek" and parts[1] in forbidden:
                found.append(f"{path.relative_to(root.parent)} imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_none_of_the_layers_above_it(package: str) -> None:
    assert (PACKAGE / package).is_dir()
    assert violations(PACKAGE, package, FORBIDDEN[package]) == []


def test_the_rule_sees_an_import_against_it(tmp_path: Path) -> None:
    """The checker finds a forbidden import, in a function and relative ones too."""
    root = tmp_path / "odradek"
    (root / "network").mkdir(parents=True)
    (root / "network" / "_layout_probe.py").write_text(
        "from odradek.protocol import frame\n"
        "def late():\n    from odradek.storage import log_manager\n"
        "from ..server import broker\n"
    )
    assert violations(root, "network", FORBIDDEN["network"]) == [
        "odradek/network/_layout_probe.py imports odradek.server",
        "odradek/network/_layout_probe.py imports odradek.server.broker",
        "odradek/network/_layout_probe.py imports odradek.storage",
        "odradek/network/_layout_probe.py imports odradek.storage.log_manager",
    ]


KAFKA_DATA_FAMILIES = ("metadata", "topics", "configs", "offsets", "producers")
"""The server/kafka/ families whose handlers call the managers with Kafka's request data."""


@pytest.mark.parametrize("family", KAFKA_DATA_FAMILIES)
def test_a_kafka_family_builds_no_msgpack_message(family: str) -> None:
    """No request of these families crosses into the msgpack protocol's messages on its way:
    their module imports nothing of odradek.protocol but Kafka's own (protocol.kafka) and the
    values both protocols share (protocol.values), and nothing of server/msgpack/."""
    path = PACKAGE / "server" / "kafka" / f"{family}.py"
    crossing = sorted(
        module
        for module in imported_modules(PACKAGE, path)
        if module.startswith(("odradek.protocol.", "odradek.server.msgpack"))
        and not module.startswith(("odradek.protocol.kafka", "odradek.protocol.values"))
    )
    assert crossing == []


RECORD_FAMILIES = ("server/kafka/produce.py", "server/kafka/fetch.py")
"""The server/kafka/ families whose handlers call the ReplicaManager with Kafka's request data
and the partition values both protocols share (ProducePartitionData, FetchPartition and their
results, still defined beside the msgpack messages), and the readers of their requests."""


def msgpack_messages(root: Path, path: Path) -> list[str]:
    """The msgpack protocol's messages (its Message classes) and the server/msgpack/ modules
    that ``path`` (a module under the package ``root``) imports."""
    import importlib

    from odradek.protocol.schema import Message

    crossing = []
    for module in sorted(imported_modules(root, path)):
        if module.startswith("odradek.server.msgpack"):
            crossing.append(module)
        elif module.startswith("odradek.protocol.") and "." in module:
            owner, _, name = module.rpartition(".")
            try:
                value = getattr(importlib.import_module(owner), name, None)
            except ImportError:
                continue
            if isinstance(value, type) and issubclass(value, Message):
                crossing.append(module)
    return crossing


@pytest.mark.parametrize(
    "module",
    (*RECORD_FAMILIES, "protocol/kafka/produce_request.py", "protocol/kafka/fetch_request.py"),
)
def test_a_kafka_produce_or_fetch_builds_no_msgpack_message(module: str) -> None:
    """A Kafka Produce or Fetch is read and answered without the msgpack protocol's
    ProduceRequest or FetchRequest (or any of its messages) on its way."""
    assert msgpack_messages(PACKAGE, PACKAGE / module) == []


def test_the_message_rule_sees_a_message_imported(tmp_path: Path) -> None:
    """The checker finds a msgpack message and a server/msgpack/ module, not a value type."""
    root = tmp_path / "odradek"
    (root / "server" / "kafka").mkdir(parents=True)
    crossing = root / "server" / "kafka" / "_layout_probe.py"
    crossing.write_text(
        "from odradek.protocol.produce import ProducePartitionData, ProduceRequest\n"
        "from odradek.server.msgpack import produce\n"
    )
    assert msgpack_messages(root, crossing) == [
        "odradek.protocol.produce.ProduceRequest",
        "odradek.server.msgpack",
        "odradek.server.msgpack.produce",
    ]
