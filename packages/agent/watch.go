package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const (
	// Most change events forwarded per second; the rest are dropped, so a busy tree cannot flood.
	maxWatchEventsPerSecond = 200
	// Most directories one watch follows: a huge tree is watched in part rather than exhausting inotify.
	maxWatchedDirectories = 8192
)

const watchMask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
	syscall.IN_MODIFY | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF

// watcher reports changes under a path (recursively for a directory) through inotify, as Node's
// fs.watch does: "rename" for entries created, deleted or moved, "change" for contents and attributes.
type watcher struct {
	fd   int      // for adding watches
	file *os.File // reads through Go's poller, so close ends a read in progress
	root string

	mu    sync.Mutex
	dirs  map[int]string // watch descriptor -> directory (relative to root, "" for root itself)
	isDir bool
	once  sync.Once
}

func newWatcher(root string) (*watcher, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &watcher{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), root: root, dirs: map[int]string{}, isDir: info.IsDir()}
	if !w.isDir {
		var wd int
		if wd, err = syscall.InotifyAddWatch(fd, root, watchMask); err == nil {
			w.dirs[wd] = ""
		}
	} else {
		err = w.addTree("")
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// addTree watches the directory rel and every directory below it, up to the bound.
func (w *watcher) addTree(rel string) error {
	return filepath.WalkDir(filepath.Join(w.root, rel), func(path string, entry os.DirEntry, err error) error {
		if err != nil {
			if path == filepath.Join(w.root, rel) {
				return err
			}
			return nil
		}
		if !entry.IsDir() {
			return nil
		}
		w.mu.Lock()
		full := len(w.dirs) >= maxWatchedDirectories
		w.mu.Unlock()
		if full {
			return filepath.SkipAll
		}
		wd, err := syscall.InotifyAddWatch(w.fd, path, watchMask)
		if err != nil {
			return nil
		}
		relative, _ := filepath.Rel(w.root, path)
		if relative == "." {
			relative = ""
		}
		w.mu.Lock()
		w.dirs[wd] = relative
		w.mu.Unlock()
		return nil
	})
}

// run calls emit for every change until close; it returns when the watch ends.
func (w *watcher) run(emit func(event, path string)) {
	buf := make([]byte, 64*1024)
	windowStart, sent := time.Now(), 0
	for {
		n, err := w.file.Read(buf)
		if err != nil || n <= 0 {
			return
		}
		for offset := 0; offset+syscall.SizeofInotifyEvent <= n; {
			raw := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[offset]))
			nameBytes := buf[offset+syscall.SizeofInotifyEvent : offset+syscall.SizeofInotifyEvent+int(raw.Len)]
			offset += syscall.SizeofInotifyEvent + int(raw.Len)
			name := strings.TrimRight(string(nameBytes), "\x00")
			w.mu.Lock()
			dir, known := w.dirs[int(raw.Wd)]
			if raw.Mask&syscall.IN_IGNORED != 0 {
				delete(w.dirs, int(raw.Wd))
			}
			w.mu.Unlock()
			if !known || raw.Mask&syscall.IN_IGNORED != 0 {
				continue
			}
			rel := name
			if dir != "" {
				rel = dir + "/" + name
			}
			if !w.isDir {
				rel = filepath.Base(w.root)
			}
			if raw.Mask&syscall.IN_ISDIR != 0 && raw.Mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0 && w.isDir {
				_ = w.addTree(rel)
			}
			kind := "change"
			if raw.Mask&(syscall.IN_CREATE|syscall.IN_DELETE|syscall.IN_MOVED_FROM|syscall.IN_MOVED_TO|syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0 {
				kind = "rename"
			}
			if now := time.Now(); now.Sub(windowStart) >= time.Second {
				windowStart, sent = now, 0
			}
			if sent++; sent > maxWatchEventsPerSecond {
				continue
			}
			emit(kind, rel)
		}
	}
}

func (w *watcher) close() {
	w.once.Do(func() { _ = w.file.Close() })
}
