// Package agent runs one dlm node as a process: dlmnode agent. It reads the
// node's configuration from flags, DLM_* environment variables and an
// optional TOML file (Parse), starts the node, and serves the admin HTTP
// endpoints beside it: /metrics, /healthz, /readyz, /debug/pprof/,
// /v1/status and /v1/locks (JSON, optionally gathered from every member
// through the admin addresses the agents gossip) and a self-refreshing
// page at /. docs/operations.md is the operator's guide.
package agent
