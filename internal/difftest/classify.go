package difftest

import (
	"errors"

	"github.com/casbreaker/casbreaker/core"
)

// The errors Classifier tells apart; ErrFail is an ordinary failure.
var (
	ErrFail             = errors.New("dependency failed")
	ErrIgnored          = errors.New("ignored by the classifier")
	ErrSuccess          = errors.New("not found: a success for the classifier")
	ErrClassifierPanics = errors.New("the classifier panics on this one")
)

// Classifier is a custom classifier for differential histories: ErrSuccess
// (wrapped or not) is a success, ErrIgnored is ignored, and on
// ErrClassifierPanics it panics with that error (the breakers then release
// the permit as Ignored and re-panic, which Apply records); any other
// error is core.DefaultClassifier's. It is safe for concurrent use.
func Classifier(err error) core.Outcome {
	switch {
	case errors.Is(err, ErrClassifierPanics):
		panic(ErrClassifierPanics)
	case errors.Is(err, ErrSuccess):
		return core.Success
	case errors.Is(err, ErrIgnored):
		return core.Ignored
	}
	return core.DefaultClassifier(err)
}
