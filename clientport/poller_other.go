//go:build !linux

package clientport

import (
	"log/slog"
	"time"
)

// poller would watch idle connections with the system's readiness
// notifications; here it does not exist, and every connection keeps a
// goroutine blocked in its read. A nil *poller parks nothing.
type poller struct{}

// pollState is empty: no connection is ever watched.
type pollState struct{}

func newPoller(time.Duration, func(*conn), *slog.Logger, interface {
	Inc()
	Dec()
}) *poller {
	return nil
}

func (*poller) watch(*conn) bool   { return false }
func (*poller) park(*conn) bool    { return false }
func (*poller) release(*conn) bool { return false }
func (*poller) forget(*conn)       {}
func (*poller) parkedConns() int   { return 0 }
func (*poller) close()             {}
