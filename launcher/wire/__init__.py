"""The wire: every message and payload that crosses a process boundary, and the backend seam.

Runs in the supervisor and in every worker; imports only the standard library, torch and `planner`'s public API."""
