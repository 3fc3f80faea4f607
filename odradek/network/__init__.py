"""The network layer: sockets to frames and back, whatever the frames ask.

The socket server and its listeners (socket_server, ssl_factory), protocol detection on a
connection's first bytes (protocol_detector), the connection every wire protocol shares
(connection: frame reading with frame_reader/kafka_frame_reader/frame_buffer, the request memory
pool and read control, idle and request timeouts, the quota mute of connection_throttle), the
session and its SASL gate (session, sasl_gate, sasl_authenticator), response writing with
sendfile (response_writer, sendfile_sender, file_region, page_cache), the network's metrics
(network_metrics, network_bytes) and the event loop's lag monitor.

Dependencies point one way: odradek.server -> odradek.network -> protocol, record, config,
security, errors. Nothing here imports the server, storage or the cleaner
(tests/test_package_layout.py); what the network needs from them is passed in.
"""
