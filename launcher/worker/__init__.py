"""Inside one worker process: build its stages, run them, hand payloads on, join fan-ins.

Runs in each worker process; imports `wire` and the launcher's basics (`cancellation`); the stage
factories (stand-ins, `piper`) are resolved by name, never imported here."""
