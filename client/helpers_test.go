package client_test

import (
	"errors"
	"time"
)

var r0 = time.Unix(0, 0)

func asError[T error](err error, target *T) bool { return errors.As(err, target) }
