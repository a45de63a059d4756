package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"fairgate.dev/go/fairgate"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// A real git client clones through the front, over protocol v2 and v0; an unknown repository
// is a 404.
func TestARealGitCloneGoesThroughTheScheduler(t *testing.T) {
	work := t.TempDir()
	source := filepath.Join(work, "source")
	git(t, work, "init", "--quiet", "--initial-branch=main", source)
	if err := os.WriteFile(filepath.Join(source, "README"), []byte("light\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, source, "add", ".")
	git(t, source, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "c1")
	git(t, work, "clone", "--quiet", "--bare", source, filepath.Join(work, "light.git"))

	scheduler, err := fairgate.New(fairgate.Options{MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer scheduler.Close()
	s, err := newServer(scheduler, repos{"light.git": filepath.Join(work, "light.git")}, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	for i, version := range []string{"2", "0"} {
		target := filepath.Join(work, "clone"+version)
		git(t, work, "-c", "protocol.version="+version, "clone", "--quiet", front.URL+"/light.git", target)
		if data, err := os.ReadFile(filepath.Join(target, "README")); err != nil || string(data) != "light\n" {
			t.Errorf("clone %d (protocol %s): %q %v", i, version, data, err)
		}
	}
	// The packs' client was charged: its address is the key.
	if _, ok := scheduler.AccumulatedCost("127.0.0.1"); !ok {
		t.Error("no cost charged to 127.0.0.1")
	}
	response, err := http.Get(front.URL + "/nope.git/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	response.Body.Close()
	if response.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown repository: %d", response.StatusCode)
	}
}
