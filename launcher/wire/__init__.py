"""The wire: every message and payload that crosses a process boundary, and the backend seam.

Runs in the serving process and in every worker; imports no other launcher wing (only the
standard library, torch and the launcher's basics: `errors`, `audio`)."""
