package core

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The binary form of a Snapshot, version 1 (docs/design.md, Snapshots):
// 44 bytes, or 45 + n with a window of n calls; integers big-endian, times
// as Unix nanoseconds.
//
//	offset size  field
//	 0      2    magic "cb"
//	 2      1    version: 1
//	 3      1    state, 0..5
//	 4      1    backoff step, 0..31
//	 5      1    flags: bit 0 OpenUntil is set, bit 1 RampUntil is set,
//	             bit 2 a window follows; the rest zero
//	 6      2    consecutive failures
//	 8      8    fingerprint
//	16      8    Taken
//	24      8    OpenUntil (zero unless flag bit 0)
//	32      8    RampUntil (zero unless flag bit 1)
//	with flag bit 2:
//	40      1    n, the window's calls, 1..255
//	41      n    the calls, oldest first, one WindowCall (0..3) each
//	then:
//	end-4   4    CRC-32 (IEEE) of every byte before it
//
// A later version may be longer; a decoder reads the version before
// anything else and refuses one newer than it knows, saying so.
const (
	snapshotVersion = 1
	snapshotLen     = 44 // without a window
	flagOpenUntil   = 1 << 0
	flagRampUntil   = 1 << 1
	flagWindow      = 1 << 2
)

var snapshotMagic = [2]byte{'c', 'b'}

// MarshalBinary encodes s in the project's binary form, version 1 (its
// layout, byte by byte, is in docs/design.md, Snapshots) (encoding.BinaryMarshaler):
// 44 bytes, and one more per window call and one for their number with a
// window; the same for equal snapshots on every platform. It returns an
// error matching ErrInvalidSnapshot, and no bytes, for a snapshot that no
// breaker could have taken (a field out of its range, a time outside the
// span 1677-09-21 to 2262-04-11), so that what it writes always decodes.
func (s Snapshot) MarshalBinary() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := snapshotLen
	if len(s.Window) > 0 {
		n += 1 + len(s.Window)
	}
	b := make([]byte, n)
	copy(b, snapshotMagic[:])
	b[2] = snapshotVersion
	b[3] = uint8(s.State)
	b[4] = s.Step
	if !s.OpenUntil.IsZero() {
		b[5] |= flagOpenUntil
		binary.BigEndian.PutUint64(b[24:], uint64(s.OpenUntil.UnixNano()))
	}
	if !s.RampUntil.IsZero() {
		b[5] |= flagRampUntil
		binary.BigEndian.PutUint64(b[32:], uint64(s.RampUntil.UnixNano()))
	}
	if len(s.Window) > 0 {
		b[5] |= flagWindow
		b[40] = uint8(len(s.Window))
		for i, c := range s.Window {
			b[41+i] = uint8(c)
		}
	}
	binary.BigEndian.PutUint16(b[6:], s.ConsecutiveFailures)
	binary.BigEndian.PutUint64(b[8:], s.Fingerprint)
	binary.BigEndian.PutUint64(b[16:], uint64(s.Taken.UnixNano()))
	binary.BigEndian.PutUint32(b[n-4:], crc32.ChecksumIEEE(b[:n-4]))
	return b, nil
}

// UnmarshalBinary decodes the binary form into s (encoding.BinaryUnmarshaler).
// It returns an error matching ErrInvalidSnapshot that says what is wrong,
// and leaves s unchanged, for input that is short, long, not a snapshot, of
// a newer version, fails its checksum, or holds a field out of its range or
// inconsistent with the state. It never panics, whatever the input.
func (s *Snapshot) UnmarshalBinary(b []byte) error {
	calls, err := binaryFrame(b)
	if err != nil {
		return err
	}
	flags := b[5]
	d := Snapshot{
		State:               State(b[3]),
		Step:                b[4],
		ConsecutiveFailures: binary.BigEndian.Uint16(b[6:]),
		Fingerprint:         binary.BigEndian.Uint64(b[8:]),
		Taken:               unixNanos(b[16:]),
	}
	for _, f := range []struct {
		flag uint8
		at   int
		to   *time.Time
		name string
	}{{flagOpenUntil, 24, &d.OpenUntil, "OpenUntil"}, {flagRampUntil, 32, &d.RampUntil, "RampUntil"}} {
		switch v := binary.BigEndian.Uint64(b[f.at:]); {
		case flags&f.flag != 0:
			*f.to = unixNanos(b[f.at:])
		case v != 0:
			return invalidSnapshot("%s holds %d with its flag clear", f.name, v)
		}
	}
	if calls != nil {
		d.Window = make([]WindowCall, len(calls))
		for i, c := range calls {
			d.Window[i] = WindowCall(c)
		}
	}
	if err := d.check(); err != nil {
		return err
	}
	*s = d
	return nil
}

