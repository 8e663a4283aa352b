package main

import (
	"os/exec"
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
			"(epsilon 1, delta", "user colluding with", "proxy ", "one csp member",
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
