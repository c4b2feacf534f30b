package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
)

// recordingFile holds what a run knows besides the journals: enough for
// -check to judge the output directory again without the run.
const recordingFile = "recording.json"

// recordingVersion changes when a field changes meaning.
const recordingVersion = 1

// recording is what the harness keeps in memory during a run and the
// checks need: the nemeses' events, the processes' up and cut states, the
// harness's own workload results, and the run's parameters.
type recording struct {
	Version int       `json:"version"`
	Command string    `json:"command"`
	Seed    uint64    `json:"seed"`
	Nodes   int       `json:"nodes"`
	Network bool      `json:"network"`
	Control bool      `json:"control"`
	Started time.Time `json:"started"`
	// End is the history's time when the workers stopped.
	End time.Duration `json:"end_ns"`
	// Kinds are the nemeses asked for (after those skipped without the
	// namespaces).
	Kinds  []nemesis.Kind  `json:"kinds"`
	Events []nemesis.Event `json:"events"`
	Exits  []string        `json:"exits"` // processes that exited on their own
	States []memberState   `json:"states"`
	// Changes are the times of every fault, heal, kill and restart.
	Changes []time.Duration `json:"changes_ns"`
	// Members is how many of the processes (the first ones) are cluster
	// members; Embedded more members live in the harness.
	Members  int               `json:"members"`
	Embedded int               `json:"embedded"`
	Probe    probeSpec         `json:"probe"`
	Notes    []string          `json:"notes"`
	Result   workload.Results  `json:"harness_results"` // the harness's own workload (the counter's keeper)
	Client   map[string]int    `json:"clients"`
	Extra    map[string]string `json:"extra,omitempty"`
}

// memberState is whether each member process was up (running, maybe
// frozen) and which pairs of them could not reach each other, from At on.
type memberState struct {
	At  time.Duration `json:"at_ns"`
	Up  []bool        `json:"up"`
	Cut [][2]int      `json:"cut,omitempty"` // pairs (a < b) not connected both ways
}

// probeSpec are the probes' availability parameters.
type probeSpec struct {
	Within time.Duration `json:"within_ns"`
}

func writeRecording(dir string, r recording) error {
	r.Version = recordingVersion
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, recordingFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, recordingFile))
}

func readRecording(dir string) (recording, error) {
	var r recording
	b, err := os.ReadFile(filepath.Join(dir, recordingFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(dir, recordingFile), err)
	}
	if r.Version != recordingVersion {
		return r, fmt.Errorf("%s: version %d, this harness reads %d", filepath.Join(dir, recordingFile), r.Version, recordingVersion)
	}
	return r, nil
}
