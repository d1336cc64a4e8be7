"""Run `launcher.serving.serve.serve` on a hand-built plan, as the CLI will:

    python -m tests.launcher.serve_main [SPLIT|-] [broken|paced|-] [DRAIN_S] [INLINE_BYTES]
"""

from __future__ import annotations

import sys

from launcher.serving.serve import serve

from tests.launcher import plans

if __name__ == "__main__":
    args = sys.argv[1:] + [None] * 4
    split = args[0] if args[0] not in (None, "-") else None
    factory = args[1]
    kwargs, extra = {}, {}
    if factory == "broken":
        kwargs["vocoder_factory"] = "tests.launcher.factories:broken"
    elif factory == "paced":
        kwargs["generator_factory"] = "tests.launcher.factories:paced_generator"
        kwargs["generator_args"] = (("delay", 0.05),)
    if args[3] is not None:
        extra["inline_bytes"] = int(args[3])
    plan = plans.qwen3(split, **kwargs)
    sys.exit(serve(plan, plans.topology(plan), host="127.0.0.1", port=0, device="auto",
                   drain_timeout=float(args[2] or 10), factory_defaults={"size": "tiny"},
                   **extra))
