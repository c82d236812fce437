package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"
)

// apiError crosses the wire as {"error": {"code", "message"}} with the code's one HTTP status.
type apiError struct {
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// asAPIError is err as the client sees it; anything not already an apiError is our own bug (500).
func asAPIError(err error) *apiError {
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	return &apiError{Code: codeInternal, Message: err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	e := asAPIError(err)
	status, ok := errorStatus[e.Code]
	if !ok {
		status = 500
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
}

func writeJSON(w http.ResponseWriter, status int, value any) {
	body, err := json.Marshal(value)
	if err != nil {
		status, body = 500, []byte(`{"error":{"code":"INTERNAL","message":"cannot encode the reply"}}`)
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("content-length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errnoCodes maps every errno a file or process operation can meet to the client's error: what the
// caller asked for cannot be done, which is never a bug of ours (a 500 is kept for those).
var errnoCodes = map[syscall.Errno]struct{ code, name, meaning string }{
	syscall.ENOENT:       {codeFileNotFound, "ENOENT", "no such file or directory"},
	syscall.EISDIR:       {codeIsADirectory, "EISDIR", "is a directory"},
	syscall.ENOTDIR:      {codeNotADirectory, "ENOTDIR", "not a directory"},
	syscall.EEXIST:       {codeFileExists, "EEXIST", "already exists"},
	syscall.ENOTEMPTY:    {codeDirectoryNotEmpty, "ENOTEMPTY", "directory not empty"},
	syscall.EACCES:       {codeForbidden, "EACCES", "permission denied"},
	syscall.EPERM:        {codeForbidden, "EPERM", "operation not permitted"},
	syscall.EROFS:        {codeForbidden, "EROFS", "read-only file system"},
	syscall.ENAMETOOLONG: {codeInvalidPath, "ENAMETOOLONG", "name too long"},
	syscall.ELOOP:        {codeInvalidPath, "ELOOP", "too many levels of symbolic links"},
	syscall.EINVAL:       {codeInvalidPath, "EINVAL", "invalid argument"},
	syscall.EBUSY:        {codeResourceBusy, "EBUSY", "busy (a mount point or in use)"},
	syscall.ETXTBSY:      {codeResourceBusy, "ETXTBSY", "text file busy"},
	syscall.EXDEV:        {codeInvalidPath, "EXDEV", "crosses file systems"},
	syscall.ENOSPC:       {codeNoSpace, "ENOSPC", "no space left on the device"},
	syscall.EDQUOT:       {codeNoSpace, "EDQUOT", "disk quota exceeded"},
	syscall.EFBIG:        {codePayloadTooLarge, "EFBIG", "file too large"},
	syscall.EMFILE:       {codeResourceExhausted, "EMFILE", "too many open files in the sandbox"},
	syscall.ENFILE:       {codeResourceExhausted, "ENFILE", "too many open files in the sandbox"},
	syscall.ENOMEM:       {codeResourceExhausted, "ENOMEM", "out of memory"},
	syscall.EAGAIN:       {codeResourceExhausted, "EAGAIN", "resource temporarily unavailable"},
	syscall.EMLINK:       {codeResourceExhausted, "EMLINK", "too many links"},
	syscall.E2BIG:        {codeExecFailed, "E2BIG", "argument list too long"},
	syscall.ENOEXEC:      {codeExecFailed, "ENOEXEC", "not an executable format"},
	syscall.ENOTSUP:      {codeValidationFailed, "ENOTSUP", "not supported"},
	syscall.ENXIO:        {codeValidationFailed, "ENXIO", "no such device or address"},
	syscall.ENODEV:       {codeValidationFailed, "ENODEV", "no such device"},
	syscall.ESPIPE:       {codeValidationFailed, "ESPIPE", "illegal seek"},
	syscall.EIO:          {codeSandboxUnavailable, "EIO", "I/O error in the sandbox"},
}

// fsError is a file system error as the API's error for the path the caller named.
func fsError(err error, path string) error {
	if err == nil {
		return nil
	}
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if known, ok := errnoCodes[errno]; ok {
			return newError(known.code, "%q: %s (%s)", path, known.meaning, known.name)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return newError(codeFileNotFound, "%q: no such file or directory (ENOENT)", path)
	}
	return newError(codeInternal, "%q: %v", path, err)
}
