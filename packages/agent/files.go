package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// sandboxPaths resolves request paths inside the sandbox: relative ones against the working directory.
type sandboxPaths struct{ workdir string }

func (s sandboxPaths) resolve(requested string) (string, error) {
	if requested == "" {
		requested = "."
	}
	for _, segment := range strings.Split(requested, "/") {
		if segment == ".." {
			return "", newError(codeInvalidPath, "path %q may not contain \"..\" segments", requested)
		}
	}
	if filepath.IsAbs(requested) {
		return filepath.Clean(requested), nil
	}
	return filepath.Join(s.workdir, requested), nil
}

type fileStat struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode"`
	Mtime  string `json:"mtime"`
	Target string `json:"target,omitempty"`
}

type fileList struct {
	Path      string     `json:"path"`
	Entries   []fileStat `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// fileService does file operations inside the sandbox. Large files are streamed, never held in memory.
type fileService struct{ paths sandboxPaths }

func (f fileService) stat(requested string) (fileStat, error) {
	abs, err := f.paths.resolve(requested)
	if err != nil {
		return fileStat{}, err
	}
	st, err := describe(abs)
	if err != nil {
		return fileStat{}, fsError(err, requested)
	}
	return st, nil
}

func (f fileService) openRead(requested string) (*os.File, int64, error) {
	abs, err := f.paths.resolve(requested)
	if err != nil {
		return nil, 0, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, 0, fsError(err, requested)
	}
	if info.IsDir() {
		return nil, 0, newError(codeIsADirectory, "%q is a directory; list it with /files/list", requested)
	}
	if !info.Mode().IsRegular() {
		return nil, 0, newError(codeInvalidPath, "%q is not a regular file", requested)
	}
	file, err := os.Open(abs)
	if err != nil {
		return nil, 0, fsError(err, requested)
	}
	return file, info.Size(), nil
}

// write writes to a temporary file beside the target and renames it into place: readers never see
// a torn file.
func (f fileService) write(requested string, body io.Reader, maxBytes int64) (fileStat, error) {
	resolved, err := f.paths.resolve(requested)
	if err != nil {
		return fileStat{}, err
	}
	if err := os.MkdirAll(filepath.Dir(resolved), 0o755); err != nil {
		return fileStat{}, fsError(err, requested)
	}
	// Resolve the parent's symlinks first: gVisor answers stat("<link to />/missing") with the root
	// directory's attributes instead of ENOENT.
	parent, err := filepath.EvalSymlinks(filepath.Dir(resolved))
	if err != nil {
		return fileStat{}, fsError(err, requested)
	}
	abs := filepath.Join(parent, filepath.Base(resolved))
	mode := os.FileMode(0o644)
	if existing, err := os.Stat(abs); err == nil {
		if existing.IsDir() {
			return fileStat{}, newError(codeIsADirectory, "%q is a directory", requested)
		}
		mode = existing.Mode().Perm() | existing.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
	}
	temp := filepath.Join(parent, ".space-upload-"+randomHex(6))
	out, err := os.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fileStat{}, fsError(err, requested)
	}
	written, copyErr := io.Copy(out, io.LimitReader(body, maxBytes+1))
	closeErr := out.Close()
	switch {
	case copyErr != nil:
		err = newError(codeRequestAborted, "upload of %q was interrupted: %v", requested, copyErr)
	case written > maxBytes:
		err = newError(codePayloadTooLarge, "upload exceeds %d bytes", maxBytes)
	case closeErr != nil:
		err = fsError(closeErr, requested)
	default:
		_ = os.Chmod(temp, mode)
		if err = os.Rename(temp, abs); err != nil {
			err = fsError(err, requested)
		}
	}
	if err != nil {
		_ = os.Remove(temp)
		return fileStat{}, err
	}
	st, err := describe(abs)
	if err != nil {
		return fileStat{}, fsError(err, requested)
	}
	return st, nil
}

func (f fileService) list(requested string) (fileList, error) {
	abs, err := f.paths.resolve(requested)
	if err != nil {
		return fileList{}, err
	}
	dir, err := os.Open(abs)
	if err != nil {
		return fileList{}, fsError(err, requested)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fileList{}, fsError(err, requested)
	}
	sort.Strings(names)
	result := fileList{Path: abs, Entries: []fileStat{}, Truncated: len(names) > limitMaxListEntries}
	for _, name := range names[:min(len(names), limitMaxListEntries)] {
		full := filepath.Join(abs, name)
		st, err := describe(full)
		if err != nil {
			st = fileStat{Path: full, Name: name, Type: "other", Mtime: time.Unix(0, 0).UTC().Format(isoMillis)}
		}
		result.Entries = append(result.Entries, st)
	}
	return result, nil
}

func (f fileService) mkdir(requested string, recursive bool) error {
	abs, err := f.paths.resolve(requested)
	if err != nil {
		return err
	}
	if recursive {
		err = os.MkdirAll(abs, 0o755)
	} else {
		err = os.Mkdir(abs, 0o755)
	}
	return fsError(err, requested)
}

// move renames; across file systems (EXDEV: /tmp and /workspace may differ) it copies and then
// removes, like mv.
func (f fileService) move(from, to string, overwrite bool) error {
	src, err := f.paths.resolve(from)
	if err != nil {
		return err
	}
	dst, err := f.paths.resolve(to)
	if err != nil {
		return err
	}
	if src == "/" {
		return newError(codeInvalidPath, "refusing to move /")
	}
	if dst == src || strings.HasPrefix(dst, src+"/") {
		return newError(codeInvalidPath, "cannot move %q into itself", from)
	}
	if _, err := os.Lstat(src); err != nil {
		return fsError(err, from)
	}
	if _, err := os.Lstat(dst); err == nil && !overwrite {
		return newError(codeFileExists, "%q exists; pass overwrite: true to replace it", to)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fsError(err, to)
	}
	err = os.Rename(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		if overwrite {
			_ = os.RemoveAll(dst)
		}
		if err = copyTree(src, dst); err == nil {
			err = os.RemoveAll(src)
		}
	}
	return fsError(err, from)
}

func (f fileService) remove(requested string, recursive bool) error {
	abs, err := f.paths.resolve(requested)
	if err != nil {
		return err
	}
	if abs == "/" {
		return newError(codeInvalidPath, "refusing to remove /")
	}
	info, err := os.Lstat(abs)
	if err != nil {
		return fsError(err, requested)
	}
	switch {
	case !info.IsDir():
		err = syscall.Unlink(abs)
	case recursive:
		err = os.RemoveAll(abs)
	default:
		err = syscall.Rmdir(abs)
	}
	return fsError(err, requested)
}

const isoMillis = "2006-01-02T15:04:05.000Z"

func describe(abs string) (fileStat, error) {
	info, err := os.Lstat(abs)
	if err != nil {
		return fileStat{}, err
	}
	st := fileStat{Path: abs, Name: filepath.Base(abs), Type: "other", Size: info.Size(), Mtime: info.ModTime().UTC().Format(isoMillis)}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.Mode = sys.Mode & 0o7777
	}
	switch {
	case info.Mode().IsRegular():
		st.Type = "file"
	case info.IsDir():
		st.Type = "directory"
	case info.Mode()&os.ModeSymlink != 0:
		st.Type = "symlink"
		st.Target, _ = os.Readlink(abs)
	}
	return st, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
