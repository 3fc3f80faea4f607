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


SHARED_PROTOCOL_MODULES = ("odradek.protocol.values", "odradek.protocol.isolation")
"""What both protocols share of odradek.protocol: the request and response values (a
partition's produce and fetch data and results, special offsets and timestamps, the broker's
address) and the field types they are declared with, and the isolation levels. The rest of
odradek.protocol is the msgpack protocol's (its messages, schema, envelopes) but for
protocol/kafka/, Kafka's."""

KAFKA_SIDE = ("server/kafka", "protocol/kafka")
"""The modules that read, handle and write Kafka's requests."""

MANAGERS = ("server/admin", "server/replica_manager.py")
"""The managers both protocols' handlers call with plain data and get plain data from."""


def is_shared(module: str) -> bool:
    return module in SHARED_PROTOCOL_MODULES or module.startswith(
        tuple(f"{shared}." for shared in SHARED_PROTOCOL_MODULES)
    )


def crossings(root: Path, under: str, allowed: tuple[str, ...]) -> list[str]:
    """The imports of the modules at ``under`` (a package or a module under ``root``) of
    odradek.protocol but what both protocols share and the packages ``allowed``, and of
    server/msgpack/: each a request crossing into a protocol's objects not its own."""
    target = root / under
    paths = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    found = []
    for path in paths:
        for module in sorted(imported_modules(root, path)):
            crossing = (
                module.startswith("odradek.protocol.")
                and not is_shared(module)
                and not module.startswith(tuple(f"{package}." for package in allowed))
                and module not in allowed
            ) or module.startswith("odradek.server.msgpack")
            if crossing:
                found.append(f"{path.relative_to(root.parent)} imports {module}")
    return found


@pytest.mark.parametrize("under", KAFKA_SIDE)
def test_the_kafka_side_imports_nothing_of_the_msgpack_protocol(under: str) -> None:
    """Kafka's requests are read, handled and answered with Kafka's data and the shared
    values: no module on their way imports a msgpack message, envelope or schema piece, or
    a msgpack handler."""
    assert (PACKAGE / under).is_dir()
    assert crossings(PACKAGE, under, ("odradek.protocol.kafka",)) == []


@pytest.mark.parametrize("under", MANAGERS)
def test_a_manager_takes_and_returns_no_protocol_message(under: str) -> None:
    """The managers take and return plain data: each protocol's handler maps its own
    messages onto them."""
    assert (PACKAGE / under).exists()
    assert crossings(PACKAGE, under, ()) == []


def test_the_shared_values_import_neither_protocol() -> None:
    """The shared values are defined on their own, for the msgpack messages to be built of
    them: they import nothing of either protocol."""
    assert crossings(PACKAGE, "protocol/values", ()) == []
    assert [
        module
        for path in sorted((PACKAGE / "protocol" / "values").rglob("*.py"))
        for module in imported_modules(PACKAGE, path)
        if module.startswith("odradek.protocol.kafka")
    ] == []


def test_the_crossing_rule_sees_a_message_imported(tmp_path: Path) -> None:
    """The checker finds a msgpack message, envelope and handler, not a shared value or
    Kafka's own."""
    root = tmp_path / "odradek"
    (root / "server" / "kafka").mkdir(parents=True)
    (root / "server" / "kafka" / "_layout_probe.py").write_text(
        "from odradek.protocol.values.produce import ProducePartitionData\n"
        "from odradek.protocol.produce import ProduceRequest\n"
        "from odradek.protocol.kafka import fetch_request\n"
        "from odradek.protocol.isolation import IsolationLevel\n"
        "def late():\n    from odradek.protocol.header import RequestHeader\n"
        "from ..msgpack import produce\n"
    )
    assert crossings(root, "server/kafka", ("odradek.protocol.kafka",)) == [
        "odradek/server/kafka/_layout_probe.py imports odradek.protocol.header",
        "odradek/server/kafka/_layout_probe.py imports odradek.protocol.header.RequestHeader",
        "odradek/server/kafka/_layout_probe.py imports odradek.protocol.produce",
        "odradek/server/kafka/_layout_probe.py imports odradek.protocol.produce.ProduceRequest",
        "odradek/server/kafka/_layout_probe.py imports odradek.server.msgpack",
        "odradek/server/kafka/_layout_probe.py imports odradek.server.msgpack.produce",
    ]