// binaryFrame checks what frames the fields of a binary snapshot b: the
// magic, the version, the length, the checksum and the flags; it returns
// the window's calls (nil without a window).
func binaryFrame(b []byte) (calls []byte, err error) {
	switch {
	case len(b) < 3:
		return nil, invalidSnapshot("%d bytes: too short to hold a snapshot's header (3 bytes)", len(b))
	case !bytes.Equal(b[:2], snapshotMagic[:]):
		return nil, invalidSnapshot("does not start with %q: not a breaker snapshot", snapshotMagic[:])
	case b[2] == 0:
		return nil, invalidSnapshot("version 0 does not exist")
	case b[2] > snapshotVersion:
		return nil, invalidSnapshot("version %d is newer than this build reads (up to %d)", b[2], snapshotVersion)
	case len(b) < snapshotLen:
		return nil, invalidSnapshot("%d bytes: version %d is at least %d", len(b), b[2], snapshotLen)
	}
	end := len(b) - 4
	if sum, want := binary.BigEndian.Uint32(b[end:]), crc32.ChecksumIEEE(b[:end]); sum != want {
		return nil, invalidSnapshot("checksum %08x, the bytes' is %08x: corrupt or cut short", sum, want)
	}
	flags := b[5]
	if flags&^(flagOpenUntil|flagRampUntil|flagWindow) != 0 {
		return nil, invalidSnapshot("unknown flags %02x", flags)
	}
	switch {
	case flags&flagWindow == 0 && len(b) != snapshotLen:
		return nil, invalidSnapshot("%d bytes with no window: version %d is %d", len(b), b[2], snapshotLen)
	case flags&flagWindow != 0 && (len(b) == snapshotLen || int(b[40]) != len(b)-snapshotLen-1 || b[40] == 0):
		return nil, invalidSnapshot("%d bytes for a window whose length byte says %d calls", len(b), b[40])
	case flags&flagWindow != 0:
		return b[41:end], nil
	}
	return nil, nil
}

// unixNanos is the time of the Unix nanoseconds in b's first 8 bytes, in
// UTC, as a snapshot keeps times.
func unixNanos(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
}

// snapshotJSON is the JSON form: a version, the fingerprint as 16 hex
// digits (a JSON number loses the low bits of a uint64 in many readers),
// the state by name, and the times in RFC 3339 with nanoseconds, in UTC.
// The pointers tell a missing field from a zero one.
type snapshotJSON struct {
	Version             *int       `json:"version"`
	Fingerprint         *string    `json:"fingerprint"`
	State               *string    `json:"state"`
	Step                uint8      `json:"step,omitempty"`
	ConsecutiveFailures uint16     `json:"consecutive_failures,omitempty"`
	Taken               *time.Time `json:"taken"`
	OpenUntil           *time.Time `json:"open_until,omitempty"`
	RampUntil           *time.Time `json:"ramp_until,omitempty"`
	Window              string     `json:"window,omitempty"`
}

// windowLetters are the calls of a JSON window, by WindowCall: success,
// failure, slow success, slow failure.
const windowLetters = "sfSF"

// MarshalJSON encodes s as a JSON object (json.Marshaler), for example
//
//	{"version":1,"fingerprint":"8c1e0f8a5d7b3c21","state":"open","step":2,
//	 "taken":"2026-12-02T06:00:00Z","open_until":"2026-12-02T06:00:30Z"}
//
// with the fields of Snapshot; a zero step, run of failures or time, and
// an empty window, are left out. A window is a string of one letter per
// call, oldest first: s a success, f a failure, S and F slow ones. It returns an error matching ErrInvalidSnapshot for a snapshot
// no breaker could have taken, as MarshalBinary does.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	v, fp, st := snapshotVersion, fmt.Sprintf("%016x", s.Fingerprint), s.State.String()
	j := snapshotJSON{Version: &v, Fingerprint: &fp, State: &st, Step: s.Step,
		ConsecutiveFailures: s.ConsecutiveFailures, Taken: &s.Taken}
	if !s.OpenUntil.IsZero() {
		j.OpenUntil = &s.OpenUntil
	}
	if !s.RampUntil.IsZero() {
		j.RampUntil = &s.RampUntil
	}
	w := make([]byte, len(s.Window))
	for i, c := range s.Window {
		w[i] = windowLetters[c]
	}
	j.Window = string(w)
	return json.Marshal(j)
}

