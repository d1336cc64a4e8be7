"""The bench's HTTP/1.1 response parser, fed byte strings cut at every place a network read
could cut them."""

from __future__ import annotations

import pytest

from planner.app.bench.http1 import Endpoint, ProtocolError, Response
from planner.app.bench.speech import OURS

CHUNKED = (b"HTTP/1.1 200 OK\r\nx-sample-rate: 16000\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n")
LENGTH = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\nConnection: close\r\n\r\nbusy..."


def feed_in_pieces(raw: bytes, cut: int) -> tuple[Response, bytes]:
    r, body = Response(), b""
    for k in range(0, len(raw), cut):
        body += b"".join(r.feed(raw[k:k + cut]))
    return r, body


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 64, 10_000])
def test_a_chunked_body_comes_out_whole_however_the_reads_cut_it(cut):
    r, body = feed_in_pieces(CHUNKED, cut)
    assert (r.status, r.headers["x-sample-rate"], body, r.done) == (200, "16000", b"hello world",
                                                                    True)
    assert r.reusable


@pytest.mark.parametrize("cut", [1, 5, 1000])
def test_a_content_length_body_and_connection_close(cut):
    r, body = feed_in_pieces(LENGTH, cut)
    assert (r.status, body, r.done, r.reusable) == (503, b"busy...", True, False)


def test_a_body_to_the_end_of_the_connection():
    r = Response()
    assert r.feed(b"HTTP/1.1 200 OK\r\n\r\nabc") == [b"abc"] and not r.done
    r.finish()
    assert r.done and not r.reusable


def test_a_connection_closed_mid_response_is_an_error():
    r = Response()
    r.feed(CHUNKED[:-10])
    with pytest.raises(ProtocolError):
        r.finish()


@pytest.mark.parametrize("raw", [b"SSH-2.0-OpenSSH\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
                                 b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"])
def test_bytes_that_are_not_a_response_are_a_protocol_error(raw):
    with pytest.raises(ProtocolError):
        Response().feed(raw)


def test_the_request_is_one_post_with_a_json_body():
    endpoint = Endpoint.parse("http://127.0.0.1:8123")
    raw = OURS.request(endpoint, "Hi \"there\"", stream=True)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1:8123\r\n")
    assert f"Content-Length: {len(body)}".encode() in head
    assert b'"input": "Hi \\"there\\""' in body and b'"stream": true' in body


@pytest.mark.parametrize("url", ["https://example.com", "ftp://x", "localhost:8000"])
def test_only_plain_http_urls(url):
    with pytest.raises(ValueError):
        Endpoint.parse(url)
