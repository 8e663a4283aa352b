//go:build ignore

// The pods' sandbox ("pause") process for the e2e cluster's containerd: it
// holds the pod's namespaces and waits until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
