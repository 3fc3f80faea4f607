"""The C modules (docs/native.md); every other piece of metadata is in pyproject.toml.

Declared here because setuptools still calls pyproject.toml's ``ext-modules`` table
experimental. Each module is optional: where no C compiler is found the build goes on, the
same loops run in Python (slower), and ``odradek --version`` and the broker's start-up log say
which modules are active. Every header is listed in ``depends`` (and in MANIFEST.in), so an
sdist carries them and a wheel built from it compiles every module.
"""

from setuptools import Extension, setup

NATIVE_HEADERS = ["odradek/_native/crc32c.h", "odradek/_native/kafka_format.h"]
VALIDATION_HEADERS = [*NATIVE_HEADERS, "odradek/_native/batch_validation.h"]


def native_module(name: str, source: str, headers: list[str]) -> Extension:
    return Extension(
        name,
        sources=[source],
        include_dirs=["odradek/_native"],
        depends=headers,
        extra_compile_args=["-O2"],
        optional=True,
    )


setup(
    ext_modules=[
        # The append path's record walk, batch checks and CRC-32C.
        native_module(
            "odradek.record._record_scan", "odradek/record/_record_scan.c", VALIDATION_HEADERS
        ),
        # The active segment's append state: roll check, write and index entries in one call
        # (and for the common request, its validation too).
        native_module(
            "odradek.storage._segment_append_state",
            "odradek/storage/_segment_append_state.c",
            VALIDATION_HEADERS,
        ),
        # A partition's producers: the idempotent append's check in one call.
        native_module(
            "odradek.storage._producer_table",
            "odradek/storage/_producer_table.c",
            ["odradek/_native/kafka_format.h"],
        ),
        # The clients' records written and read in bulk.
        native_module(
            "odradek.record._record_codec", "odradek/record/_record_codec.c", NATIVE_HEADERS
        ),
        # The log cleaner's offset map and per-record loops.
        native_module(
            "odradek.cleaner._offset_map",
            "odradek/cleaner/_offset_map.c",
            [*NATIVE_HEADERS, "odradek/_native/siphash.h"],
        ),
    ]
)
