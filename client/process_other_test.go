//go:build !unix

package client

// maybeHelper: the client-process tests (process_test.go) stop and kill
// processes with Unix signals, so no process is ever started as a helper.
func maybeHelper() {}
