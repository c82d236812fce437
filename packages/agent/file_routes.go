package main

import (
	"io"
	"net/http"
	"strconv"
)

// The file routes of the sandbox API: paths are checked as the protocol's schemas check them, then
// resolved inside the sandbox by the file service.

func (a *agent) removeFile(w http.ResponseWriter, r *http.Request) error {
	p, values, err := queryPath(r.URL, "recursive")
	if err != nil {
		return err
	}
	recursive := values.Get("recursive")
	if recursive != "" && recursive != "true" && recursive != "false" {
		return newError(codeValidationFailed, "invalid query: recursive must be true or false")
	}
	return replyOK(w, a.files.remove(p, recursive == "true"))
}

func (a *agent) listFiles(w http.ResponseWriter, r *http.Request) error {
	p, _, err := queryPath(r.URL)
	if err != nil {
		return err
	}
	list, err := a.files.list(p)
	return reply(w, list, err)
}

func (a *agent) statFile(w http.ResponseWriter, r *http.Request) error {
	p, _, err := queryPath(r.URL)
	if err != nil {
		return err
	}
	st, err := a.files.stat(p)
	return reply(w, st, err)
}

func (a *agent) mkdir(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Path      string `json:"path"`
		Recursive *bool  `json:"recursive"`
	}
	if err := readJSON(r, &body, func() error { return checkPath(body.Path) }); err != nil {
		return err
	}
	return replyOK(w, a.files.mkdir(body.Path, body.Recursive == nil || *body.Recursive))
}

func (a *agent) move(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		From      string `json:"from"`
		To        string `json:"to"`
		Overwrite bool   `json:"overwrite"`
	}
	check := func() error {
		if err := checkPath(body.From); err != nil {
			return err
		}
		return checkPath(body.To)
	}
	if err := readJSON(r, &body, check); err != nil {
		return err
	}
	return replyOK(w, a.files.move(body.From, body.To, body.Overwrite))
}

func (a *agent) watch(w http.ResponseWriter, r *http.Request) error {
	p, _, err := queryPath(r.URL)
	if err != nil {
		return err
	}
	abs, err := a.files.paths.resolve(p)
	if err != nil {
		return err
	}
	return a.withStream(w, r, func(ws *wsConn) { bindWatchStream(ws, abs, p) })
}

func (a *agent) download(w http.ResponseWriter, r *http.Request) error {
	p, _, err := queryPath(r.URL)
	if err != nil {
		return err
	}
	file, size, err := a.files.openRead(p)
	if err != nil {
		return err
	}
	defer file.Close()
	w.Header().Set("content-type", "application/octet-stream")
	w.Header().Set("content-length", strconv.FormatInt(size, 10))
	w.WriteHeader(200)
	_, _ = io.Copy(w, file)
	return nil
}

func (a *agent) upload(w http.ResponseWriter, r *http.Request) error {
	p, _, err := queryPath(r.URL)
	if err != nil {
		return err
	}
	st, err := a.files.write(p, r.Body, limitMaxUploadBytes)
	if err != nil {
		return err
	}
	writeJSON(w, 200, st)
	return nil
}
