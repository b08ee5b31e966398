package slogbreaker_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/slogbreaker"
)

// On a wall clock each record carries the transition's time and the open
// deadline as a time; a disabled level logs nothing.
func TestListener(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := core.New(core.Config{Name: "db", ConsecutiveFailures: 1, OpenDuration: time.Minute,
		OnStateChange: slogbreaker.Listener(logger, slogbreaker.Options{Message: "breaker"})})
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	b.Done(p, errors.New("down"))
	b.Reset() // open -> closed at INFO: below the handler's level

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 1)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &rec))
	require.Equal(t, "breaker", rec["msg"])
	require.Equal(t, "db", rec["breaker"])
	require.Equal(t, "closed", rec["from"])
	require.Equal(t, "open", rec["to"])
	require.Equal(t, "consecutive-failures", rec["reason"])
	require.EqualValues(t, 1, rec["generation"])
	at, err := time.Parse(time.RFC3339Nano, rec["time"].(string))
	require.NoError(t, err)
	until, err := time.Parse(time.RFC3339Nano, rec["open_until"].(string))
	require.NoError(t, err)
	require.Equal(t, time.Duration(rec["open_for"].(float64)), until.Sub(at))
	require.GreaterOrEqual(t, until.Sub(at), time.Minute)
}

// full is a core.OpenGate with no slot free.
type full struct{}

func (full) TryAcquire() bool { return false }
func (full) Acquire()         {}
func (full) Release()         {}

// A trip the open gate refuses is logged at WARN, as a trip is: the
// dependency failed enough to open, and calls still go to it.
func TestListenerLogsCappedTrip(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := core.New(core.Config{Name: "db", ConsecutiveFailures: 1, OpenGate: full{}, Clock: core.NewManualClock(0),
		OnStateChange: slogbreaker.Listener(logger, slogbreaker.Options{})})
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	b.Done(p, errors.New("down"))
	require.Equal(t, core.Closed, b.State())

	var rec map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec))
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "closed", rec["from"])
	require.Equal(t, "closed", rec["to"])
	require.Equal(t, "capped", rec["reason"])
	require.NotContains(t, rec, "open_for")
}

// A reconfiguration of an open breaker is logged at INFO with the fields
// it changed, and no open_for: it opens nothing.
func TestListenerLogsReconfiguration(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := core.Config{Name: "db", ConsecutiveFailures: 1, Clock: core.NewManualClock(0),
		OnStateChange: slogbreaker.Listener(logger, slogbreaker.Options{})}
	b, err := core.New(c)
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	b.Done(p, errors.New("down"))
	buf.Reset()
	c.ConsecutiveFailures = 2
	require.NoError(t, b.Reconfigure(c))

	var rec map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec))
	require.Equal(t, "INFO", rec["level"])
	require.Equal(t, "open", rec["from"])
	require.Equal(t, "open", rec["to"])
	require.Equal(t, "reconfigured", rec["reason"])
	require.Equal(t, "ConsecutiveFailures", rec["changed"])
	require.NotContains(t, rec, "open_for")
}
