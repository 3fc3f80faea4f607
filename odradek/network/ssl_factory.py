"""SslFactory: the broker's TLS context from Kafka's ``ssl.*`` keys (PEM files or inline PEM).

One context serves every TLS listener (SSL and SASL_SSL). Client certificates are asked for
per ``ssl.client.auth``: ``required`` refuses a handshake without a trusted one, ``requested``
verifies one when given. Fetches on TLS connections take the copy path (see ResponseWriter):
sendfile would put file bytes on the socket unencrypted.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from odradek.config.broker_config import BrokerConfig
from odradek.errors import InvalidConfigError

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_ssl_context(config: BrokerConfig) -> ssl.SSLContext:
    """The TLS context of the broker's TLS listeners; raises InvalidConfigError saying which
    key is wrong when a file cannot be read or does not hold what it should."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_TLS_VERSIONS[name] for name in config.ssl_enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if config.ssl_cipher_suites:
        try:
            context.set_ciphers(":".join(config.ssl_cipher_suites))
        except ssl.SSLError as error:
            raise InvalidConfigError(
                f"ssl.cipher.suites: no cipher suite usable: {error}"
            ) from None
    _load_key_and_chain(context, config)
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth]
    if config.ssl_truststore_location or config.ssl_truststore_certificates:
        try:
            context.load_verify_locations(
                cafile=config.ssl_truststore_location,
                cadata=config.ssl_truststore_certificates,
            )
        except (OSError, ssl.SSLError) as error:
            raise InvalidConfigError(
                f"ssl.truststore.location/certificates: cannot load trusted certificates: {error}"
            ) from None
    return context


def _load_key_and_chain(context: ssl.SSLContext, config: BrokerConfig) -> None:
    password = config.ssl_key_password
    if config.ssl_keystore_location:
        try:
            context.load_cert_chain(config.ssl_keystore_location, password=password)
        except (OSError, ssl.SSLError) as error:
            raise InvalidConfigError(
                f"ssl.keystore.location {config.ssl_keystore_location}: cannot load the key and "
                f"certificate chain (PEM, key and chain in one file): {error}"
            ) from None
        return
    # Inline PEM: the ssl module loads keys from files only, so they pass through a private
    # temporary file that is removed at once.
    fd, path = tempfile.mkstemp(prefix="odradek-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as pem:
            pem.write(f"{config.ssl_keystore_key}\n{config.ssl_keystore_certificate_chain}\n")
        context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as error:
        raise InvalidConfigError(
            f"ssl.keystore.key/ssl.keystore.certificate.chain: cannot load them: {error}"
        ) from None
    finally:
        os.unlink(path)