// UnmarshalJSON decodes the JSON form into s (json.Unmarshaler). It returns
// an error matching ErrInvalidSnapshot that says what is wrong, and leaves s
// unchanged, for input that is no JSON object of the form, lacks version,
// fingerprint, state or taken, has a field this version does not know (keys
// match exactly, case included) or a field twice, is of
// a newer version, or holds a value out of its range or inconsistent with
// the state. It never panics.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	if err := exactKeys(b); err != nil {
		return err
	}
	var j snapshotJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	if dec.More() {
		return invalidSnapshot("data after the JSON object")
	}
	if err := j.required(); err != nil {
		return err
	}
	d := Snapshot{Step: j.Step, ConsecutiveFailures: j.ConsecutiveFailures}
	var err error
	if d.Window, err = parseWindow(j.Window); err != nil {
		return err
	}
	fp, err := strconv.ParseUint(*j.Fingerprint, 16, 64)
	if err != nil || len(*j.Fingerprint) != 16 {
		return invalidSnapshot("fingerprint %q is not 16 hex digits", *j.Fingerprint)
	}
	d.Fingerprint = fp
	if d.State, err = parseState(*j.State); err != nil {
		return err
	}
	for _, t := range []struct {
		from *time.Time
		to   *time.Time
		name string
	}{{j.Taken, &d.Taken, "taken"}, {j.OpenUntil, &d.OpenUntil, "open_until"}, {j.RampUntil, &d.RampUntil, "ramp_until"}} {
		if t.from == nil {
			continue
		}
		if t.from.IsZero() {
			return invalidSnapshot("%s is the zero time", t.name)
		}
		if *t.to, err = wallTime(*t.from, t.name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
		}
	}
	if err := d.check(); err != nil {
		return err
	}
	*s = d
	return nil
}

// snapshotKeys are the JSON form's keys, from snapshotJSON's tags.
var snapshotKeys = func() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[snapshotJSON]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys[name] = true
	}
	return keys
}()

// exactKeys refuses a JSON object that encoding/json would read one way
// among several: a key given twice (it keeps the last value) or a key that
// names a field only when case is ignored (it matches "State" to "state").
// Input that is no object, or not JSON, is left to the decoder to refuse.
func exactKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool, len(snapshotKeys))
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		switch {
		case !snapshotKeys[k]:
			return invalidSnapshot("unknown field %q", k)
		case seen[k]:
			return invalidSnapshot("%q twice", k)
		}
		seen[k] = true
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil
		}
	}
	return nil
}

// required is UnmarshalJSON's check of the version and of the fields
// every snapshot has.
func (j snapshotJSON) required() error {
	switch {
	case j.Version == nil:
		return invalidSnapshot("no version")
	case *j.Version < 1:
		return invalidSnapshot("version %d does not exist", *j.Version)
	case *j.Version > snapshotVersion:
		return invalidSnapshot("version %d is newer than this build reads (up to %d)", *j.Version, snapshotVersion)
	case j.Fingerprint == nil:
		return invalidSnapshot("no fingerprint")
	case j.State == nil:
		return invalidSnapshot("no state")
	case j.Taken == nil:
		return invalidSnapshot("no taken time")
	}
	return nil
}

// parseWindow is the calls of a JSON window, one letter each (nil for
// none), or an error matching ErrInvalidSnapshot.
func parseWindow(letters string) ([]WindowCall, error) {
	if letters == "" {
		return nil, nil
	}
	calls := make([]WindowCall, len(letters))
	for i := range len(letters) {
		c := strings.IndexByte(windowLetters, letters[i])
		if c < 0 {
			return nil, invalidSnapshot("window call %d is %q, not one of %q", i, letters[i], windowLetters)
		}
		calls[i] = WindowCall(c)
	}
	return calls, nil
}

// parseState is the State named name (State.String), or an error matching
// ErrInvalidSnapshot.
func parseState(name string) (State, error) {
	for st := range State(NumStates) {
		if st.String() == name {
			return st, nil
		}
	}
	return 0, invalidSnapshot("state %q is not a state", name)
}
