"""Run `launcher.serve.serve` on a hand-built plan, as the CLI will: python -m tests.launcher.serve_main"""

from __future__ import annotations

import sys

from launcher.serve import serve

from . import plans

if __name__ == "__main__":
    split = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else None
    factory = sys.argv[2] if len(sys.argv) > 2 else None
    kwargs = {}
    if factory == "broken":
        kwargs["vocoder_factory"] = "tests.launcher.factories:broken"
    elif factory == "paced":
        kwargs["generator_factory"] = "tests.launcher.factories:paced_generator"
        kwargs["generator_args"] = (("delay", 0.05),)
    plan = plans.qwen3(split, **kwargs)
    sys.exit(serve(plan, plans.topology(plan), host="127.0.0.1", port=0, device="auto",
                   drain_timeout=10, factory_defaults={"size": "tiny"}))
