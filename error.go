package memgate

import (
	"errors"
	"fmt"
)

// Code is a stable error code. It is part of the wire contract: clients
// branch on it, so codes are never renamed.
type Code string

// The codes a caller can see.
const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeNotFound        Code = "not_found"
	CodeVersionConflict Code = "version_conflict"
	CodeTooLarge        Code = "too_large"
	CodeSecretDetected  Code = "secret_detected"
	CodeForbidden       Code = "forbidden"
	CodeStoreLocked     Code = "store_locked"
	CodeTooManyStores   Code = "too_many_stores"
	CodeQuotaExceeded   Code = "quota_exceeded"
	CodeUnavailable     Code = "unavailable"
	CodeInternal        Code = "internal"
)

// Codes lists every code, in the order the specification names them.
var Codes = []Code{
	CodeInvalidArgument, CodeNotFound, CodeVersionConflict, CodeTooLarge,
	CodeSecretDetected, CodeForbidden, CodeStoreLocked, CodeTooManyStores,
	CodeQuotaExceeded, CodeUnavailable, CodeInternal,
}

// InternalMessage is the only message a caller ever sees for an internal
// error; the cause goes to the log.
const InternalMessage = "internal error; the server log has the cause"

// Error is the one error type that crosses package boundaries on its way to
// a client. Message is safe to show to a model: it never holds memory text,
// ids, queries, paths or tokens. Details holds small structured hints such as
// the offending field. Cause is for the log only and never leaves the process.
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	Op      string // the operation that failed, e.g. "storage.Put"; log only
	Cause   error  // log only
}

func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the cause, so errors.Is and errors.As see through an Error.
func (e *Error) Unwrap() error { return e.Cause }

// Invalid returns an invalid_argument error naming the field at fault.
func Invalid(field, format string, args ...any) *Error {
	return &Error{
		Code:    CodeInvalidArgument,
		Message: fmt.Sprintf(format, args...),
		Details: map[string]any{"field": field},
	}
}

// Internal wraps an unexpected failure. The caller sees only InternalMessage.
func Internal(op string, cause error) *Error {
	return &Error{Code: CodeInternal, Message: InternalMessage, Op: op, Cause: cause}
}

// ErrorCode returns the code of err: the Code of the first *Error in its
// chain, CodeInternal for any other non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Wrap returns err unchanged when it is nil or carries an *Error, and an
// internal error with err as its cause otherwise.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return AsError(op, err)
}

// AsError returns err as an *Error (nil for nil); an error that is not one
// becomes an internal error with err as its cause.
func AsError(op string, err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(op, err)
}
