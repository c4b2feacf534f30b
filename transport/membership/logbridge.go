package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newLogBridge turns memberlist's "[LEVEL] memberlist: text" lines into slog
// records at the matching level.
func newLogBridge(l *slog.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

type logWriter struct{ l *slog.Logger }

// levelOf splits memberlist's level tag off a line.
func levelOf(line []byte) (slog.Level, []byte) {
	for _, lv := range [...]struct {
		tag   string
		level slog.Level
	}{
		{"[DEBUG]", slog.LevelDebug},
		{"[INFO]", slog.LevelInfo},
		{"[WARN]", slog.LevelWarn},
		{"[ERR]", slog.LevelError},
	} {
		if bytes.HasPrefix(line, []byte(lv.tag)) {
			return lv.level, bytes.TrimSpace(line[len(lv.tag):])
		}
	}
	return slog.LevelInfo, line
}

func (w logWriter) Write(p []byte) (int, error) {
	level, line := levelOf(bytes.TrimSpace(p))
	if w.l.Enabled(context.Background(), level) {
		w.l.Log(context.Background(), level, string(line), "source", "memberlist")
	}
	return len(p), nil
}
