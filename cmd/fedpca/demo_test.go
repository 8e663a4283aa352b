package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs `fedpca demo` as a new user would (no flags, no files, no
// network) and checks that it exits 0 and prints what the README promises
// for both analyses: components, explained variance, utility against the
// non-private result, the privacy accounting with its collusion table and
// the time of each phase.
func TestDemo(t *testing.T) {
	out, err := exec.Command(binary, "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("fedpca demo: %v\n%s", err, out)
	}
	text := string(out)
	head, rest, okPCA := strings.Cut(text, "==== pca at epsilon 1 ====")
	pca, dca, okDCA := strings.Cut(rest, "==== dca at epsilon 1 ====")
	if !okPCA || !okDCA {
		t.Fatalf("the demo's output lacks its PCA or DCA section (in that order):\n%s", text)
	}
	for analysis, section := range map[string]string{"pca": pca, "dca": dca} {
		want := []string{"components (columns; rows are features)", "flavanoids", "eigenvalues:",
			"(epsilon 1, delta 1e-06)-DP", "user colluding with", "proxy ", "one csp member",
			"utility against the non-private result", "principal angles (deg):", "accuracy",
			"owner share", "key switch", "user decrypt + analysis", "total (submitted -> result)",
			"central non-private", "bytes (payload"}
		if analysis == "pca" {
			want = append(want, "explained variance ratio:", "captured variance q/q0:")
		}
		for _, w := range want {
			if !strings.Contains(section, w) {
				t.Errorf("%s section of the demo lacks %q", analysis, w)
			}
		}
	}
	if !strings.Contains(head, "wine: UCI Wine") || !strings.Contains(head, "5 data owners") {
		t.Errorf("the demo does not name its bundled dataset and its owners:\n%s", head)
	}
}

// TestSimulateDefaultDelta: `fedpca simulate` reports the same default delta
// as `user run` and the demo (1e-6), whatever the number of rows (it used to
// default to 1/N: 0.0067 on iris, which oversold the guarantee).
func TestSimulateDefaultDelta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if out, err := exec.Command(binary, "simulate", "--dataset", "iris", "--owners", "3", "--epsilon", "1", "--json", path).CombinedOutput(); err != nil {
		t.Fatalf("fedpca simulate: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Result struct {
			Privacy struct {
				Delta float64
			}
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Result.Privacy.Delta; d <= 0 || d > 1e-6 {
		t.Fatalf("simulate reports delta %g; want at most 1e-6", d)
	}
}
