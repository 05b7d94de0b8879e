"""/v1/plan measured: its latency in-process with many stored traces, and its throughput over
HTTP side by side with the CognOS gateway."""
