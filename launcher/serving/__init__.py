"""The front door: HTTP and its timeouts, replicas behind one port, `serve()` until a signal.

Runs in the serving process; the top wing: may import every other wing and the `Deployment`
facade, and nothing in the launcher imports it."""
