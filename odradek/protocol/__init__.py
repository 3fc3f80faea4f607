"""odradek's wire protocol: frames, envelopes and one module per API, with no I/O.

A broker reads and answers a request like this (docs/protocol.md is the full reference)::

    for frame in decoder.feed(data):                  # FrameError: close the connection
        header = RequestHeader.from_header(frame.header)  # FrameError: close the connection
        try:
            request = decode_request(header, frame)       # UnsupportedVersion/InvalidRequest
        except KafkaError as error:
            write(encode_response(ResponseHeader.for_error(header.correlation_id, error)))
            continue
        response = route(header.api_key, request)        # e.g. a ProduceResponse
        write(encode_response(ResponseHeader(header.correlation_id), response))

``encode_response`` returns the frame as parts: the prefix bytes, then each Records field's
contents, which may be file slices to send with ``sendfile``.
"""
