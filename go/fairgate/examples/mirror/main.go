// Command mirror serves git clones over smart HTTP, each admitted by fairgate with the client's
// address as its fairness key: one client's thousand clones take turns with everyone else's.
// An example of the Go package, not a second product: it serves the bare repositories it is
// given (no mirroring, no cache) with `git upload-pack`, spooling each pack to a file while its
// job holds a slot and sending it after.
//
//	go run ./examples/mirror -repo linux.git=/srv/linux.git -capacity 8
//	git clone http://127.0.0.1:PORT/linux.git
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"fairgate.dev/go/fairgate"
)

// repos maps a repository's name in URLs to its directory (-repo name=dir, repeated).
type repos map[string]string

func (r repos) String() string { return fmt.Sprint(map[string]string(r)) }

func (r repos) Set(value string) error {
	name, dir, ok := strings.Cut(value, "=")
	if !ok || name == "" || dir == "" {
		return fmt.Errorf("want name=dir, got %q", value)
	}
	r[name] = dir
	return nil
}

// server answers git's smart-HTTP requests for its repositories.
type server struct {
	scheduler    *fairgate.Scheduler
	repos        repos
	clientHeader string // believed from loopback peers only; empty: the address is the key
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the address to listen on (loopback)")
	capacity := flag.Int("capacity", 8, "packs made at once")
	clientHeader := flag.String("client-header", "", "a header naming the client, believed from 127.0.0.1 only")
	r := repos{}
	flag.Var(r, "repo", "a repository to serve, name=dir (repeatable)")
	flag.Parse()
	scheduler, err := fairgate.New(fairgate.Options{MaxConcurrency: *capacity})
	if err != nil {
		log.Fatal(err)
	}
	defer scheduler.Close()
	s, err := newServer(scheduler, r, *capacity, *clientHeader)
	if err != nil {
		log.Fatal(err)
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", listener.Addr())
	log.Fatal(http.Serve(listener, s))
}

func newServer(scheduler *fairgate.Scheduler, r repos, capacity int, clientHeader string) (*server, error) {
	err := scheduler.RegisterType("upload-pack", fairgate.TypeConfig{Priority: capacity})
	return &server{scheduler: scheduler, repos: r, clientHeader: clientHeader}, err
}

// client is the fairness key of a request: the client header from a loopback proxy, else the
// peer's address.
func (s *server) client(r *http.Request) string {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if s.clientHeader != "" && host == "127.0.0.1" {
		if name := r.Header.Get(s.clientHeader); name != "" {
			return name
		}
	}
	return host
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	var name, service string
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/info/refs"):
		name, service = strings.TrimSuffix(path, "/info/refs"), "advertise"
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/git-upload-pack"):
		name, service = strings.TrimSuffix(path, "/git-upload-pack"), "upload-pack"
	default:
		http.NotFound(w, r)
		return
	}
	dir, ok := s.repos[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if service == "advertise" {
		if r.URL.Query().Get("service") != "git-upload-pack" {
			http.Error(w, "only git-upload-pack is served", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		io.WriteString(w, "001e# service=git-upload-pack\n0000")
		s.git(r.Context(), w, r, dir, nil, "--advertise-refs")
		return
	}
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		unzipped, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = unzipped
	}
	request, err := io.ReadAll(io.LimitReader(body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	// Protocol v2's ref listing is cheap: it runs at once. A pack is made while its job holds a
	// slot, into a spool file, and sent from there once the slot is free again, so that a slow
	// reader does not hold a slot.
	if bytes.HasPrefix(request, []byte("0014command=ls-refs\n")) {
		s.git(r.Context(), w, r, dir, bytes.NewReader(request))
		return
	}
	spool, err := os.CreateTemp("", "pack-")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	job := fairgate.Job{Type: "upload-pack", ID: name, Key: s.client(r)}
	err = s.scheduler.RunSync(r.Context(), job, func(ctx context.Context) error {
		return s.git(ctx, spool, r, dir, bytes.NewReader(request))
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if _, err := spool.Seek(0, io.SeekStart); err == nil {
		io.Copy(w, spool)
	}
}

// git runs `git upload-pack --stateless-rpc [extra] dir` with `stdin`, its output to w.
func (s *server) git(ctx context.Context, w io.Writer, r *http.Request, dir string, stdin io.Reader,
	extra ...string) error {
	args := append([]string{"upload-pack", "--stateless-rpc"}, extra...)
	cmd := exec.CommandContext(ctx, "git", append(args, dir)...)
	cmd.Env = append(os.Environ(), "GIT_PROTOCOL="+r.Header.Get("Git-Protocol"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, w, os.Stderr
	return cmd.Run()
}
