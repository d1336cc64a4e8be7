"""Limits of the speech endpoint, shared by the server (`launcher.serving.http`) and the bench client.
Importing this module imports nothing else (no torch, no starlette)."""

MAX_INPUT_CHARS = 4096
MAX_BODY_BYTES = 1 << 20
REQUEST_TIMEOUT_S = 120.0
